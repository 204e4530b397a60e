"""`iterion artifacts` / `iterion attachments --nats URL` on another machine's store directory:
the run's artifacts and its attachment's exact bytes come from JetStream."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.conftest import make_checkout, run_cli, write_bot
from tests.natsserver import NatsServer
from tests.server.test_readers import BLOB, BOT, SCRIPT


def test_readers_read_a_shared_run_from_another_store_dir(nats_server: NatsServer, tmp_path: Path) -> None:
    env: dict[str, str | None] = {"ITERION_STORE_DIR": None, "ITERION_NATS_URL": None,
                                  "ITERION_NATS_PREFIX": "rd" + uuid.uuid4().hex[:8]}
    project = make_checkout(tmp_path / "project")
    bot = write_bot(project / "flows", BOT, SCRIPT)
    (project / "blob.bin").write_bytes(BLOB)
    nats = ["--nats", nats_server.url]
    r = run_cli("run", str(bot), *nats, "--json", cwd=project, env=env)
    assert r.returncode == 4, r.stderr
    rid = json.loads(r.stdout)["run_id"]
    r = run_cli("resume", "--run-id", rid, *nats, "--answer", "approved=true", "--answer", "doc=@./blob.bin",
                "--json", cwd=project, env=env)
    assert r.returncode == 4, r.stderr

    elsewhere = tmp_path / "elsewhere"  # another machine: its own store directory, the same JetStream
    elsewhere.mkdir()
    where = [*nats, "--store-dir", str(elsewhere / "store")]
    listed = run_cli("artifacts", "--run-id", rid, *where, "--json", cwd=elsewhere, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [(a["node"], a["version"]) for a in json.loads(listed.stdout)["artifacts"]] == [
        ("draft", 1), ("gate", 1), ("review", 1)]
    draft = run_cli("artifacts", "--run-id", rid, *where, "--node", "draft", cwd=elsewhere, env=env)
    assert draft.returncode == 0 and json.loads(draft.stdout) == {"approved": True, "summary": "draft é"}
    got = run_cli("attachments", "--run-id", rid, "doc", *where, cwd=elsewhere, env=env, text=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout == BLOB
