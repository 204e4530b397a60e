"""bash permission rules through the claw agent, end to end over both wire formats: spellings that
once slipped past ``bash(rm *)`` and ``bash(git *)`` are refused as tool errors the model sees,
each decision is an event, and nothing is deleted or written outside the workspace."""

from __future__ import annotations

from pathlib import Path

from iterion.store import RunStatus, Store

from .conftest import agent_bot, calls, events, final, launch, tool_errors, tool_results
from .scripted_server import ScriptedLLM

BYPASSES = ["/bin/rm -f keep.txt", "echo $(rm -f keep.txt)", "(rm -f keep.txt)", "command rm -f keep.txt",
            "rm\t-f keep.txt", "find . -name keep.txt -delete", "git diff <(rm -f keep.txt)",
            "ls | xargs rm -f", "sh -c 'rm -f keep.txt'", "eval \"$(printf 'rm -f keep.txt')\""]


def test_rm_bypass_spellings_are_refused_and_nothing_is_deleted(tmp_path: Path, ws: Path, store: Store,
                                                                 llm: ScriptedLLM, provider: str) -> None:
    (ws / "keep.txt").write_text("keep\n")
    bot = agent_bot(tmp_path / "src", provider, workflow_extra='permission:\n  deny: ["bash(rm *)"]')
    llm.add(calls(*[("bash", {"command": c}) for c in BYPASSES], ("bash", {"command": "echo ok"})), final("ok"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert (ws / "keep.txt").read_text() == "keep\n"
    results, errors = tool_results(llm.requests[1]), tool_errors(llm.requests[1])
    assert len(results) == len(BYPASSES) + 1 and len(errors) == len(BYPASSES)
    for tid in errors:
        assert "denied by the permission policy (rule bash(rm *), workflow)" in results[tid]
    assert any("eval runs a computed command" in results[t] for t in errors)  # the model is told why
    decided = [e.payload for e in events(store, r.run_id, "permission_decided")]
    assert [d["decision"] for d in decided] == ["deny"] * len(BYPASSES) + ["allow"]
    assert [e.payload["error"] is None for e in events(store, r.run_id, "tool_called")] == \
        [False] * len(BYPASSES) + [True]


def test_an_allowed_program_cannot_redirect_outside_the_workspace(tmp_path: Path, ws: Path, store: Store,
                                                                  llm: ScriptedLLM, provider: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    bot = agent_bot(tmp_path / "src", provider,
                    workflow_extra='permission:\n  mode: ask\n  allow: ["bash(git *)"]')
    llm.add(calls(("bash", {"command": f"git --version > {outside}"}),
                  ("bash", {"command": "git --version >| ../outside.txt"}),
                  ("bash", {"command": "git --version > version.txt"})), final("ok"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert outside.read_text() == "precious\n"
    assert (ws / "version.txt").read_text().startswith("git version")
    results, errors = tool_results(llm.requests[1]), tool_errors(llm.requests[1])
    assert len(errors) == 2
    for tid in errors:
        assert f"writes {outside}, outside the workspace" in results[tid]
    decided = [(e.payload["decision"], e.payload.get("reason")) for e in events(store, r.run_id,
                                                                                  "permission_decided")]
    assert decided == [("deny", f"writes {outside}, outside the workspace")] * 2 + [("allow", None)]
