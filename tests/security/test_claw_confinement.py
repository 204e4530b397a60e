"""The claw agent stays in its box (issue 26): a scripted model on 127.0.0.1 (real HTTP, both
wire formats) makes the calls an attacker would, and each is refused as a tool error the model
sees, the file it aimed at is byte-identical, and the decision is a ``permission_decided`` event.

The rules match the canonical workspace-relative path (an absolute path, ``../ws/...`` or a
symlink to a denied directory is the same file); git dirs, the run store and hard-linked files
are protected by default; FIFOs are never opened; grep's regex, a missing ``tool_max_steps``
and an MCP server's environment are bounded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from iterion.backends.claw.loop import DEFAULT_TOOL_MAX_STEPS
from iterion.failure_codes import FailureCode, row_for
from iterion.store import RunStatus, Store

from ..conftest import git
from ..claw.conftest import agent_bot, calls, events, final, launch, resume, tool_results
from ..claw.scripted_server import ScriptedLLM

SECRET = b"SECRET-KEY-0123456789\n"
TOKEN = "TOKEN5ecret"
DENY = ('permission:\n  deny: ["read_file(secrets/**)", "write_file(secrets/**)", "edit_file(secrets/**)", '
        '"grep(secrets/**)", "list_dir(secrets/**)"]')


@pytest.fixture
def box(tmp_path: Path, ws: Path) -> dict[str, Path]:
    """A workspace with a denied secrets/ directory, a symlink to it, credentials in .git/config,
    a worktree-style git dir under another name, a file hard-linked to one outside, and that
    outside file."""
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key.txt").write_bytes(SECRET)
    (ws / "alias").symlink_to("secrets")
    (ws / "escape").symlink_to(tmp_path / "outside")
    git(ws, "remote", "add", "origin", f"https://user:{TOKEN}@example.invalid/x.git")
    (ws / "gitdirs").mkdir()
    git(ws, "init", "-q", f"--separate-git-dir={ws / 'gitdirs' / 'sub'}", str(ws / "sub"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"outside, untouched\n")
    os.link(outside / "victim.txt", ws / "linked.txt")
    return {"ws": ws, "secret": ws / "secrets" / "key.txt", "victim": outside / "victim.txt",
            "config": ws / ".git" / "config", "subconfig": ws / "gitdirs" / "sub" / "config"}


# (tool, arguments, the refusal the model must read, the decision's source)
ATTACKS: list[tuple[str, dict[str, Any], str, str]] = [
    ("read_file", {"path": "{ws}/secrets/key.txt"}, "denied by the permission policy (rule read_file(secrets/**)",
     "workflow"),
    ("read_file", {"path": "../ws/secrets/key.txt"}, "rule read_file(secrets/**)", "workflow"),
    ("read_file", {"path": "alias/key.txt"}, "rule read_file(secrets/**)", "workflow"),
    ("read_file", {"path": "./secrets/../secrets/key.txt"}, "rule read_file(secrets/**)", "workflow"),
    ("write_file", {"path": "{ws}/secrets/key.txt", "content": "pwned"}, "rule write_file(secrets/**)", "workflow"),
    ("write_file", {"path": "alias/key.txt", "content": "pwned"}, "rule write_file(secrets/**)", "workflow"),
    ("edit_file", {"path": "../ws/secrets/key.txt", "old": "SECRET", "new": "PWNED"}, "rule edit_file(secrets/**)",
     "workflow"),
    ("grep", {"pattern": "SECRET", "path": "alias"}, "rule grep(secrets/**)", "workflow"),
    ("list_dir", {"path": "{ws}/alias"}, "rule list_dir(secrets/**)", "workflow"),
    ("read_file", {"path": ".git/config"}, "is protected by default (inside a git dir, .git/)", "protected_default"),
    ("grep", {"pattern": "TOKEN", "path": ".git"}, "is protected by default", "protected_default"),
    ("list_dir", {"path": ".git"}, "is protected by default", "protected_default"),
    ("write_file", {"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\ntouch pwned"},
     "is protected by default", "protected_default"),
    ("read_file", {"path": "gitdirs/sub/config"}, "is protected by default (inside a git dir, gitdirs/sub/)",
     "protected_default"),
    ("read_file", {"path": "sub/.git"}, "is protected by default (inside a git dir, .git/)", "protected_default"),
    ("write_file", {"path": "linked.txt", "content": "pwned"}, "a file with 2 hard links", "protected_default"),
    ("edit_file", {"path": "linked.txt", "old": "outside", "new": "pwned"}, "a file with 2 hard links",
     "protected_default"),
    ("write_file", {"path": "escape/victim.txt", "content": "pwned"}, "is outside the workspace (through a symlink)",
     "workspace"),
    ("read_file", {"path": "/etc/hostname"}, "is outside the workspace", "workspace"),
    ("edit_file", {"path": "{outside}/victim.txt", "old": "outside", "new": "pwned"}, "is outside the workspace",
     "workspace"),
]


def _fill(args: dict[str, Any], box: dict[str, Path]) -> dict[str, Any]:
    return {k: v.format(ws=box["ws"], outside=box["victim"].parent) if isinstance(v, str) else v
            for k, v in args.items()}


def _snapshot(box: dict[str, Path]) -> dict[str, bytes]:
    return {k: box[k].read_bytes() for k in ("secret", "victim", "config", "subconfig")}


def test_every_file_attack_is_refused_as_a_tool_error_the_model_sees(tmp_path: Path, box: dict[str, Path],
                                                                       store: Store, llm: ScriptedLLM,
                                                                       provider: str) -> None:
    before = _snapshot(box)
    bot = agent_bot(tmp_path / "src", provider, workflow_extra=DENY)
    llm.add(calls(*[(tool, _fill(args, box)) for tool, args, _, _ in ATTACKS]),
            calls(("grep", {"pattern": f"SECRET|{TOKEN}"}), ("glob", {"pattern": "**"}),
                  ("list_dir", {"path": "."})),
            final("tried"))
    r = launch(store, bot, box["ws"])
    assert r.status is RunStatus.FINISHED, r.error

    results = tool_results(llm.requests[1])
    assert len(results) == len(ATTACKS)
    decided = {e.payload["tool_use_id"]: e.payload for e in events(store, r.run_id, "permission_decided")}
    for (tool, args, refusal, source), (tid, text) in zip(ATTACKS, results.items(), strict=True):
        assert text.startswith("error:") and refusal in text, (tool, args, text)
        assert decided[tid]["decision"] == "deny" and decided[tid]["source"] == source, (tool, args, decided[tid])
        assert decided[tid]["path"] == _fill(args, box)["path"]
    # the event names what the rule was matched against: the canonical path
    first = decided[next(iter(results))]
    assert (first["path"], first["resolved"]) == (f"{box['ws']}/secrets/key.txt", "secrets/key.txt")
    assert [decided[t]["resolved"] for t in list(results)[1:4]] == ["secrets/key.txt"] * 3
    assert _snapshot(box) == before
    assert not (box["ws"] / ".git" / "hooks" / "post-checkout").exists()

    # the walks skip git dirs, the denied directory (and its alias), and do not follow a symlink out
    grep, glob, listing = [t for i, t in tool_results(llm.requests[2]).items() if i not in results]
    assert grep == "(no match)", grep
    assert ".git" not in glob and "gitdirs/sub/" not in glob and "escape/" not in glob, glob
    assert "secrets/key.txt" in glob  # names are listed; contents are the rules' to give
    assert ".git" not in listing.split("\n") and "gitdirs/" in listing


def test_a_rule_naming_a_protected_path_unlocks_it_and_nothing_more(tmp_path: Path, box: dict[str, Path],
                                                                      store: Store, llm: ScriptedLLM,
                                                                      provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider,
                    workflow_extra='permission:\n  allow: ["read_file", "read_file(.git/config)"]')
    llm.add(calls(("read_file", {"path": ".git/config"}), ("read_file", {"path": ".git/HEAD"})), final())
    r = launch(store, bot, box["ws"])
    assert r.status is RunStatus.FINISHED, r.error
    config, head = tool_results(llm.requests[1]).values()
    assert TOKEN in config  # explicitly allowed by a rule naming the path
    assert head.startswith("error:") and "protected by default" in head  # `read_file` alone does not unlock
    decisions = [(e.payload["decision"], e.payload["rule"]) for e in events(store, r.run_id, "permission_decided")]
    assert decisions == [("allow", "read_file(.git/config)"), ("deny", None)]


def test_the_run_store_inside_the_workspace_is_protected(tmp_path: Path, ws: Path, llm: ScriptedLLM,
                                                         provider: str) -> None:
    with open(ws / ".git" / "info" / "exclude", "a") as fh:  # a store in the tree must be ignored
        fh.write("/run-store/\n")
    in_tree = Store(ws / "run-store")
    token = ws / "run-store" / "server" / "token"
    token.parent.mkdir(parents=True)
    token.write_text("server-token\n")
    bot = agent_bot(tmp_path / "src", provider)
    llm.add(calls(("read_file", {"path": "run-store/server/token"}), ("grep", {"pattern": "server-token"}),
                  ("write_file", {"path": "run-store/server/token", "content": "mine"})), final())
    r = launch(in_tree, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    read, grep, write = tool_results(llm.requests[1]).values()
    assert read.startswith("error:") and "inside the run store" in read
    assert grep == "(no match)"
    assert write.startswith("error:") and "inside the run store" in write
    assert token.read_text() == "server-token\n"


def test_a_fifo_never_blocks_a_tool(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                    provider: str) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "a.txt").write_text("needle\n")
    bot = agent_bot(tmp_path / "src", provider)
    llm.add(calls(("read_file", {"path": "pipe"}), ("write_file", {"path": "pipe", "content": "x"}),
                  ("edit_file", {"path": "pipe", "old": "a", "new": "b"}), ("grep", {"pattern": "x", "path": "pipe"}),
                  ("grep", {"pattern": "needle"})), final())
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    *refused, grep = tool_results(llm.requests[1]).values()
    for text in refused:
        assert text.startswith("error:") and "is a FIFO, which the agent's file tools never open" in text, text
    assert grep == "a.txt:1:needle"  # the walk skipped the FIFO
    denied = [e.payload for e in events(store, r.run_id, "permission_decided") if e.payload["decision"] == "deny"]
    assert len(denied) == 4 and {d["source"] for d in denied} == {"workspace"}


def test_a_catastrophic_regex_is_stopped(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                         provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_CLAW_TOOL_TIMEOUT", "1")
    (ws / "a.txt").write_text("a" * 64 + "!\n")
    bot = agent_bot(tmp_path / "src", provider)
    llm.add(calls(("grep", {"pattern": "(a|a)+$"}), ("grep", {"pattern": "a!"})), final())
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    slow, fine = tool_results(llm.requests[1]).values()
    assert slow.startswith("error: grep stopped after 1s ($ITERION_CLAW_TOOL_TIMEOUT) in a.txt:1"), slow
    assert fine == f"a.txt:1:{'a' * 64}!"


def test_without_tool_max_steps_a_looping_model_is_stopped(tmp_path: Path, ws: Path, store: Store,
                                                            llm: ScriptedLLM, provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider)
    llm.add({**calls(("list_dir", {})), "repeat": True})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE  # raise tool_max_steps, resume
    assert r.failure_code == FailureCode.TOOL_STEPS_EXHAUSTED
    assert f"reached tool_max_steps ({DEFAULT_TOOL_MAX_STEPS})" in (r.error or "")
    row = row_for(FailureCode.TOOL_STEPS_EXHAUSTED)
    assert row is not None and row.in_run_retries == 0
    # one attempt stops at the default: the node is not retried (a cap, not a transient fault)
    assert len(llm.requests) == DEFAULT_TOOL_MAX_STEPS + 1
    assert len(events(store, r.run_id, "tool_called")) == DEFAULT_TOOL_MAX_STEPS


def test_an_oversized_tool_result_is_cut_with_a_note(tmp_path: Path, ws: Path, store: Store,
                                                      llm: ScriptedLLM) -> None:
    from iterion.backends.claw.loop import RESULT_CAP

    deep = ws / ("d" * 200) / ("e" * 200) / ("f" * 200)
    deep.mkdir(parents=True)
    for i in range(600):  # 600 paths of about 720 characters: a listing far above the cap
        (deep / f"{'x' * 100}{i:03}").write_text("")
    bot = agent_bot(tmp_path / "src", "openai")
    llm.add(calls(("glob", {"pattern": "**/x*"})), final())
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    (text,) = tool_results(llm.requests[1]).values()
    head, note = text.rsplit("\n[... truncated: ", 1)
    assert len(head.encode()) <= RESULT_CAP and head.startswith(f"{deep.relative_to(ws)}/{'x' * 100}000")
    assert note.startswith("the result was ") and "ask for less" in note
    (called,) = events(store, r.run_id, "tool_called")
    assert called.payload["result_bytes"] < RESULT_CAP + 200


ENV_SERVER = Path(__file__).with_name("mcp_env_server.py")


def test_an_mcp_server_gets_a_clean_environment(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-must-not-leak")
    monkeypatch.setenv("SERVER_TOKEN_SRC", "substituted-value")
    monkeypatch.setenv("GH_TOKEN", "opted-in-value")
    head = (f'mcp_server env:\n  transport: stdio\n  command: "{sys.executable}"\n  args: ["{ENV_SERVER}"]\n'
            '  env:\n    SERVER_TOKEN: "${SERVER_TOKEN_SRC}"\n  inherit_env: ["GH_TOKEN", "NOT_SET_ANYWHERE"]\n')
    bot = agent_bot(tmp_path / "src", provider, head=head, tools='["mcp.env.*"]')
    llm.add(calls(("mcp.env.get_env", {})), final())
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    (text,) = tool_results(llm.requests[1]).values()
    seen = json.loads(text)
    assert "sk-must-not-leak" not in text and "aws-must-not-leak" not in text
    assert "OPENAI_API_KEY" not in seen and "AWS_SECRET_ACCESS_KEY" not in seen
    assert seen["SERVER_TOKEN"] == "substituted-value" and seen["GH_TOKEN"] == "opted-in-value"
    assert "NOT_SET_ANYWHERE" not in seen
    assert seen["PATH"] == os.environ["PATH"]  # the SDK's defaults, so the server can still run


def test_an_approval_never_overrides_a_deny_when_the_path_changed_meanwhile(tmp_path: Path, box: dict[str, Path],
                                                                              store: Store, llm: ScriptedLLM,
                                                                              provider: str) -> None:
    ws = box["ws"]
    (ws / "docs").mkdir()
    (ws / "docs" / "key.txt").write_text("harmless\n")
    bot = agent_bot(tmp_path / "src", provider,
                    workflow_extra='permission:\n  mode: ask\n  deny: ["read_file(secrets/**)"]')
    llm.add(calls(("read_file", {"path": "docs/../docs/key.txt"})))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    assert "(the path resolves to 'docs/key.txt')" in (r.pending or {}).get("question", str(r.pending))
    (ws / "docs" / "key.txt").unlink()  # while the person reads the question, the name is re-pointed
    (ws / "docs" / "key.txt").symlink_to(ws / "secrets" / "key.txt")
    llm.add(final())
    r2 = resume(store, r.run_id, answers={"approve": "yes"})
    assert r2.status is RunStatus.FINISHED, r2.error
    (text,) = tool_results(llm.requests[1]).values()
    assert text.startswith("error: denied by the permission policy (rule read_file(secrets/**)"), text
    assert "SECRET" not in text
    decided = [(e.payload["decision"], e.payload["source"], e.payload.get("resolved"))
               for e in events(store, r.run_id, "permission_decided")]
    assert decided == [("ask", "workflow", "docs/key.txt"), ("allow", "answer", None),
                       ("deny", "workflow", "secrets/key.txt")]


def test_a_garbage_tool_timeout_fails_the_node_naming_the_variable(tmp_path: Path, ws: Path, store: Store,
                                                                    llm: ScriptedLLM,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_CLAW_TOOL_TIMEOUT", "abc")
    bot = agent_bot(tmp_path / "src", "openai")
    r = launch(store, bot, ws)
    assert r.status is not RunStatus.FINISHED
    assert "$ITERION_CLAW_TOOL_TIMEOUT='abc' is not a number of seconds > 0" in (r.error or ""), r.error
    assert llm.requests == []  # refused before the model was asked anything


def test_a_worktree_run_inside_the_store_can_still_write_its_own_files(tmp_path: Path, ws: Path, store: Store,
                                                                        llm: ScriptedLLM) -> None:
    """The worktree of a `worktree: auto` run lives under <store>/worktrees/: the store is
    protected only where it is inside the workspace, not around it."""
    bot = agent_bot(tmp_path / "src", "openai", workflow_extra="worktree: auto")
    llm.add(calls(("write_file", {"path": "greet.txt", "content": "hi\n"}), ("read_file", {"path": ".git"})),
            final())
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    wrote, gitfile = tool_results(llm.requests[1]).values()
    assert wrote == "wrote 3 bytes to greet.txt"
    assert gitfile.startswith("error:") and "protected by default" in gitfile  # the worktree's .git file


def test_grep_over_a_directory_does_not_read_what_a_person_must_approve(tmp_path: Path, box: dict[str, Path],
                                                                         store: Store, llm: ScriptedLLM) -> None:
    bot = agent_bot(tmp_path / "src", "openai", workflow_extra='permission:\n  ask: ["read_file(secrets/**)"]')
    llm.add(calls(("grep", {"pattern": "SECRET"})), final())
    r = launch(store, bot, box["ws"])
    assert r.status is RunStatus.FINISHED, r.error  # no pause: the file was skipped, not asked for
    (text,) = tool_results(llm.requests[1]).values()
    assert text == "(no match)"
