"""Ignore rules a node adds during the run (.gitignore, .iterionignore, .git/info/exclude) do
not shrink what the run can restore: the rules in force are those of the run's start."""

from __future__ import annotations

import json
from pathlib import Path

from gitrefs.boundary import BoundaryLabel
from workspacetrack import Tracker

from ..conftest import git
from .coverage_harness import run_and_rewind, setup


def test_rules_a_node_adds_do_not_hide_what_it_changed(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitignore").write_bytes(b"*.log\n")
    (repo / "x.dat").write_bytes(b"user data\n")
    (repo / "notes").mkdir()
    (repo / "notes" / "n.txt").write_bytes(b"user notes\n")
    (repo / "secret.env").write_bytes(b"KEY=1\n")
    (repo / "run.log").write_bytes(b"ignored from the start\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "rules")
    setup(repo, tmp_path, """
        open(".gitignore", "ab").write(b"*.dat\\n")
        open(".iterionignore", "wb").write(b"notes/\\n")
        open(".git/info/exclude", "ab").write(b"secret.env\\n")
        open("x.dat", "wb").write(b"clobbered\\n")
        os.unlink("notes/n.txt")
        open("secret.env", "wb").write(b"KEY=stolen\\n")
        open("new.dat", "wb").write(b"the node's own, under its own new rule\\n")
        open("run.log", "wb").write(b"the start's rules exclude this: left alone\\n")
    """)
    r = run_and_rewind(repo, tmp_path / "store")
    assert (repo / "x.dat").read_bytes() == b"user data\n"
    assert (repo / "notes" / "n.txt").read_bytes() == b"user notes\n"
    assert (repo / "secret.env").read_bytes() == b"KEY=1\n"
    assert (repo / ".gitignore").read_bytes() == b"*.log\n"
    assert not (repo / ".iterionignore").exists() and not (repo / "new.dat").exists()
    assert set(r.files["restored"]) == {"x.dat", "notes/n.txt", "secret.env", ".gitignore"}
    assert set(r.files["removed"]) == {".iterionignore", "new.dat"} and r.files["skipped"] == []
    # excluded by the rules in force from the start: never captured, never touched
    assert (repo / "run.log").read_bytes() == b"the start's rules exclude this: left alone\n"


def test_an_exclusion_names_its_rule_and_file(repo: Path, tmp_path: Path) -> None:
    """A run recorded before rules were frozen (its state names none) follows the rules on
    disk; what they exclude from a restore is reported with the rule and the file it is in."""
    (repo / "sub").mkdir()
    (repo / "sub" / "keep.cfg").write_bytes(b"v1\n")
    store = tmp_path / "track"
    t = Tracker(store, repo, "old-run")
    t.capture(BoundaryLabel.parse("pre:n:0"))
    (repo / "sub" / "keep.cfg").unlink()
    t.capture(BoundaryLabel.parse("nodes:n:0"))
    t.close()
    state_file = store / "runs" / "old-run" / "state.json"
    state = json.loads(state_file.read_text())
    state.pop("ignore_rules")  # as written before the rules were recorded
    state_file.write_text(json.dumps(state))
    (repo / "sub" / ".gitignore").write_bytes(b"# generated\n*.cfg\n")
    old = Tracker(store, repo, "old-run")
    report = old.restore(BoundaryLabel.parse("pre:n:0"))
    assert {s["path"]: s["reason"] for s in report.skipped} == {
        "sub/keep.cfg": "ignored ('*.cfg' in sub/.gitignore)"}
    assert not (repo / "sub" / "keep.cfg").exists()
