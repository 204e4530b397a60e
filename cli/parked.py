"""How a parked run says how to continue: the question, its fields, the exact command.

Shared by the `run`/`resume` summary and `inspect --run-id`, so both print the same commands.
Every command is built by ``iterion.invocation.command`` (the program as invoked, arguments
quoted), so it runs pasted as printed once each field's placeholder (``'<true|false>'``,
``'<low|high>'``, ``'<text>'``) is replaced by an answer; pasted unchanged it is refused, so no
printed default ever answers (approves) for a person (iterion/engine/placeholder.py).
"""

from __future__ import annotations

import re
from typing import Any

from iterion.invocation import command

ACK_FIELD = "acknowledge_recovery"

# the failure message of a cap (iterion.budget.BudgetExceeded): which axis, at what cap
_CAP = re.compile(r"budget exceeded: (max_[a-z_]+) cap \$?(\S+) reached")


def _example(field: dict[str, Any]) -> str:
    """The field's placeholder (refused if pasted unchanged: iterion/engine/placeholder.py); the
    recovery acknowledgement alone keeps ``true``: it retries a node, it approves nothing."""
    from iterion.engine.placeholder import placeholder

    if field.get("name") == ACK_FIELD:
        return "true"
    return placeholder(str(field.get("type") or "string"), field.get("enum"))


def field_line(field: dict[str, Any]) -> str:
    """``approved: bool``, ``level: string, one of low, high``."""
    kind = str(field.get("type") or "string")
    enum = field.get("enum")
    return f"{field.get('name')}: {kind}" + (f", one of {', '.join(map(str, enum))}" if enum else "")


def store_args(store: Any) -> list[str]:
    """``["--store-dir", D]`` when a command run from the current directory would not find
    ``store`` by itself (README "Where things live"), else nothing; for a JetStream store also
    ``["--nats", URL]`` unless $ITERION_NATS_URL already names it."""
    from pathlib import Path

    from iterion.store import resolve_store_dir

    out = [] if resolve_store_dir(None, Path.cwd()) == store.root else ["--store-dir", str(store.root)]
    if getattr(store, "shared", False):
        from iterion.store.opener import NatsUrlError, nats_url

        try:
            implied = nats_url(None)
        except NatsUrlError:
            implied = None
        if implied != store.docs.url:
            out = ["--nats", store.docs.url, *out]
    return out


def answer_command(run_id: str, pending: dict[str, Any], store_args: list[str]) -> str:
    """The `resume` command answering ``pending`` (its questions' fields, example values)."""
    if pending.get("permission"):  # an agent's tool call waiting for a permission decision
        tool = str(pending["permission"].get("tool") or "TOOL")
        from iterion.engine.placeholder import PERMISSION_FIELD, PERMISSION_PLACEHOLDER

        return (command("resume", "--run-id", run_id, *store_args, "--answer",
                        f"{PERMISSION_FIELD}={PERMISSION_PLACEHOLDER}")
                + f"   (or --permission-allow '{tool}(...)')")
    fields = list(pending.get("fields") or (pending.get("questions") or {}).get("fields") or [])
    words: list[str] = []
    for f in fields or [{"name": "answer", "type": "string"}]:
        words += ["--answer", f"{f.get('name')}={_example(f)}"]
    return command("resume", "--run-id", run_id, *store_args, *words)


def raised_cap(error: str | None) -> list[str]:
    """``["--max-tokens", "2000"]``: the flag that raises the cap named in a BUDGET_EXCEEDED
    message to twice its value ([] when the message names none)."""
    m = _CAP.search(error or "")
    if not m:
        return []
    from iterion.budget import (  # (pydantic: not on the run list)
        DurationError,
        format_duration,
        parse_duration,
    )

    axis, shown = m.group(1), m.group(2)
    flag = "--" + axis.replace("_", "-")
    try:
        if axis == "max_duration":
            return [flag, format_duration(parse_duration(shown) * 2)]
        value = float(shown) * 2
    except (ValueError, DurationError):
        return []
    return [flag, f"{value:g}" if axis == "max_cost_usd" else str(int(value))]


def resume_command(run_id: str, failure_code: str | None, error: str | None, store_args: list[str]) -> str:
    """The `resume` command of a failed_resumable/cancelled/paused_operator run; for
    BUDGET_EXCEEDED with the ``--max-*`` flag raising the cap that stopped it."""
    extra = raised_cap(error) if failure_code == "BUDGET_EXCEEDED" else []
    if not extra and error and error.startswith("daily spend cap"):  # parked by the store's daily cap
        from iterion.budget import raised_daily_cap

        value = raised_daily_cap(error)
        extra = ["--max-daily-cost-usd", value] if value else []
    return command("resume", "--run-id", run_id, *store_args, *extra)


def stored_in(store: Any, run_id: str) -> str:
    """Where the run is kept, for the `stored in:` line: its directory; for a JetStream store the
    NATS store first (its documents and events live there), then this machine's part."""
    local = store.run_dir(run_id)
    if getattr(store, "shared", False):
        return f"{store.where()}, run {run_id}; this machine's part: {local}"
    return str(local)


def inspect_command(run_id: str, store_args: list[str]) -> str:
    return command("inspect", "--run-id", run_id, *store_args)
