"""`resume --model`: every LLM call's model from that resume on, re-applied by later resumes
unless replaced, recorded on the run (its options and the run_resumed event)."""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import run_cli, write_bot
from .conftest import final
from .scripted_server import ScriptedLLM

BOT = """
schema result:
  summary: string

schema ok:
  approved: bool

agent first:
  backend: claw
  model: "test-model"
  provider: openai
  user: "one"
  output: result

human gate1:
  output: ok
  instructions: "Look."

agent second:
  backend: claw
  model: "test-model"
  provider: openai
  user: "two"
  output: result

human gate2:
  output: ok
  instructions: "Look again."

agent third:
  backend: claw
  model: "test-model"
  provider: openai
  user: "three"
  output: result

workflow w:
  entry: first
  first -> gate1
  gate1 -> second
  second -> gate2
  gate2 -> third
  third -> done
"""


def _models(llm: ScriptedLLM) -> list[str]:
    return [r["body"].get("model") for r in llm.requests]


def test_resume_model_reaches_the_provider_and_sticks(tmp_path: Path, ws: Path, llm: ScriptedLLM) -> None:
    bot = write_bot(tmp_path / "src", BOT)
    store = tmp_path / "store"
    env = {"OPENAI_BASE_URL": llm.openai_url, "ANTHROPIC_BASE_URL": llm.url}
    where = ["--store-dir", str(store)]
    llm.add(final("a"))
    r = run_cli("run", str(bot), "--workspace", str(ws), *where, "--json", env=env)
    assert r.returncode == 4, r.stderr
    rid = json.loads(r.stdout)["run_id"]
    assert _models(llm) == ["test-model"]

    llm.add(final("b"))
    r = run_cli("resume", "--run-id", rid, *where, "--answer", "approved=true", "--model", "gpt-swapped", env=env)
    assert r.returncode == 4, r.stderr
    assert _models(llm) == ["test-model", "gpt-swapped"]  # the node's own model: replaced

    llm.add(final("c"))  # a later resume without --model: re-applied from the run
    r = run_cli("resume", "--run-id", rid, *where, "--answer", "approved=true", env=env)
    assert r.returncode == 0, r.stderr
    assert _models(llm) == ["test-model", "gpt-swapped", "gpt-swapped"]

    doc = json.loads((store / "runs" / rid / "run.json").read_text())
    assert doc["options"]["model"] == "gpt-swapped"
    r = run_cli("inspect", "--run-id", rid, *where, "--events", "--type", "run_resumed", "--json")
    assert r.returncode == 0, r.stderr
    resumed = [e for e in json.loads(r.stdout)["events"] if e["type"] == "run_resumed"]
    assert [e["payload"]["model"] for e in resumed] == ["gpt-swapped", "gpt-swapped"]


def test_a_blank_model_is_refused_before_anything_changes(tmp_path: Path, ws: Path, llm: ScriptedLLM) -> None:
    bot = write_bot(tmp_path / "src", BOT)
    store = tmp_path / "store"
    env = {"OPENAI_BASE_URL": llm.openai_url, "ANTHROPIC_BASE_URL": llm.url}
    llm.add(final("a"))
    r = run_cli("run", str(bot), "--workspace", str(ws), "--store-dir", str(store), "--json", env=env)
    rid = json.loads(r.stdout)["run_id"]
    before = (store / "runs" / rid / "run.json").read_bytes()
    r = run_cli("resume", "--run-id", rid, "--store-dir", str(store), "--answer", "approved=true",
                "--model", " ", env=env)
    assert r.returncode == 2 and r.stderr.startswith("error: --model:"), r.stderr
    assert (store / "runs" / rid / "run.json").read_bytes() == before
