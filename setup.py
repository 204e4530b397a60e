"""Build hook for the one C extension: the stat walk's per-directory loops (issue 13).

Optional by design: without a C compiler the install still succeeds and ``workspacetrack.walk``
uses its pure-Python twin of each function (same results, slower). A failed build is not silent:
it prints a warning block here (``pip install -v`` and ``python -m build`` show build output),
every capture on the slow path says so once per process, and ``iterion doctor`` reports it.
``ITERION_PURE=1`` at build time skips the extension on purpose (and at run time ignores it).
Everything else about the package is declared in pyproject.toml.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

WARNING = """
************************************************************************************************
WARNING: iterion's C extension (workspacetrack._fastwalk) was NOT built: {why}
iterion works without it, but every capture takes the slow pure-Python walk.
Fix: install a C compiler and the Python headers (Debian/Ubuntu: apt-get install gcc python3-dev),
then reinstall. `iterion doctor` shows the status; ITERION_PURE=1 silences the run-time note.
************************************************************************************************
"""


class OptionalBuildExt(build_ext):
    """build_ext whose failure is a loud warning instead of an error (or setuptools' quiet line)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure leaves the pure-Python path
            sys.stderr.write(WARNING.format(why=f"{type(exc).__name__}: {exc}"))

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - any build failure leaves the pure-Python path
            sys.stderr.write(WARNING.format(why=f"{type(exc).__name__}: {exc}"))


PURE = os.environ.get("ITERION_PURE", "").strip().lower() in ("1", "true", "yes", "on")

setup(
    ext_modules=[] if PURE else [
        Extension("workspacetrack._fastwalk", ["workspacetrack/_fastwalk.c"], extra_compile_args=["-O2"]),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
