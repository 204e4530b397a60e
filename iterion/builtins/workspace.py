"""The workspace built-ins (read_file, write_file, list_dir, grep, glob): claw's own tools
(``iterion.backends.claw.tools.Workspace``), so the confinement (canonical path, outside the
workspace refused, protected defaults: git dirs and the run store), the caps and the walk
timeout are the agent's exactly. A protected path stays refused: no permission rule unlocks it
for a tool node. Output: ``{result: text}``, or ``{result: [paths]}`` for list_dir and glob.
"""

from __future__ import annotations

from typing import Any

from iterion.backends.base import setting_seconds
from iterion.backends.claw.tools import WALK_TIMEOUT_ENV, WALK_TIMEOUT_S, ToolError, Workspace
from iterion.builtins.registry import BuiltinContext, BuiltinError

# each tool's arguments (the node input may carry more: the entry node's input holds the vars)
_PARAMS = {"read_file": ("path",), "write_file": ("path", "content"), "list_dir": ("path",),
           "grep": ("pattern", "path"), "glob": ("pattern",)}
_LISTS = frozenset({"list_dir", "glob"})


def _run(name: str, ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    ws = Workspace(ctx.workspace, None, protected_dirs=ctx.protected_dirs,
                   timeout_s=setting_seconds(WALK_TIMEOUT_ENV, WALK_TIMEOUT_S))
    given = {k: args[k] for k in _PARAMS[name] if k in args and args[k] is not None}
    try:
        text = ws.call(name, given)
    except ToolError as exc:
        raise BuiltinError(f"{name}: {exc}") from None
    if name in _LISTS:
        lines = [] if text == "(no match)" else text.splitlines()
        return {"result": [ln for ln in lines if not ln.startswith("[... ")],
                "truncated": any(ln.startswith("[... ") for ln in lines)}
    return {"result": text}


def call_read_file(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    return _run("read_file", ctx, args)


def call_write_file(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    return _run("write_file", ctx, args)


def call_list_dir(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    return _run("list_dir", ctx, args)


def call_grep(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    return _run("grep", ctx, args)


def call_glob(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    return _run("glob", ctx, args)
