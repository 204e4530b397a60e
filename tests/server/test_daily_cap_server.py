"""`iterion server --max-daily-cost-usd`: the cap of every run the server executes (the run
processes it starts inherit it), over real HTTP to a scripted LLM."""

from __future__ import annotations

import json
from pathlib import Path

from iterion.store.spend import FileSpendCounter
from tests.claw.conftest import agent_bot, calls
from tests.claw.scripted_server import ScriptedLLM
from tests.conftest import make_checkout, run_cli
from tests.server.conftest import start_server, wait_status

TURN = {"usage": {"in": 100, "out": 0}}  # $1 at the price below


def test_the_server_flag_caps_the_runs_it_launches(tmp_path: Path) -> None:
    project = make_checkout(tmp_path / "project")
    (project / "greet.txt").write_text("hello\n")
    agent_bot(project / "flows", "openai")
    read = {**calls(("read_file", {"path": "greet.txt"})), **TURN}
    with ScriptedLLM([]) as llm:
        env = {"OPENAI_BASE_URL": llm.openai_url, "ITERION_MODEL_PRICES": json.dumps({"test-model": [10000, 0]})}
        server = start_server(project, "--max-daily-cost-usd", "1.5", env=env)  # no cap in its environment
        try:
            c = server.client()
            llm.add(read, read, read)
            launched = c.post("/api/runs", json={"file": "flows/wf.bot"})
            assert launched.status_code == 201, launched.text
            rid = launched.json()["run_id"]
            wait_status(c, rid, {"paused_operator"})
            assert len(llm.requests) == 2  # $1, then $2 reached the $1.5 cap
            paused = [e for e in c.get(f"/api/runs/{rid}/events").json()["events"] if e["type"] == "run_paused"]
            assert paused[-1]["payload"]["pause_reason"] == "daily_cap"
            assert paused[-1]["payload"]["cap_usd"] == 1.5
            assert FileSpendCounter(server.store).today().spent_usd == 2.0
            # an HTTP resume is refused with the figures, the run left as it was
            refused = c.post(f"/api/runs/{rid}/resume", json={})
            assert refused.status_code >= 400, refused.text
            assert "daily spend cap $1.5 reached: $2 spent today" in refused.json()["error"]
            assert server.run_json(rid)["status"] == "paused_operator" and len(llm.requests) == 2
        finally:
            server.stop()
    bad = run_cli("server", "--port", "0", "--max-daily-cost-usd", "-1", cwd=project)
    assert bad.returncode == 2 and "--max-daily-cost-usd" in bad.stderr
