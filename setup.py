"""Build hook for the one C extension: the stat walk's per-directory loops (issue 13).

``optional=True``: without a C compiler the install still succeeds and
``workspacetrack.walk`` uses its pure-Python twin of each function (same results, slower).
Everything else about the package is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("workspacetrack._fastwalk", ["workspacetrack/_fastwalk.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
