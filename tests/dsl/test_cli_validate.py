"""`iterion validate` and `iterion diagram`, run as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
WF = ROOT / "fixtures" / "workflows"
BAD = ROOT / "fixtures" / "invalid"
ENV = {"MODEL": "m", "DEPLOY_TARGET": "prod", "DEFAULT_BACKEND": "claw"}


def test_validate_clean_and_warning_only_files_exit_zero() -> None:
    proc = run_cli("validate", str(WF / "fan_out.bot"), str(BAD / "c110_unset_env.bot"), env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].endswith(": C110 warning: environment variable ITERION_FIXTURE_UNSET_MODEL is not set")
    assert "fan_out.bot: ok (0 error(s), 0 warning(s))" in proc.stderr
    assert "c110_unset_env.bot: ok (0 error(s), 1 warning(s))" in proc.stderr
    # C016 is an error (dsl.md 7)
    assert run_cli("validate", str(BAD / "c016_unreachable.bot"), env=ENV).returncode == 2  # invalid: exit 2 (README)


def test_validate_prints_diagnostics_and_exits_two_on_errors() -> None:
    path = BAD / "c001_undeclared_edge_target.bot"
    proc = run_cli("validate", str(path), env=ENV)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{path}:7:8: C001 error: edge to undeclared node 'reviwe'"
    assert lines[1].strip().startswith("hint: did you mean 'review'") or lines[1].strip().startswith("hint:")
    assert "Traceback" not in proc.stderr


def test_validate_several_files_json_including_a_missing_one(tmp_path: Path) -> None:
    good, bad, missing = WF / "tidy_rejected.bot", BAD / "c248_reserved_failure_code.bot", tmp_path / "nope.bot"
    proc = run_cli("validate", "--json", str(good), str(bad), str(missing), env=ENV)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    assert [f["ok"] for f in data["files"]] == [True, False, False]
    (diag,) = data["files"][1]["diagnostics"]
    assert (diag["code"], diag["severity"], diag["line"], diag["column"]) == ("C248", "error", 3, 9)
    assert "USAGE_LIMIT_BLOCKED" in diag["message"] and diag["hint"]
    (gone,) = data["files"][2]["diagnostics"]
    assert gone["code"] == "L001" and "cannot read" in gone["message"]


def test_diagram_prints_mermaid() -> None:
    proc = run_cli("diagram", str(WF / "tidy.bot"), env=ENV)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("flowchart TD\n")
    assert 'n_edit["edit (tool)"]' in out
    assert 'n_review -- "when approved" --> t_done' in out
    assert 'n_review -. "when not approved as fix(3)" .-> n_edit' in out
    proc = run_cli("diagram", "--json", str(WF / "fan_out.bot"), env=ENV)
    data = json.loads(proc.stdout)
    assert data["workflow"] == "parallel_review" and "n_spread{" in data["mermaid"]


def test_diagram_of_an_invalid_workflow_fails_cleanly() -> None:
    proc = run_cli("diagram", str(BAD / "c019_undeclared_cycle.bot"))
    assert proc.returncode == 2
    assert "C019 error" in proc.stderr
    assert "error: " in proc.stderr and "does not compile" in proc.stderr and "Traceback" not in proc.stderr


def test_help_texts_have_examples() -> None:
    for cmd in ("validate", "diagram"):
        proc = run_cli(cmd, "--help")
        assert proc.returncode == 0 and "Example: iterion " + cmd in proc.stdout


def test_diagram_ids_of_unicode_names_are_ascii() -> None:
    from iterion.dsl import load_workflow
    from iterion.dsl.diagram import to_mermaid

    wf = load_workflow(WF / "unicode_crlf_bom.bot", env={}).workflow
    assert wf is not None
    text = to_mermaid(wf)
    assert "u__e9_tape[" in text and "étape (tool)" in text
    assert all(line.split("[")[0].split("(")[0].isascii() for line in text.splitlines() if "(tool)" in line)


def test_validate_verdict_on_a_missing_model_follows_the_hosts_credentials(tmp_path: Path) -> None:
    """C018 depends on the machine (docs/language.md §2.4): the same file is invalid on a host with
    nothing configured and valid on one with a backend credential; the hint names the ways out."""
    bot = tmp_path / "w.bot"
    bot.write_text('agent a:\n  user: "go"\nworkflow w:\n  entry: a\n  a -> done\n')
    bare: dict[str, str | None] = {k: None for k in (
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ITERION_CLAUDE_BIN",
        "ITERION_CODEX_BIN", "ITERION_DEFAULT_SUPERVISOR_MODEL")}
    bare["PATH"] = str(tmp_path)  # no claude CLI there
    proc = run_cli("validate", str(bot), env=bare)
    assert proc.returncode == 2
    assert f"{bot}:1:7: C018 error: agent 'a' has neither model nor backend" in proc.stdout
    assert "ITERION_DEFAULT_SUPERVISOR_MODEL" in proc.stdout and "$ANTHROPIC_API_KEY" in proc.stdout
    proc = run_cli("validate", str(bot), env={**bare, "ANTHROPIC_API_KEY": "sk-test"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
