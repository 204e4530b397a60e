"""The first boundary of a new process trusts the previous process's manifest for every directory
whose listing (names and lstat keys) is unchanged (issue 30 point 2; docs/technical/durability.md,
"Warm start"): what it records is always what a cold capture records."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, start_cli
from workspacetrack import Tracker
from workspacetrack.capture import PAUSE_HOOK_ENV

from ..conftest import git
from .track_helpers import L, write


def _tree(root: Path) -> None:
    for d in ("src", "docs", "lib/a", "lib/b"):
        for i in range(3):
            write(root, f"{d}/f{i}.txt", f"{d} {i}\n")
    write(root, "README.md", "hello\n")
    write(root, ".gitignore", "*.log\n")
    write(root, "lib/a/run.log", "ignored\n")
    (root / "empty").mkdir()


def _doc(store: Path, run: str) -> dict[str, object]:
    doc: dict[str, object] = json.loads((store / "runs" / run / "statcache.json").read_bytes())
    return doc


def _cold(tmp_path: Path, ws: Path) -> tuple[dict[str, object], dict[str, str]]:
    """What a capture with no history records of ``ws`` now."""
    store = tmp_path / f"cold-{time.monotonic_ns()}"
    t = Tracker(store, ws, "cold")
    m = t.manifest(t.capture(L("nodes:c:0")).id)
    t.close()
    return {p: tuple(e) for p, e in m.entries.items()}, dict(m.skipped)


def _state(t: Tracker, ref: str) -> tuple[dict[str, object], dict[str, str]]:
    m = t.manifest(ref)
    return {p: tuple(e) for p, e in m.entries.items()}, dict(m.skipped)


def _first_process(store: Path, ws: Path, run: str = "r") -> str:
    """A run's process: two boundaries (the second walks under the frozen rules), then exits."""
    t = Tracker(store, ws, run)
    t.capture(L("pre:a:0"))
    head = t.capture(L("nodes:a:0")).manifest
    t.close()
    return head


@pytest.mark.parametrize("in_git", [False, True])
def test_a_new_process_on_an_unchanged_tree_reads_no_file_and_keeps_the_manifest(
        ws: Path, tmp_path: Path, in_git: bool) -> None:
    _tree(ws)
    if in_git:
        git(ws, "init", "-q", "-b", "main")
        git(ws, "add", "-A")
        git(ws, "commit", "-q", "-m", "tree")
    store = tmp_path / "store"
    head = _first_process(store, ws)
    doc = _doc(store, "r")
    assert doc["format_version"] == 4 and doc["dirs_manifest"] == head
    dirs = doc["dirs"]
    assert isinstance(dirs, dict) and set(dirs) == {"", "src", "docs", "lib", "lib/a", "lib/b", "empty"}
    assert all(dirs.values())  # every row trusted: every directory vouches
    t = Tracker(store, ws, "r")
    t.start_watching()
    rec = t.capture(L("resume:a:1"))
    stats = t.last_capture
    assert stats is not None and stats.warm_dirs == 7 and stats.hashed == 0 and stats.reused_manifest
    assert rec.manifest == head and rec.changed == []
    # the journal takes over from there
    write(ws, "docs/f1.txt", "docs one, edited\n")
    rec = t.capture(L("nodes:a:2"))
    assert t.last_capture is not None and t.last_capture.mode == "journal"
    assert rec.changed == ["docs/f1.txt"]
    assert _state(t, rec.id) == _cold(tmp_path, ws)
    t.close()


def test_a_new_process_after_changes_records_what_a_cold_capture_records(ws: Path, tmp_path: Path) -> None:
    _tree(ws)
    store = tmp_path / "store"
    head = _first_process(store, ws)
    write(ws, "src/f1.txt", "src 9\n")  # same size, new content
    write(ws, "new/deep/x.txt", "new\n")
    (ws / "src" / "f0.txt").unlink()
    for name in os.listdir(ws / "lib" / "a"):
        os.unlink(ws / "lib" / "a" / name)
    (ws / "lib" / "a").rmdir()
    write(ws, "empty/now.txt", "filled\n")
    (ws / "docs" / "sub").mkdir()  # a new empty directory
    t = Tracker(store, ws, "r")
    rec = t.capture(L("resume:a:1"))
    stats = t.last_capture
    assert stats is not None and stats.warm_dirs == 1  # lib/b stood as it was
    assert rec.manifest != head
    assert _state(t, rec.id) == _cold(tmp_path, ws)
    assert sorted(rec.changed or []) == sorted(["src/f1.txt", "new/deep/x.txt", "src/f0.txt", "lib/a/f0.txt",
                                                "lib/a/f1.txt", "lib/a/f2.txt", "empty", "empty/now.txt",
                                                "docs/sub"])
    t.close()
    # and the next process starts warm from that state
    again = Tracker(store, ws, "r")
    assert again.capture(L("resume:a:2")).manifest == rec.manifest
    assert again.last_capture is not None and again.last_capture.hashed == 0
    again.close()


def test_a_racily_clean_file_leaves_its_directory_to_be_examined_and_is_read_again(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git's racy-timestamp rule: a file whose times fall within the window of the capture that
    hashed it could change again within the same timestamp tick, so its directory does not
    vouch for it; the next process re-reads it and sees its content as it is then."""
    from workspacetrack import walk

    _tree(ws)
    store = tmp_path / "store"
    t = Tracker(store, ws, "r")
    t.capture(L("pre:a:0"))
    write(ws, "docs/f0.txt", "docs 0, edited\n")
    time.sleep(0.5)
    write(ws, "src/f2.txt", "src 2, racy\n")
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 250_000_000)  # src/f2.txt: within it; docs/f0.txt: not
    t.capture(L("nodes:a:0"))
    t.close()
    dirs = _doc(store, "r")["dirs"]
    assert isinstance(dirs, dict)
    assert dirs["src"] == ""  # a racily clean row: the directory cannot vouch
    assert dirs["docs"] and dirs["lib/a"]  # re-read out of the window, and unchanged
    # the racy file changes within its tick: same size, same mtime (a coarse clock)
    st = os.stat(ws / "src" / "f2.txt")
    (ws / "src" / "f2.txt").write_text("src 2, RACY\n")
    os.utime(ws / "src" / "f2.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 0)
    again = Tracker(store, ws, "r")
    rec = again.capture(L("resume:a:1"))
    stats = again.last_capture
    assert stats is not None and stats.warm_dirs >= 1 and stats.hashed >= 1
    assert "src/f2.txt" in (rec.changed or [])
    assert _state(again, rec.id) == _cold(tmp_path, ws)
    again.close()


def test_fingerprints_follow_the_journal_and_name_its_manifest(ws: Path, tmp_path: Path) -> None:
    _tree(ws)
    store = tmp_path / "store"
    t = Tracker(store, ws, "r")
    t.start_watching()
    t.capture(L("pre:a:0"))
    t.capture(L("nodes:a:0"))
    write(ws, "docs/f0.txt", "docs zero, edited\n")
    head = t.capture(L("nodes:a:1")).manifest
    assert t.last_capture is not None and t.last_capture.mode == "journal"
    t.close()  # stops watching: the cache is saved with the journal's state
    doc = _doc(store, "r")
    dirs = doc["dirs"]
    assert doc["dirs_manifest"] == head and isinstance(dirs, dict)
    assert dirs["docs"] == "" and dirs["src"] and dirs["lib/b"]
    again = Tracker(store, ws, "r")
    rec = again.capture(L("resume:a:2"))
    assert rec.manifest == head
    assert again.last_capture is not None and again.last_capture.warm_dirs == 6  # all but docs
    again.close()


def test_a_fingerprinted_manifest_missing_from_the_store_means_a_full_walk(ws: Path, tmp_path: Path) -> None:
    _tree(ws)
    store = tmp_path / "store"
    head = _first_process(store, ws)
    path = store / "runs" / "r" / "statcache.json"
    doc = _doc(store, "r")
    doc["dirs_manifest"] = "0" * 64
    path.unlink()  # (a hard link to the shared copy: never written through)
    path.write_text(json.dumps(doc))
    write(ws, "src/f0.txt", "src zero, edited\n")
    t = Tracker(store, ws, "r")
    rec = t.capture(L("resume:a:1"))
    assert t.last_capture is not None and t.last_capture.warm_dirs == 0
    assert rec.manifest != head and _state(t, rec.id) == _cold(tmp_path, ws)
    t.close()


def test_a_capture_killed_before_its_commit_never_leaves_a_fingerprint_for_its_state(
        ws: Path, tmp_path: Path) -> None:
    """SIGKILL after the capture wrote its objects and manifest, before the state named them:
    the cache still holds the previous process's fingerprints and manifest, and the next
    process records the disk as it is."""
    _tree(ws)
    store = tmp_path / "store"
    head = _first_process(store, ws)
    before = (store / "runs" / "r" / "statcache.json").read_bytes()
    write(ws, "src/f1.txt", "src 7\n")
    write(ws, "gen/out.txt", "generated\n")
    marker = tmp_path / "mid-capture"
    common = ["--store", str(store), "--workspace", str(ws), "--run-id", "r"]
    proc = start_cli("track", "capture", "--label", "nodes:a:1", *common, cwd=REPO_ROOT,
                     env={PAUSE_HOOK_ENV: str(marker)}, text=False)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "capture never reached the hook"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (store / "runs" / "r" / "statcache.json").read_bytes() == before
    t = Tracker(store, ws, "r")
    rec = t.capture(L("nodes:a:1"))
    assert rec.manifest != head
    assert sorted(rec.changed or []) == ["gen/out.txt", "src/f1.txt"]
    assert _state(t, rec.id) == _cold(tmp_path, ws)
    t.close()


def _person(repo: Path) -> None:
    write(repo, "src/m0/f1.txt", "the person's edit of a node's file\n")   # in scope: overwritten
    write(repo, "README.md", "the person's notes\n")                       # out of scope
    write(repo, "notes/new.txt", "a new file of the person's\n")
    (repo / "docs/guide.md").unlink()
    os.chmod(repo / "src/m0/f2.txt", 0o755)
    (repo / "keep/empty-soon.txt").unlink()                                # a directory emptied
    write(repo, "debug.log", "ignored: never reported\n")


@pytest.mark.parametrize("after", [None, _person], ids=["unchanged since", "a person's edits since"])
def test_a_restore_in_a_new_process_plans_from_the_warm_walk_as_the_full_walk_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: object) -> None:
    """Rewind planning (issue 30 point 4): a new process learns what changed since the last
    boundary from the warm walk and reads the two states for the scope's paths alone; preview,
    restore, bank and tree agree with a process that walks and compares whole states."""
    from .test_track_restore_drift import _pair, _restore
    from .test_track_restore_drift import _tree as tree_of

    a, b = _pair(tmp_path, after)  # type: ignore[arg-type]
    pa, ta = _restore(a, tmp_path / "status" / "store", monkeypatch, walk=False, preview=True, warm=True)
    pb, tb = _restore(b, tmp_path / "walk" / "store", monkeypatch, walk=True, preview=True)
    assert ta.restore_mode == "warm walk" and tb.restore_mode == "walk"
    assert pa == pb
    ra, ta = _restore(a, tmp_path / "status" / "store", monkeypatch, walk=False, warm=True)
    rb, tb = _restore(b, tmp_path / "walk" / "store", monkeypatch, walk=True)
    assert ta.restore_mode == "warm walk"
    bank_a, bank_b = ra.pop("bank"), rb.pop("bank")
    assert ra == rb and {k: v for k, v in pa.items() if k != "bank"} == ra
    assert ra["restored"]  # (the node's files went back)
    ma, mb = ta.manifest(str(bank_a)), tb.manifest(str(bank_b))
    assert ma.entries == mb.entries and ma.skipped == mb.skipped  # the same disk state banked
    assert tree_of(a) == tree_of(b)
    if after is not None:
        assert {"README.md", "notes/new.txt", "docs/guide.md", "src/m0/f2.txt"} <= set(ra["left_in_place"])  # type: ignore[arg-type]
        assert ra["overwritten"] == ["src/m0/f1.txt"]


def test_the_object_check_reads_the_scope_alone(ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``missing_for_restore`` of a produced scope reads the pivot's entries of that scope only
    (``TrackStore.read_manifest_paths``), never the whole state."""
    from workspacetrack.store import TrackStore

    _tree(ws)
    store = tmp_path / "store"
    t = Tracker(store, ws, "r")
    t.capture(L("pre:a:0"))
    write(ws, "src/f0.txt", "changed by the node\n")
    t.capture(L("nodes:a:0"))
    t.close()

    def whole(*_a: object, **_k: object) -> object:
        raise AssertionError("a whole manifest was read")

    monkeypatch.setattr(TrackStore, "read_manifest", whole)
    monkeypatch.setattr(TrackStore, "read_manifest_once", whole)
    fresh = Tracker(store, ws, "r")
    assert fresh.missing_for_restore(L("pre:a:0")) == []
    # its object gone: named, with the pivot's id of that path
    pivot = fresh.store.read_manifest_paths(fresh.resolve("pre:a:0").manifest, {"src/f0.txt"})[0]
    digest = pivot.entries["src/f0.txt"][0]
    path = fresh.store.objects.locate(digest)
    assert path is not None
    os.chmod(path, 0o644)
    path.unlink()
    assert fresh.missing_for_restore(L("pre:a:0")) == [("src/f0.txt", digest)]
    fresh.close()


def test_picking_a_manifest_s_entries_agrees_with_its_python_twin(ws: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_manifest_paths``: C's one pass and the full parse give the same entries and count,
    for a full manifest, a delta on it, and names the C pass leaves to the parse (escapes)."""
    from workspacetrack import store as store_mod
    from workspacetrack.store import TrackStore

    _tree(ws)
    write(ws, "odd/.gitignore", "*.tmp\n")
    st = tmp_path / "store"
    t = Tracker(st, ws, "r")
    t.start_watching()
    full = t.capture(L("pre:a:0")).manifest
    write(ws, "src/f1.txt", "edited\n")
    write(ws, 'odd/quote".txt', "a quote in the name\n")  # (the delta's JSON: left to the parse)
    (ws / "docs" / "f2.txt").unlink()
    delta = t.capture(L("nodes:a:0")).manifest
    t.close()
    fast = store_mod.FAST
    if fast is not None:  # (built: the full manifest is C's, the delta's own document is not)
        objects = TrackStore(st, "r").objects
        assert fast.pick_entries(objects.read(full), set(), ()) is not None
        assert fast.pick_entries(objects.read(delta), set(), ()) is None
    wanted = {"src/f1.txt", "docs/f2.txt", "docs/f0.txt", 'odd/quote".txt', "absent.txt"}
    for digest in (full, delta):
        got = []
        for fast in (store_mod.FAST, None):
            monkeypatch.setattr(store_mod, "FAST", fast)
            store_mod._PICKED.clear()  # (the process's picks: each way reads for itself)
            m, count = TrackStore(st, "r").read_manifest_paths(digest, wanted)
            got.append(({p: tuple(e) for p, e in m.entries.items()}, dict(m.skipped), count))
        assert got[0] == got[1]
        whole = TrackStore(st, "r").read_manifest(digest)
        assert got[0][2] == len(whole.entries)
        assert got[0][0] == {p: tuple(e) for p, e in whole.entries.items()
                             if p in wanted or p.rsplit("/", 1)[-1] in (".gitignore", ".iterionignore")}


def test_picking_looks_paths_up_by_their_bytes_as_the_python_twin_does() -> None:
    """``_fastwalk.pick_entries`` finds the wanted paths by their UTF-8 bytes (no str per key):
    non-ASCII names match, a wanted element that is not a str or not strict UTF-8 (a surrogate-
    escaped name) matches nothing, rule files are picked whatever is wanted, and the count is
    every entry's."""
    from workspacetrack import _fastwalk as fast  # (built by the install: setup.py)

    entries = {"a/b.txt": ["x1", 33188, 1, None], "é/ü.txt": ["x2", 33188, 2, None],
               "a/.gitignore": ["x3", 33188, 3, None], "c": ["x4", 33188, 4, "t"],
               "deep/er/name.txt": ["x5", 33188, 5, None]}
    data = json.dumps({"format_version": 2, "entries": entries, "skipped": {}}, separators=(",", ":"),
                      ensure_ascii=False).encode()
    for wanted in (set(), {"é/ü.txt", 7, "\udcff", "c", "missing"}, frozenset(entries), {"a/b.tx", "a/b.txt"}):
        got = fast.pick_entries(data, wanted, (b".gitignore",))
        assert got is not None
        picked, count, start, end = got
        assert count == len(entries)
        expect = {p for p in entries if p in wanted or p.endswith("/.gitignore")}
        assert set(picked) == expect, wanted
        assert all(json.loads(picked[p]) == entries[p] for p in expect)
        assert json.loads(data[start:end]) == entries
