"""`iterion gc`: frees what only finished runs reference, never what a parked run's rewind needs
(iterion/store/gc.py has the mark-then-sweep invariant)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.store import RunStatus, Store
from iterion.store.gc import GcError, collect, parse_duration
from workspacetrack.gitsource import blob_id

from ..conftest import git, run_cli
from ..rewind.rewind_runs import fake_run, write


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def _objects(store: Store) -> set[str]:
    root = store.root / "objects"
    return {d.name + f.name for d in root.iterdir() if len(d.name) == 2 for f in d.iterdir()}


def _finished_run(store: Store, repo: Path, payload: bytes) -> str:
    """A finished in-place run that alone wrote ``payload`` (then the person removed the file)."""
    def effect(root: Path) -> None:
        (root / "f-only.bin").write_bytes(payload)

    doc = fake_run(store, repo, [("setup", effect, {"exit_code": 0})], status=RunStatus.FINISHED, worktree=False)
    (repo / "f-only.bin").unlink()
    return doc.id


def _parked_run(store: Store, repo: Path, status: RunStatus, base: bytes) -> str:
    """An in-place run parked after ``apply`` changed a.txt (from ``base``) and wrote c.txt."""
    def setup(root: Path) -> None:
        (root / "a.txt").write_bytes(base)

    def apply(root: Path) -> None:
        with open(root / "a.txt", "ab") as fh:
            fh.write(b"applied\n")
        (root / "c.txt").write_text("good\n")

    steps = [("setup", setup, {"exit_code": 0}), ("gate", None, {"approved": True}),
             ("draft", write("d.txt", "draft\n"), {"text": "good"}), ("apply", apply, {"exit_code": 0})]
    return fake_run(store, repo, steps, status=status, restart="apply", worktree=False).id


@pytest.mark.parametrize("status", [RunStatus.PAUSED_WAITING_HUMAN, RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED])
def test_gc_keeps_what_a_parked_rewind_needs_and_frees_what_a_finished_run_alone_referenced(
        store: Store, repo: Path, status: RunStatus) -> None:
    payload = os.urandom(64 * 1024)
    finished = _finished_run(store, repo, payload)
    base = b"parked run's own base " + os.urandom(16).hex().encode() + b"\n"
    parked = _parked_run(store, repo, status, base)
    before = _objects(store)
    assert blob_id(payload) in before and blob_id(base) in before  # content git never had: copied
    pins = git(repo, "for-each-ref", "--format=%(refname)", "refs/iterion/pins/").split()
    assert f"refs/iterion/pins/{finished}" in pins and f"refs/iterion/pins/{parked}" in pins

    report = collect(store)

    assert [r.run_id for r in report.collected] == [finished]
    assert report.freed_bytes >= len(payload)
    after = _objects(store)
    assert blob_id(payload) not in after
    assert blob_id(base) in after
    assert not store.track_dir(finished).exists() and store.track_dir(parked).is_dir()
    assert store.load_run(finished).status is RunStatus.FINISHED  # its document stays
    pins = git(repo, "for-each-ref", "--format=%(refname)", "refs/iterion/pins/").split()
    assert pins == [f"refs/iterion/pins/{parked}"]

    # the parked run's rewind still restores byte-identical
    res = rewind_run(store, RewindRequest(run_id=parked, node="apply"))
    assert (repo / "a.txt").read_bytes() == base
    assert not (repo / "c.txt").exists()
    assert "a.txt" in res.files.restored
    # and a second gc has nothing left to take
    again = collect(store)
    assert again.collected == [] and again.objects_removed == 0


def test_keep_last_older_than_and_dry_run(store: Store, repo: Path) -> None:
    first = _finished_run(store, repo, b"first payload\n")
    second = _finished_run(store, repo, b"second payload\n")
    objects = _objects(store)
    dry = collect(store, dry_run=True)
    assert sorted(r.run_id for r in dry.collected) == sorted([first, second]) and dry.freed_bytes > 0
    assert _objects(store) == objects and store.track_dir(first).is_dir()  # nothing deleted
    assert collect(store, older_than=parse_duration("1d")).collected == []  # both finished just now
    kept = collect(store, keep_last=1)
    assert [r.run_id for r in kept.collected] == [first]  # the most recently finished is kept
    assert store.track_dir(second).is_dir() and blob_id(b"second payload\n") in _objects(store)
    assert blob_id(b"first payload\n") not in _objects(store)
    with pytest.raises(GcError):
        parse_duration("soon")


def test_gc_killed_mid_sweep_loses_nothing_a_kept_run_needs(store: Store, repo: Path) -> None:
    for i in range(3):
        _finished_run(store, repo, os.urandom(4096) + bytes([i]))
    base = b"kept across a killed gc\n"
    parked = _parked_run(store, repo, RunStatus.PAUSED_OPERATOR, base)
    killed = run_cli("gc", "--store-dir", str(store.root), cwd=repo, env={"ITERION_TEST_KILL_AT": "gc:5"})
    assert killed.returncode == -signal.SIGKILL
    assert blob_id(base) in _objects(store)
    done = run_cli("gc", "--json", "--store-dir", str(store.root), cwd=repo)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["dry_run"] is False and out["kept_runs"] == 1 and isinstance(out["freed_bytes"], int)
    text = run_cli("gc", "--dry-run", "--store-dir", str(store.root), cwd=repo)
    assert text.returncode == 0 and "gc: nothing to free (1 run kept)" in text.stdout  # only what it removes
    rewind_run(store, RewindRequest(run_id=parked, node="apply"))
    assert (repo / "a.txt").read_bytes() == base and not (repo / "c.txt").exists()
    bad = run_cli("gc", "--older-than", "later", "--store-dir", str(store.root), cwd=repo)
    assert bad.returncode == 2 and "--older-than" in bad.stderr


def test_a_finished_worktree_runs_refs_go_and_a_parked_ones_stay(store: Store, repo: Path) -> None:
    done = fake_run(store, repo, [("setup", write("w.txt", "w\n"), {"exit_code": 0})],
                    status=RunStatus.FINISHED).id
    parked = fake_run(store, repo, [("setup", write("v.txt", "v\n"), {"exit_code": 0})],
                      status=RunStatus.CANCELLED, restart="setup").id
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/iterion/runs/").split()
    assert any(r.startswith(f"refs/iterion/runs/{done}/") for r in refs)
    report = collect(store)
    assert [r.run_id for r in report.collected] == [done] and report.collected[0].refs
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/iterion/runs/").split()
    assert not any(r.startswith(f"refs/iterion/runs/{done}/") for r in refs)
    assert any(r.startswith(f"refs/iterion/runs/{parked}/") for r in refs)
    assert repo.is_dir() and (repo / "w.txt").exists()  # not a worktree iterion made: left alone
