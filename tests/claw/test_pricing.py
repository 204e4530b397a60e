"""Prices from the maintained data (genai-prices), cache tokens priced, $ITERION_MODEL_PRICES,
and the warning a cost-capped run gives at its start for a model without a price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion.backends.pricing import cost_usd, priced
from .conftest import agent_bot, events, final, launch
from .scripted_server import ScriptedLLM
from ..conftest import run_cli


def test_current_models_are_priced() -> None:
    for model in ("gpt-5", "gpt-5-mini", "openai/gpt-5", "gpt-4o-mini", "o3", "claude-sonnet-4-6",
                  "anthropic/claude-opus-4-5"):
        assert priced(model), model
    assert cost_usd("gpt-5", 1_000_000, 1_000_000) == pytest.approx(1.25 + 10.0)
    assert cost_usd("gpt-5-mini", 1_000_000, 0) > 0  # was $0 under the old 12-row table: a cap never fired
    assert cost_usd("claude-opus-4-5", 1_000_000, 1_000_000) == pytest.approx(5.0 + 25.0)  # not 15/75


def test_cache_reads_cost_less_than_fresh_input() -> None:
    fresh = cost_usd("claude-sonnet-4-6", 100_000, 0)
    cached = cost_usd("claude-sonnet-4-6", 100_000, 0, cache_read=90_000)
    written = cost_usd("claude-sonnet-4-6", 100_000, 0, cache_write=90_000)
    assert cached < fresh < written


def test_unknown_models_cost_nothing_and_overrides_price_them(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not priced("smollm2") and cost_usd("smollm2", 10**6, 10**6) == 0.0
    monkeypatch.setenv("ITERION_MODEL_PRICES", json.dumps({"smollm2": [1, 2, 0.5]}))
    assert priced("smollm2")
    assert cost_usd("smollm2", 1_000_000, 1_000_000, cache_read=500_000) == pytest.approx(0.5 + 0.25 + 2.0)


def test_a_cost_cap_on_an_unpriced_model_warns_at_start(tmp_path: Path, ws: Path, llm: ScriptedLLM) -> None:
    from iterion.store import RunStatus, Store

    store = Store(tmp_path / "store")
    bot = agent_bot(tmp_path / "src", "openai", workflow_extra="budget:\n  max_cost_usd: 1\n  max_tokens: 1000")
    llm.add(final("ok"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    warned = [e.payload for e in events(store, r.run_id, "warning") if e.payload.get("code") == "MODEL_UNPRICED"]
    assert len(warned) == 1 and warned[0]["model"] == "test-model" and warned[0]["node"] == "coder"
    assert "max_cost_usd ($1) cannot see its spending" in warned[0]["message"]
    started = [e.type for e in events(store, r.run_id)]
    assert started.index("warning") < started.index("node_started")  # said at the start
    # the CLI says it too, one line
    llm.add(final("again"))
    proc = run_cli("run", str(bot), "--workspace", str(ws), "--store-dir", str(tmp_path / "store2"),
                   env={"OPENAI_BASE_URL": llm.openai_url})
    assert proc.returncode == 0, proc.stderr
    assert "warning: node coder: model test-model has no known price" in proc.stderr


def test_a_priced_model_or_no_cap_does_not_warn(tmp_path: Path, ws: Path, llm: ScriptedLLM) -> None:
    from iterion.store import Store

    store = Store(tmp_path / "store")
    for extra, model_bot in (("budget:\n  max_tokens: 1000", "plain"), ("budget:\n  max_cost_usd: 1", "priced")):
        bot = agent_bot(tmp_path / model_bot, "openai", workflow_extra=extra)
        if model_bot == "priced":
            bot.write_text(bot.read_text().replace('"test-model"', '"gpt-5-mini"'))
        llm.add(final("ok"))
        r = launch(store, bot, ws)
        assert not [e for e in events(store, r.run_id, "warning") if e.payload.get("code") == "MODEL_UNPRICED"]
