"""How iterion spells itself in a command it prints for a person to paste (hints, summaries).

The one home of that rule: every printed ``iterion ...`` command is built by ``command``, so it
names the program the way it was invoked and quotes its arguments (``iterion.shellquote``):

- invoked by a name found on ``PATH`` (``iterion``) -> ``iterion``;
- invoked by a path (``.venv/bin/iterion``, ``/opt/x/bin/iterion``) -> that path as typed, so
  the command works pasted into the same shell, from the same directory;
- invoked as a module (``python -m cli.main``) -> ``<this interpreter> -m cli.main``;
- ``ITERION_PROG`` set -> its value, verbatim (a wrapper script names itself).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

PROGRAM_ENV = "ITERION_PROG"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def program(*, anywhere: bool = False) -> str:
    """The program as a person types it (shell text, already quoted); ``anywhere``: a relative
    path made absolute, for a command printed after a ``cd`` (`iterion init`'s next step)."""
    # shellquote pulls in the expression evaluator: imported when a hint is printed, not at start-up
    from iterion.shellquote import printed_word

    override = os.environ.get(PROGRAM_ENV)
    if override:
        return override
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    name = Path(argv0).name
    if not argv0 or name in ("__main__.py", "main.py", "-c") or argv0.endswith(".py"):
        return f"{printed_word(sys.executable or 'python3')} -m cli.main"
    found = shutil.which(name)
    if found and (os.sep not in argv0 or _same_file(found, argv0)):
        return printed_word(name)
    return printed_word(os.path.abspath(argv0) if anywhere else argv0)


def command(*words: str, anywhere: bool = False) -> str:
    """``program() word...`` with each word quoted for the shell when it needs it."""
    from iterion.shellquote import printed_word

    return " ".join([program(anywhere=anywhere), *(printed_word(str(w)) for w in words)])
