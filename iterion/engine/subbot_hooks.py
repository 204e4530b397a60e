"""How a subbot node starts or continues its child run without importing launch and resume.

``launch`` and ``resume`` import the runner, which imports the node executors: the subbot
executor (iterion/engine/nodes/subbot.py) cannot import them back. Each of those two modules
registers its entry point here when it is imported; a run executing at all went through one of
them, and ``resume`` imports ``launch`` (a resumed parent may launch a fresh child).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iterion.engine.result import RunResult
    from iterion.engine.source import CompiledSource
    from iterion.store import Store

# (store, path, compiled, **LaunchOptions fields) -> RunResult
LaunchChild = Callable[..., "RunResult"]
# (store, run id, **ResumeOptions fields) -> RunResult
ResumeChild = Callable[..., "RunResult"]

_hooks: dict[str, Callable[..., Any]] = {}


def provide_launch(fn: LaunchChild) -> None:
    _hooks["launch"] = fn


def provide_resume(fn: ResumeChild) -> None:
    _hooks["resume"] = fn


def launch_child(store: Store, path: Path, compiled: CompiledSource, **options: Any) -> RunResult:
    result: RunResult = _hooks["launch"](store, path, compiled, **options)
    return result


def resume_child(store: Store, run_id: str, **options: Any) -> RunResult:
    result: RunResult = _hooks["resume"](store, run_id, **options)
    return result
