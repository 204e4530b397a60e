"""tool: a shell command (or a script in a language) run in the workspace, templates resolved.

Substituted values are quoted (`command:` and sh/bash scripts: shell words; python/node
scripts: JSON literals; ``iterion.shellquote``). The node ends when the tool's shell exits;
children it left in its process group are reported as a ``tool_children_left`` event and, by
default, killed after a grace (``iterion.engine.procgroup``).

stdout that is one JSON object is the output; otherwise the output is ``{result, stdout,
stderr, exit_code}``. A non-zero exit fails the node with its code and output. With an
``output:`` schema the output is checked, and a mismatch (fields missing or of the wrong type)
is a ``tool_output_mismatch`` warning event naming them, after which the node goes on with
the fields present: the original never rejects a tool's output (docs/language.md §2, §10).
SCHEMA_VALIDATION stays for LLM and router outputs.

A one-word command naming a registered built-in (``iterion.builtins.registry``, docs/language.md "Built-in tools") is
called in-process instead: the node input as a JSON object in, a JSON object out (the same
mismatch check); its refusal fails the node TOOL_FAILED_PERMANENT with the built-in's message.

A stream longer than its inline share (``iterion.engine.outputcap``) is kept whole in a file
beside the run; the output holds its head and, under ``truncated``, the mark saying so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iterion.engine.coerce import type_ok
from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.errors import NodeFailure, ToolLaunchError
from iterion.engine.outputcap import TRUNCATED_KEY, output_prefix
from iterion.engine.toolproc import run_command, run_script
from iterion.envsubst import expand_command
from iterion.failure_codes import FailureCode
from iterion.ir import Schema
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
    name = builtin_name(node.command) if node.script is None else None
    if name is not None:
        return _builtin(ctx, call, name)
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
    if isinstance(data, dict):
        output = data  # stdout that is one JSON object is the output (docs/language.md §2)
    else:
        # text: `result` (the original's), plus stdout/stderr/exit_code (this project's, §9)
        output = {"result": text, "stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code,
                  **({TRUNCATED_KEY: marks} if marks else {})}
    if node.output_schema is not None:
        _report_mismatch(ctx, node.id, call.iteration, node.output_schema, output)
    return NodeResult(output)


def builtin_name(command: str | None) -> str | None:
    """The built-in a ``command:`` names (one word, no template, no shell character), or None."""
    from iterion.builtins.registry import is_builtin, one_word

    word = one_word(command or "")
    return word if word is not None and is_builtin(word) else None


def _builtin(ctx: ExecContext, call: NodeCall, name: str) -> NodeResult:
    from iterion.builtins.registry import BuiltinContext, BuiltinError
    from iterion.builtins.registry import call as call_builtin

    node = call.node
    guard = ctx.duration_guard(node.id)

    def check() -> None:
        ctx.token.check()
        if guard is not None:
            guard()

    bctx = BuiltinContext(workspace=ctx.workspace, run_dir=ctx.run_dir, run_id=ctx.run_id,
                          protected_dirs=(ctx.store.root,), check=check)
    check()
    try:
        output = call_builtin(name, bctx, json.loads(json.dumps(call.input, default=str)))
    except BuiltinError as exc:
        raise NodeFailure(FailureCode.TOOL_FAILED_PERMANENT, f"tool {node.id}: {exc}", node=node.id) from None
    if name == "privacy_filter" and output.get("placeholders"):  # a redaction: the run document's vars may hold what it redacted
        from iterion.builtins.vault import scrub_run_fields

        ctx.store.update_run(ctx.run_id, lambda doc: scrub_run_fields(ctx.run_dir, doc))
    if node.output_schema is not None:
        _report_mismatch(ctx, node.id, call.iteration, node.output_schema, output)
    return NodeResult(output)


TOOL_OUTPUT_MISMATCH = "tool_output_mismatch"


def _report_mismatch(ctx: ExecContext, node: str, iteration: int, schema: Schema, output: dict[str, Any]) -> None:
    """A ``warning`` event coded ``tool_output_mismatch`` naming the declared fields missing from
    ``output`` and those of the wrong type; nothing when it matches (undeclared keys are ignored)."""
    missing = [f.name for f in schema.fields if f.name not in output]
    wrong = [{"field": f.name, "expected": f.type.value, "got": _kind(output[f.name])}
             for f in schema.fields if f.name in output and not type_ok(f, output[f.name])]
    if not missing and not wrong:
        return
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + [
        f"{w['field']} is {w['got']}, not {w['expected']}" for w in wrong]
    ctx.emit(ev.WARNING, node, iteration, {
        "code": TOOL_OUTPUT_MISMATCH, "schema": schema.name, "missing": missing, "wrong_type": wrong,
        "message": f"tool {node}: output does not match schema {schema.name} ({'; '.join(parts)}); "
                   "the node goes on with the fields present"})


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "map"
