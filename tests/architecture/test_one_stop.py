"""A run stops one way: ``iterion.engine.stop.stop_run`` (docs/technical/durability.md section 3).

The write order of a stop (boundary, interaction record, checkpoint, finalisation, status,
events) is encoded once. These checks read the engine's source with ``ast`` and fail when a
stopping path writes a status or reaches into the runner's private members by hand again.
"""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "iterion" / "engine"
STOPPERS = ("runner.py", "control.py", "recovery.py", "storage.py", "execution.py", "auto_resume.py")


def _tree(name: str) -> ast.Module:
    return ast.parse((ENGINE / name).read_bytes(), filename=name)


def test_no_engine_module_reaches_into_a_runners_private_members() -> None:
    bad = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in ("runner", "host")):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, "use the StopHost protocol (iterion/engine/stop.py) instead:\n" + "\n".join(bad)


def test_the_park_helpers_take_the_typed_protocol_not_any() -> None:
    for name, func in (("control.py", "park_operator"), ("recovery.py", "park_recovery")):
        (fn,) = [n for n in ast.walk(_tree(name)) if isinstance(n, ast.FunctionDef) and n.name == func]
        annotation = fn.args.args[0].annotation
        assert isinstance(annotation, ast.Name) and annotation.id == "StopHost", f"{name}: {func}"


def test_only_the_stop_module_writes_a_run_status_from_inside_a_run() -> None:
    """``write_status`` (the status write that survives a full disk) is called by ``stop_run``
    alone; the run's stopping paths in these modules describe a ``Stop`` instead."""
    for name in STOPPERS:
        calls = [n for n in ast.walk(_tree(name)) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "write_status"]
        assert not calls, f"{name} writes a status by hand at line {calls[0].lineno}"
    stop = _tree("stop.py")
    assert any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "write_status"
               for n in ast.walk(stop))
