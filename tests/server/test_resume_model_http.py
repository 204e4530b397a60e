"""`model` on HTTP resume and `iterion remote runs resume --model`: the provider sees it, later
resumes keep it, a blank one is refused with the CLI's message."""

from __future__ import annotations

import json
from pathlib import Path

from tests.claw.conftest import final
from tests.claw.scripted_server import ScriptedLLM
from tests.claw.test_resume_model import BOT
from tests.conftest import make_checkout, run_cli, write_bot
from tests.server.conftest import start_server, wait_status


def test_http_and_remote_resume_carry_the_model(tmp_path: Path) -> None:
    project = make_checkout(tmp_path / "project")
    bot = write_bot(project / "flows", BOT)
    with ScriptedLLM([]) as llm:
        env: dict[str, str | None] = {"OPENAI_BASE_URL": llm.openai_url, "ANTHROPIC_BASE_URL": llm.url,
                                      "OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None, "ITERION_STORE_DIR": None,
                                      "ITERION_BACKEND": None, "ITERION_DEFAULT_BACKEND": None}
        llm.add(final("a"))
        r = run_cli("run", str(bot), "--json", cwd=project, env=env)
        assert r.returncode == 4, r.stderr
        rid = json.loads(r.stdout)["run_id"]
        server = start_server(project, env={k: v for k, v in env.items() if v is not None})
        try:
            c = server.client()
            blank = c.post(f"/api/runs/{rid}/resume", json={"answers": {"approved": True}, "model": " "})
            assert blank.status_code == 422 and blank.json()["error"].startswith("--model:")
            assert server.run_json(rid)["status"] == "paused_waiting_human"

            llm.add(final("b"))
            remote = run_cli("remote", "runs", "resume", rid, "--answer", "approved=true", "--model", "gpt-remote",
                             cwd=project, env={"ITERION_SERVER": server.url, "ITERION_SERVER_TOKEN": server.token})
            assert remote.returncode == 4, remote.stderr
            assert [q["body"]["model"] for q in llm.requests] == ["test-model", "gpt-remote"]

            llm.add(final("c"))  # plain HTTP resume, no model: the recorded one is re-applied
            assert c.post(f"/api/runs/{rid}/resume", json={"answers": {"approved": True}}).status_code == 202
            wait_status(c, rid, {"finished"})
            assert [q["body"]["model"] for q in llm.requests] == ["test-model", "gpt-remote", "gpt-remote"]
            assert server.run_json(rid)["options"]["model"] == "gpt-remote"

            # a launch over HTTP takes the model too (as `iterion run --model`)
            llm.add(final("d"))
            launched = c.post("/api/runs", json={"file": "flows/wf.bot", "model": "gpt-launch"})
            assert launched.status_code == 201, launched.text
            wait_status(c, launched.json()["run_id"], {"paused_waiting_human"})
            assert llm.requests[-1]["body"]["model"] == "gpt-launch"
            assert c.post("/api/runs", json={"file": "flows/wf.bot", "model": 7}).status_code == 422
        finally:
            server.stop()
