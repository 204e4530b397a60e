"""privacy_filter / privacy_unfilter through the CLI (builtin-tools.md): the vault is one file
per run (0600) that survives a resume, and the raw values are nowhere else in the run store -
not in the events, the checkpoint, the artifacts or the run document - although the tools (and
a shell tool downstream) see the real text."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path
from typing import Any

from iterion.engine.fork import TURNS_DIR

from ..conftest import run_cli, write_bot

WORKFLOWS = Path(__file__).resolve().parents[2] / "fixtures" / "workflows"
SECRET = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "bob.smith@example.com"
TEXT = f"mail {EMAIL} key {SECRET} card 4111 1111 1111 1111"


def _bot(tmp_path: Path) -> Path:
    """The fixture, with the script backend's answer for its agent beside it."""
    return write_bot(tmp_path / "src", (WORKFLOWS / "run_privacy.bot").read_text(),
                     {"review": {"*": {"output": {"summary": "redacted text"}}}})


def _detail(store: Path, ws: Path, run_id: str) -> dict[str, Any]:
    p = run_cli("inspect", "--run-id", run_id, "--store-dir", str(store), "--json", "--events", cwd=ws)
    return dict(json.loads(p.stdout))


def _files_holding(root: Path, needle: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and needle.encode() in p.read_bytes())


def test_redact_pause_resume_restore_and_nothing_raw_in_the_store(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    p = run_cli("run", str(_bot(tmp_path)), "--store-dir", str(store), "--var", f"text={TEXT}", "--backend",
                "script", "--json", cwd=ws)
    assert "Traceback" not in p.stderr, p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    detail = _detail(store, ws, run_id)
    assert detail["status"] == "paused_waiting_human", detail.get("error")
    scrub = detail["outputs"]["scrub"]
    assert scrub["has_secret"] and scrub["has_email"] and scrub["has_account_number"]
    assert [p["rule"] for p in scrub["placeholders"]] == ["rfc5322", "aws_access_key", "card_luhn"]
    vault = store / "runs" / run_id / "pii_vault.json"
    assert stat.S_IMODE(vault.stat().st_mode) == 0o600
    before = json.loads(vault.read_text())["entries"]
    assert sorted(e["value"] for e in before.values()) == sorted([EMAIL, SECRET, "4111 1111 1111 1111"])
    assert _files_holding(store, SECRET) == [f"runs/{run_id}/pii_vault.json"]
    # the agent's turn checkpoint (written before it ran) holds the redacted input only
    (turn,) = (store / "runs" / run_id / TURNS_DIR / "review").glob("*.json")
    assert scrub["redacted"] in turn.read_text()

    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answer", "approved=true", "--json",
                cwd=ws)
    assert "Traceback" not in p.stderr, p.stderr
    detail = _detail(store, ws, run_id)
    assert detail["status"] == "finished", detail.get("error")
    # restored from the vault the first process wrote: the tools saw the real text
    assert detail["outputs"]["digest"]["result"].split()[0] == hashlib.sha256(TEXT.encode()).hexdigest()
    assert json.loads(vault.read_text())["entries"] == before
    back = detail["outputs"]["back"]
    assert back["substituted"] == 3
    # ... while what the store keeps of privacy_unfilter's output (and of digest's input) is placeholders
    assert SECRET not in back["text"] and back["text"] == scrub["redacted"]
    for needle in (SECRET, EMAIL, "4111 1111 1111 1111"):
        assert _files_holding(store, needle) == [f"runs/{run_id}/pii_vault.json"], needle


def test_unfilter_missing_policy_error_fails_the_node(tmp_path: Path, ws: Path) -> None:
    bot = tmp_path / "u.bot"
    bot.write_text('tool start:\n  command: "true"\n\ntool back:\n  command: "privacy_unfilter"\n\n'
                   'workflow u:\n  entry: start\n'
                   '  start -> back with { text: "x PII_0123abcd y", missing_policy: "error" }\n  back -> done\n')
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode != 0
    detail = _detail(store, ws, json.loads(p.stdout)["run_id"])
    assert "no vault entry for PII_0123abcd" in detail["error"]


def test_a_rewind_dropping_the_redaction_keeps_the_vault(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    p = run_cli("run", str(_bot(tmp_path)), "--store-dir", str(store), "--var", f"text={TEXT}", "--backend",
                "script", "--json", cwd=ws)
    run_id = json.loads(p.stdout)["run_id"]
    vault = store / "runs" / run_id / "pii_vault.json"
    before = json.loads(vault.read_text())["entries"]
    p = run_cli("rewind", "--run-id", run_id, "--node", "scrub", "--store-dir", str(store), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert json.loads(vault.read_text())["entries"] == before
    # resumed, the redaction runs again on the scrubbed vars (the tokens: nothing new to find)
    # and the gate asks again; the vault still restores the original text afterwards
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--json", cwd=ws)
    assert "Traceback" not in p.stderr, p.stderr
    detail = _detail(store, ws, run_id)
    assert detail["status"] == "paused_waiting_human", detail.get("error")
    assert detail["outputs"]["scrub"]["placeholders"] == []
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answer", "approved=true", "--json",
                cwd=ws)
    detail = _detail(store, ws, run_id)
    assert detail["status"] == "finished", detail.get("error")
    assert detail["outputs"]["digest"]["result"].split()[0] == hashlib.sha256(TEXT.encode()).hexdigest()
    assert json.loads(vault.read_text())["entries"] == before
    assert _files_holding(store, SECRET) == [f"runs/{run_id}/pii_vault.json"]
