"""The typed payloads of the events readers rely on (``iterion.store.events``: ``*Payload``)
match what the engine writes: the golden timeline (tests/golden/event_line) and a real run
that fails, each declared field, when present, has its declared type."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from iterion.store import Store
from iterion.store import events as ev
from tests.conftest import run_cli, write_bot

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "event_line" / "v1.jsonl"


def _matches(value: Any, annotation: Any) -> bool:
    origin = get_origin(annotation)
    if annotation is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin or annotation)


def _mismatches(type_: str, payload: Mapping[str, Any]) -> list[str]:
    hints = get_type_hints(ev.PAYLOADS[type_])
    return [f"{type_}.{k}={payload[k]!r} is not {hints[k]}" for k in hints if k in payload
            and not _matches(payload[k], hints[k])]


def test_every_typed_payload_names_an_event_and_is_registered() -> None:
    assert set(ev.PAYLOADS) <= ev.EVENT_TYPES
    declared = {v for k, v in vars(ev).items() if k.endswith("Payload") and typing.is_typeddict(v)}
    assert declared == set(ev.PAYLOADS.values())
    assert all(not t.__required_keys__ for t in declared)  # total=False: an older event may lack a field


def test_the_golden_timeline_fits_the_typed_payloads() -> None:
    seen: set[str] = set()
    bad: list[str] = []
    for line in GOLDEN.read_text().splitlines():
        e = json.loads(line)
        if e["type"] in ev.PAYLOADS:
            seen.add(e["type"])
            bad += _mismatches(e["type"], e["payload"])
            # the golden's fields are all declared (a writer's extra field is fine elsewhere)
            bad += [f"{e['type']}.{k} is not declared" for k in e["payload"]
                    if k not in get_type_hints(ev.PAYLOADS[e["type"]]) and e["type"] != ev.RUN_REWOUND]
    assert not bad, "\n".join(bad)
    assert {ev.RUN_STARTED, ev.NODE_STARTED, ev.NODE_FINISHED, ev.BOUNDARY_WRITTEN, ev.ARTIFACT_PUBLISHED,
            ev.BACKEND_CALL, ev.RUN_FINISHED, ev.RUN_REWOUND, ev.RUN_RESUMED} <= seen


def test_a_real_failing_run_fits_the_typed_payloads(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        ## One tool that fails.
        tool broken:
          command: "echo partial; exit 3"

        workflow w:
          entry: broken
          broken -> done
    """)
    store_dir = tmp_path / "store"
    proc = run_cli("run", str(bot), "--json", cwd=ws, store=store_dir)
    assert proc.returncode == 5, proc.stderr  # failed_resumable
    store = Store(store_dir)
    (doc,) = store.list_runs()
    events = store.read_events(doc.id)
    failed = [e for e in events if e.type == ev.NODE_FAILED]
    assert failed and not [m for e in events if e.type in ev.PAYLOADS for m in _mismatches(e.type, e.payload)]
    p = ev.payload(failed[0], ev.NodeFailedPayload)
    assert (p.get("code"), "status 3" in (p.get("error") or "")) == ("TOOL_FAILED_PERMANENT", True)
    started = ev.payload(next(e for e in events if e.type == ev.RUN_STARTED), ev.RunStartedPayload)
    assert (started.get("run_id"), started.get("workflow")) == (doc.id, "w")
