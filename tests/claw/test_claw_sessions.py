"""Sessions between claw nodes: inherit continues an earlier node's conversation, fork copies it,
inherit_if_available falls back to fresh, and _needs_interaction is an ask like _ask_user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion import ir
from iterion.backends.base import BackendRequest
from iterion.backends.schema import finish_structured
from iterion.store import RunStatus, Store

from .conftest import final, launch, write_bot
from .scripted_server import ScriptedLLM

BOT = """\
schema result:
  summary: string

agent draft:
  backend: claw
  model: "openai/test-model"
  output: result
  user: "Draft the plan."

agent polish:
  backend: claw
  model: "openai/test-model"
  output: result
  session: {mode}
  user: "Now polish it."

workflow w:
  entry: draft
  draft -> polish with {{ {with_} }}
  polish -> done
"""


def texts(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] != "system"]


@pytest.mark.parametrize("mode", ["inherit", "fork"])
def test_inherit_and_fork_continue_the_earlier_conversation(tmp_path: Path, ws: Path, store: Store,
                                                            llm: ScriptedLLM, mode: str) -> None:
    bot = write_bot(tmp_path / "src", BOT.format(mode=mode,
                                                 with_='_session_id: "{{outputs.draft._session_id}}"'))
    llm.add(final("plan v1"), final("plan v2"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert texts(llm.requests[1]) == ["Draft the plan.", json.dumps({"summary": "plan v1"}), "Now polish it."]
    assert llm.requests[1]["body"]["model"] == "test-model"  # the provider prefix is routing, not the name
    # both continue in their own file: the earlier node's conversation is never changed after it
    assert r.outputs["polish"]["_session_id"] != r.outputs["draft"]["_session_id"]
    conv_dir = store.run_dir(r.run_id) / "conversations"
    draft = json.loads((conv_dir / f"{r.outputs['draft']['_session_id']}.json").read_text())
    assert len(draft["messages"]) == 2


def test_inherit_if_available_without_a_session_starts_fresh(tmp_path: Path, ws: Path, store: Store,
                                                             llm: ScriptedLLM) -> None:
    bot = write_bot(tmp_path / "src", BOT.format(mode="inherit_if_available", with_='note: "x"'))
    llm.add(final("plan v1"), final("plan v2"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert texts(llm.requests[1]) == ["Now polish it."]


def test_inherit_without_a_session_id_fails_naming_the_fix(tmp_path: Path, ws: Path, store: Store,
                                                           llm: ScriptedLLM) -> None:
    bot = write_bot(tmp_path / "src", BOT.format(mode="inherit", with_='note: "x"'))
    llm.add(final("plan v1"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "TEMPLATE_FAILED"
    assert "session inherit needs `_session_id` in its input" in (r.error or "")
    assert len(llm.requests) == 1  # never retried: the same verdict every time


@pytest.mark.parametrize("answer", ['{"_needs_interaction": "Which branch?"}',
                                    '{"_needs_interaction": {"question": "Which branch?"}}',
                                    '{"_ask_user": "Which branch?"}'])
def test_cli_agents_needs_interaction_is_an_ask(answer: str) -> None:
    schema = ir.Schema("r", (ir.SchemaField("branch", ir.FieldType.STRING),))
    req = BackendRequest(node_id="n", output_schema=schema, allow_ask_user=True)
    assert finish_structured(req, answer) == (None, "Which branch?", ())
    no_schema = BackendRequest(node_id="n", allow_ask_user=True)
    assert finish_structured(no_schema, answer)[1] == "Which branch?"
