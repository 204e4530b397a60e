"""The layers below the CLI never write to the terminal themselves.

Output to a person goes through ``cli/output.py``; what the engine must tell the person watching
a run goes through the run's listener (``iterion/engine/notice.py``). Read with ``ast`` from
every module of ``gitrefs.persist``, ``gitrefs``, ``workspacetrack`` and ``iterion``: a ``print`` call,
a use of ``sys.stdout``/``sys.stderr`` (or their ``__`` originals) or a ``traceback.print_*``
fails here, naming the place, unless it is one of the writers listed below with why.
"""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
BELOW_THE_CLI = ("gitrefs", "workspacetrack", "iterion")
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}

# module -> why it may write to a stream itself
ALLOWED = {
    # a process entry point of its own (the server runs it as a subprocess): its stderr is the
    # server's log file, and its stdout the handshake with the server
    "iterion/server/worker.py": "the server's execution process: its streams are the log and the handshake",
    # the run store's one-line warning when it moves a torn or foreign line of a timeline aside
    # (it happens in any command that reads a timeline, with no run and so no listener)
    "iterion/store/events.py": "the store's repair warning (events.warn)",
}


def writes_to_a_stream(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append((node.lineno, "print(...)"))
        elif (isinstance(node, ast.Attribute) and node.attr in STREAMS and isinstance(node.value, ast.Name)
              and node.value.id == "sys"):
            found.append((node.lineno, f"sys.{node.attr}"))
        elif (isinstance(node, ast.Attribute) and node.attr.startswith("print_") and isinstance(node.value, ast.Name)
              and node.value.id == "traceback"):
            found.append((node.lineno, f"traceback.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and {a.name for a in node.names} & STREAMS:
            found.append((node.lineno, "from sys import a stream"))
    return sorted(found)


def test_no_layer_below_the_cli_writes_to_the_terminal() -> None:
    bad = []
    for layer in BELOW_THE_CLI:
        for path in sorted((REPO / layer).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel in ALLOWED:
                continue
            bad += [f"{rel}:{line}: {what}" for line, what in writes_to_a_stream(parsed(path))]
    assert not bad, ("tell the person through the run's listener (iterion.engine.notice.notify) or raise a "
                     "UserError for the CLI to print:\n" + "\n".join(bad))


def test_the_allowed_writers_still_write() -> None:
    """An entry of ALLOWED that no longer writes is stale: remove it."""
    for rel in ALLOWED:
        assert writes_to_a_stream(ast.parse((REPO / rel).read_bytes())), rel


def test_the_guard_sees_each_way_to_write() -> None:
    src = ("print('x')\nsys.stderr.write('x')\nprint('x', file=sys.stdout)\ntraceback.print_exc()\n"
           "from sys import stderr\nlog.print('fine')\n")
    assert [line for line, _ in writes_to_a_stream(ast.parse(src))] == [1, 2, 3, 3, 4, 5]
