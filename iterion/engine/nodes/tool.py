"""tool: a shell command (or a script in a language) run in the workspace, templates resolved.

Substituted values are quoted (`command:` and sh/bash scripts: shell words; python/node
scripts: JSON literals; ``iterion.shellquote``). The node ends when the tool's shell exits;
children it left in its process group are reported as a ``tool_children_left`` event and, by
default, killed after a grace (``iterion.engine.procgroup``).

With an output schema, stdout must be one JSON object matching it; without, the output is
``{stdout, stderr, exit_code}``. A non-zero exit fails the node with its code and output.

A stream longer than its inline share (``iterion.engine.outputcap``) is kept whole in a file
beside the run; the output holds its head and, under ``truncated``, the mark saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

from iterion.engine.coerce import validate_output
from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.errors import NodeFailure, ToolLaunchError
from iterion.engine.outputcap import TRUNCATED_KEY, output_prefix
from iterion.engine.toolproc import run_command, run_script
from iterion.envsubst import expand_command
from iterion.failure_codes import FailureCode
from iterion.sandbox import Role
from iterion.shellquote import script_mode
from iterion.store import events as ev

# sysexits.h EX_TEMPFAIL: the conventional "try again later" exit status
EX_TEMPFAIL = 75
_TAIL = 2000


def _tail(text: str) -> str:
    return text if len(text) <= _TAIL else "..." + text[-_TAIL:]


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    node = call.node
    env = ctx.tool_env(node.id, call.iteration)
    check = ctx.duration_guard(node.id)

    def wrap(argv: list[str], files: tuple[Path, ...]) -> list[str]:  # the author's command: .git writable
        return ctx.wrap(argv, node.id, Role.TOOL, ro_files=files)

    keep = output_prefix(ctx.run_dir, node.id, call.iteration)
    what = f"tool {node.id}"
    try:
        if node.script is not None:
            script = render_text(expand_command(node.script, env), call.scope, node.id, "script", script_mode(node.language))
            result = run_script(script, node.language or "sh", cwd=ctx.workspace, env=env, token=ctx.token,
                                check=check, wrap=wrap, keep_output=keep, what=what)
        else:
            command = render_text(expand_command(node.command or "", env), call.scope, node.id, "command", "shell")
            result = run_command(command, cwd=ctx.workspace, env=env, token=ctx.token, check=check, wrap=wrap,
                                 keep_output=keep, what=what)
    except ToolLaunchError as exc:
        raise NodeFailure(FailureCode.TOOL_FAILED_PERMANENT, f"tool {node.id}: {exc}", node=node.id) from None
    setup = ctx.sandbox.setup_failed(node.id, result.exit_code, result.stderr) if ctx.sandbox else None
    if setup is not None:  # the command never ran: not the tool's failure
        raise NodeFailure(FailureCode.SANDBOX_SETUP_FAILED, f"tool {node.id}: the sandbox did not start: {setup}",
                          node=node.id)
    if result.children_left is not None:
        ctx.emit(ev.TOOL_CHILDREN_LEFT, node.id, call.iteration, result.children_left.payload())
    marks = result.marks()
    if result.exit_code != 0:
        code = FailureCode.TOOL_FAILED_TRANSIENT if result.exit_code == EX_TEMPFAIL else FailureCode.TOOL_FAILED_PERMANENT
        detail = _tail(result.stderr.strip() or result.stdout.strip())
        raise NodeFailure(code, f"tool {node.id} exited with status {result.exit_code}"
                          + (f": {detail}" if detail else ""), node=node.id,
                          details={"exit_code": result.exit_code, "stdout": _tail(result.stdout),
                                   "stderr": _tail(result.stderr), **({TRUNCATED_KEY: marks} if marks else {})})
    text = result.stdout.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if node.output_schema is None:
        if isinstance(data, dict):
            return NodeResult(data)  # stdout that is one JSON object is the output (docs/language.md §2)
        # text: `result` (the original's), plus stdout/stderr/exit_code (this project's, §9)
        return NodeResult({"result": text, "stdout": result.stdout, "stderr": result.stderr,
                           "exit_code": result.exit_code, **({TRUNCATED_KEY: marks} if marks else {})})
    if data is None:
        raise NodeFailure(FailureCode.SCHEMA_VALIDATION,
                          f"tool {node.id}: stdout is not one JSON object (schema {node.output_schema.name}): "
                          f"{_tail(text)[:200]!r}", node=node.id, details={"stdout": _tail(result.stdout)}) from None
    return NodeResult(validate_output(node.id, node.output_schema, data))

