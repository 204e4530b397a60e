"""The permission policy: rule syntax, subjects, layering, and the claude_code flags."""

from __future__ import annotations

import pytest

from iterion.backends.base import BackendRequest
from iterion.backends.claude_code import ClaudeCodeBackend
from iterion.permissions import (
    PermissionError_,
    Policy,
    build_policy,
    claude_code_flags,
    flags_layer,
    layer_to_json,
    parse_rule,
    path_glob,
    workflow_layer,
)


@pytest.mark.parametrize(("rule", "tool", "args", "hit"), [
    ("bash(git *)", "bash", {"command": "git status"}, True),
    ("bash(git *)", "bash", {"command": "rm -rf / ; git status"}, False),
    ("bash", "bash", {"command": "anything"}, True),
    ("write_file(docs/**)", "write_file", {"path": "docs/a/b.md"}, True),
    ("write_file(docs/**)", "write_file", {"path": "./docs/../docs/x.md"}, True),
    ("write_file(docs/**)", "write_file", {"path": "docs/../src/x.py"}, False),
    ("write_file(docs/*)", "write_file", {"path": "docs/a/b.md"}, False),
    ("edit_file(**/*.py)", "edit_file", {"path": "a/b/c.py"}, True),
    ("edit_file(**/*.py)", "edit_file", {"path": "c.py"}, True),
    ("mcp.github.*", "mcp.github.get_issue", {"n": 1}, True),
    ("mcp.github.*", "mcp.gitlab.get_issue", {}, False),
    ("mcp.github.get_issue({\"n\":1})", "mcp.github.get_issue", {"n": 1}, True),
    ("*", "read_file", {"path": "x"}, True),
])
def test_rule_matching(rule: str, tool: str, args: dict, hit: bool) -> None:
    assert parse_rule(rule, "allow").matches(tool, args) is hit


@pytest.mark.parametrize(("command", "allowed", "denied"), [
    ("git status", True, False),
    ("git status; rm -rf ~", False, True),
    ("git log && git diff", True, False),
    ("git log | sh", False, True),        # a shell reading its input: opaque, caught by any deny rule
    ("git log $(rm -rf ~)", False, True),  # the substitution's rm is a simple command of its own
    ("echo hi && rm -rf build", False, True),
])
def test_compound_shell_commands_are_judged_per_simple_command(command: str, allowed: bool, denied: bool) -> None:
    assert parse_rule("bash(git *)", "allow").matches("bash", {"command": command}) is allowed
    assert parse_rule("bash(rm *)", "deny").matches("bash", {"command": command}) is denied


@pytest.mark.parametrize("bad", ["", "bash(", "two words", "bash(x) trailing"])
def test_malformed_rules_are_refused_with_the_syntax(bad: str) -> None:
    with pytest.raises(PermissionError_, match="TOOL or TOOL"):
        parse_rule(bad, "deny")


def test_layers_the_latest_matching_layer_decides_and_deny_beats_ask_beats_allow_within_one() -> None:
    policy = Policy([workflow_layer({"mode": "ask", "deny": "bash(rm *)", "allow": ["read_file"]}),
                     flags_layer("launch", None, allow=["bash(*)"], ask=["bash(git push*)"]),
                     flags_layer("resume", None, allow=["bash(git push origin docs)"])])
    d = policy.decide("bash", {"command": "rm -rf x"})
    assert (d.verdict, d.source) == ("allow", "launch")  # a later layer's broad allow wins over the workflow's
    assert policy.decide("bash", {"command": "git push --force"}).verdict == "ask"
    assert policy.decide("bash", {"command": "git push origin docs"}).payload() == {
        "decision": "allow", "rule": "bash(git push origin docs)", "source": "resume"}
    assert policy.decide("write_file", {"path": "x"}).payload() == {"decision": "ask", "rule": None,
                                                                   "source": "workflow"}
    assert Policy().decide("bash", {"command": "x"}).verdict == "allow"  # nothing configured: allow


def test_workflow_block_and_flags_are_checked() -> None:
    with pytest.raises(PermissionError_, match="unknown permission mode 'maybe'"):
        workflow_layer("maybe")
    with pytest.raises(PermissionError_, match="unknown key 'alow'"):
        workflow_layer({"alow": ["x"]})
    layer = flags_layer("launch", "DENY", allow=["read_file"])
    assert build_policy(None, [layer_to_json(layer)]).mode == "deny"
    # a rule on a directory's contents covers the directory itself (listing or grepping it)
    assert path_glob("docs/**", "docs") is True and path_glob("docs/**", "docs/x") is True
    assert path_glob("docs/**", "docsx") is False


def test_claude_code_receives_the_policy_as_cli_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = Policy([workflow_layer({"mode": "ask", "allow": ["bash(git *)", "read_file", "mcp.github.*"],
                                     "deny": ["write_file(secrets/**)"], "ask": ["bash(npm *)"]})])
    flags = claude_code_flags(policy)
    assert flags == ["--permission-mode=default", "--allowedTools=Bash(git:*),Read,mcp__github__*",
                     "--disallowedTools=Write(secrets/**),Bash(npm:*)"]
    assert claude_code_flags(Policy()) == []  # nothing configured: the CLI's own defaults
    assert claude_code_flags(Policy([flags_layer("launch", None, deny=["bash"])])) == ["--disallowedTools=Bash"]
    monkeypatch.setattr("shutil.which", lambda _b: "/usr/bin/claude")
    argv = ClaudeCodeBackend().argv(BackendRequest(node_id="n", tools=("Edit",), permission_flags=tuple(flags)))
    assert "--permission-mode=default" in argv
    assert "--allowedTools=Edit,Bash(git:*),Read,mcp__github__*" in argv
    assert "--disallowedTools=Write(secrets/**),Bash(npm:*)" in argv
