"""The path rule of the claw file tools, below the agent loop: what a path resolves to, what is
protected, and the re-check on what was really opened (a symlink or a hard link that appears
between the decision and the open is refused, nothing outside is touched)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from iterion.backends.claw.paths import PathRefused, Resolver, open_checked
from iterion.backends.claw.tools import ToolError, Workspace
from iterion.permissions import build_policy, path_glob

from ..conftest import git


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "w"
    (r / "docs").mkdir(parents=True)
    (r / "docs" / "a.txt").write_text("docs\n")
    (r / "secrets").mkdir()
    (r / "secrets" / "a.txt").write_text("secret\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.txt").write_text("outside\n")
    return r


def test_every_spelling_resolves_to_one_canonical_path(root: Path) -> None:
    (root / "alias").symlink_to("secrets")
    paths = Resolver(root)
    for raw in ("secrets/a.txt", "./secrets//a.txt", "docs/../secrets/a.txt", f"{root}/secrets/a.txt",
                f"../{root.name}/secrets/a.txt", "alias/a.txt", f"{root}/alias/../secrets/a.txt"):
        assert paths.resolve(raw).rel == "secrets/a.txt", raw
    for raw in ("..", "../outside/a.txt", "/etc/hostname", f"{root}/../outside/a.txt"):
        with pytest.raises(PathRefused, match="outside the workspace"):
            paths.resolve(raw)


def test_git_dirs_are_found_by_name_and_by_contents(root: Path, tmp_path: Path) -> None:
    git(root, "init", "-q", "--bare", str(root / "mirror"))
    store = root / "var" / "store"
    store.mkdir(parents=True)
    paths = Resolver(root, (store,))
    assert paths.resolve("mirror/config").protected == "inside a git dir, mirror/"
    assert paths.resolve("x/.git/config").protected == "inside a git dir, .git/"
    assert paths.resolve(".iterion/runs/x").protected == "inside the run store, .iterion/"
    assert paths.resolve("var/store/server/token").protected == "inside the run store"
    assert paths.resolve("docs/a.txt").protected is None
    os.link(root / "docs" / "a.txt", root / "docs" / "b.txt")
    assert paths.resolve("docs/b.txt").protected is None  # reading a hard-linked file is fine
    assert "2 hard links" in (paths.resolve("docs/b.txt", write=True).protected or "")


def test_a_parent_swapped_for_a_symlink_after_the_decision_is_refused(root: Path, tmp_path: Path) -> None:
    res = Resolver(root).resolve("docs/a.txt", write=True)
    (root / "docs").rename(root / "docs.old")
    (root / "docs").symlink_to(tmp_path / "outside")
    with pytest.raises(PathRefused, match="changed while it was being opened"):
        open_checked(res, os.O_WRONLY | os.O_CREAT)
    assert (tmp_path / "outside" / "a.txt").read_text() == "outside\n"


def test_a_final_component_swapped_for_a_symlink_is_refused(root: Path, tmp_path: Path) -> None:
    res = Resolver(root).resolve("docs/a.txt", write=True)
    (root / "docs" / "a.txt").unlink()
    (root / "docs" / "a.txt").symlink_to(tmp_path / "outside" / "a.txt")
    with pytest.raises(PathRefused, match="became a symlink"):
        open_checked(res, os.O_WRONLY | os.O_CREAT)
    assert (tmp_path / "outside" / "a.txt").read_text() == "outside\n"


def test_the_tool_refuses_a_path_that_resolves_elsewhere_than_decided(root: Path) -> None:
    w = Workspace(root)
    decided = w.target("write_file", {"path": "docs/a.txt"})
    assert decided is not None
    (root / "docs" / "a.txt").unlink()
    (root / "docs" / "a.txt").symlink_to(root / "secrets" / "a.txt")  # inside, but another file
    with pytest.raises(ToolError, match="now resolves to 'secrets/a.txt'"):
        w.call("write_file", {"path": "docs/a.txt", "content": "x"}, decided=decided.rel)
    assert (root / "secrets" / "a.txt").read_text() == "secret\n"


def test_a_hard_link_made_after_the_decision_is_refused_before_truncating(root: Path, tmp_path: Path) -> None:
    w = Workspace(root)
    target = w.target("write_file", {"path": "docs/new.txt"})
    assert target is not None and target.protected is None
    os.link(tmp_path / "outside" / "a.txt", root / "docs" / "new.txt")
    with pytest.raises(ToolError, match="2 hard links"):
        w.call("write_file", {"path": "docs/new.txt", "content": "x"}, decided=target.rel)
    assert (tmp_path / "outside" / "a.txt").read_text() == "outside\n"


def test_a_directory_rule_covers_the_directory_itself() -> None:
    assert path_glob("secrets/**", "secrets")
    assert path_glob("secrets/**", "secrets/a/b")
    assert not path_glob("secrets/**", "secrets2")
    assert not path_glob("secrets/*", "secrets")


def test_a_socket_in_the_workspace_is_never_opened(root: Path) -> None:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(root / "docs" / "s.sock"))
        w = Workspace(root)
        for tool, args in (("read_file", {"path": "docs/s.sock"}), ("write_file", {"path": "docs/s.sock", "content": "x"}),
                           ("grep", {"pattern": "x", "path": "docs/s.sock"})):
            with pytest.raises(ToolError, match="is a socket, which the agent's file tools never open"):
                w.call(tool, args)
        assert w.call("grep", {"pattern": "docs", "path": "docs"}) == "docs/a.txt:1:docs"  # skipped in a walk
    finally:
        sock.close()


@pytest.mark.parametrize(("layer", "verdict", "source"), [
    ({"mode": "allow"}, "deny", "protected_default"),                        # the mode never opens it
    ({"allow": ["read_file", "*"]}, "deny", "protected_default"),            # nor a rule without a pattern
    ({"ask": ["read_file"]}, "deny", "protected_default"),
    ({"allow": ["read_file(.git/config)"]}, "allow", "workflow"),             # a rule naming the path does
    ({"allow": ["read_file(.git/**)"], "deny": ["read_file"]}, "deny", "workflow"),  # a deny still wins
    ({"mode": "deny", "ask": ["read_file(.git/*)"]}, "ask", "workflow"),      # a person may approve
])
def test_protected_paths_are_decided_by_rules_with_a_pattern_only(layer: dict[str, Any], verdict: str,
                                                                   source: str) -> None:
    decision = build_policy(layer).decide("read_file", {"path": ".git/config"}, protected="inside a git dir, .git/")
    assert (decision.verdict, decision.source) == (verdict, source)


def test_the_model_cannot_unlock_a_protected_path_itself(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    w = Workspace(root)
    for extra in ({"unlocked": True}, {"decided": "docs/a.txt"}):
        with pytest.raises(ToolError, match=f"read_file takes no argument '{next(iter(extra))}'"):
            w.call("read_file", {"path": ".git/config", **extra})
    with pytest.raises(ToolError, match="is protected"):
        w.call("read_file", {"path": ".git/config"})


def test_a_glob_pattern_cannot_backtrack_and_a_newline_is_no_way_around_a_rule(root: Path) -> None:
    # as a regular expression this pattern took seconds at 8 stars on 60 characters
    assert path_glob("*a" * 30 + "b", "a" * 4000) is False
    (root / ("a" * 200)).write_text("")
    assert Workspace(root).call("glob", {"pattern": "*a" * 40 + "b"}) == "(no match)"
    assert path_glob("secrets/**", "secrets/x\ny") is True  # `.` of a regex stopped at a newline


def test_edit_file_refuses_a_file_too_big_to_load(root: Path) -> None:
    from iterion.backends.claw.tools import EDIT_CAP

    big = root / "docs" / "big.bin"
    with open(big, "wb") as fh:  # sparse: no disk used
        fh.truncate(EDIT_CAP + 1)
    with pytest.raises(ToolError, match=f"edit_file edits files up to {EDIT_CAP} bytes"):
        Workspace(root).call("edit_file", {"path": "docs/big.bin", "old": "a", "new": "b"})
    assert big.stat().st_size == EDIT_CAP + 1
