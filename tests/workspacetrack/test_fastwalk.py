"""The C listing (workspacetrack/_fastwalk.c) against its Python twin in workspacetrack/walk.py:
the same workspace captured both ways records the same manifest, step after step, on trees with
what a careless or hostile workspace holds (undecodable names, fifos, symlinks, nested
repositories, the store inside the workspace, rule files that come and go, vanished entries)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .track_helpers import L, write
from workspacetrack import Tracker, store, walk
from workspacetrack.models import Manifest


def test_the_extension_is_built_current_and_used() -> None:
    from workspacetrack import _fastwalk, fastext, gitsource

    assert _fastwalk.API == fastext.API, "a stale build: run `pip install -e .` again"
    assert walk._fast is _fastwalk and gitsource._fast is _fastwalk


def _capture_both(ws: Path, c: Tracker, py: Tracker, label: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Manifest, Manifest]:
    got_c = c.manifest(c.capture(L(label)).id)
    with monkeypatch.context() as m:
        m.setattr(walk, "_fast", None)
        got_py = py.manifest(py.capture(L(label)).id)
    return got_c, got_py


def _hostile_tree(ws: Path) -> None:
    write(ws, ".gitignore", "*.o\nbuild/\n!keep.o\n")
    write(ws, "a/x.txt", "x\n")
    write(ws, "a/keep.o", "kept by negation\n")
    write(ws, "a/drop.o", "ignored\n")
    write(ws, "build/out.bin", "ignored dir\n")
    write(ws, "tool.sh", "#!/bin/sh\n", mode=0o755)
    (ws / "empty" / "nested").mkdir(parents=True)
    os.symlink("a/x.txt", ws / "link")
    os.symlink("missing-target", ws / "dangling")
    os.symlink("a", ws / "dirlink")
    os.mkfifo(ws / "a" / "fifo")
    write(ws, "sub/.git/HEAD", "ref: refs/heads/main\n")  # a nested repository's own
    write(ws, "sub/file.txt", "beside a nested .git\n")
    write(ws, "deep/.git", "gitdir: elsewhere\n")  # a .git FILE in a subfolder is content
    write(ws, "deep/.iterionignore", "*.tmp\n")
    write(ws, "deep/t.tmp", "ignored by .iterionignore\n")
    fd = os.open(os.fsencode(str(ws / "a")) + b"/bad-\xff\xfe.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"undecodable name\n")
    os.close(fd)
    for i in range(40):  # enough directories for a wave to be listed on several threads
        write(ws, f"many/d{i:02d}/f.txt", f"{i}\n")


def test_hostile_tree_step_by_step_same_manifest_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    _hostile_tree(ws)
    # the stores inside the workspace, ignored (as a store inside must be)
    write(ws, ".iterionignore", ".state-py/\n.state-c/\n")
    c = Tracker(ws / ".state-c", ws, "c")
    py = Tracker(ws / ".state-py", ws, "py")
    steps = [
        lambda: None,
        lambda: write(ws, "a/x.txt", "x grew\n"),
        lambda: write(ws, "a/.gitignore", "*.txt\n"),
        lambda: (ws / "a/.gitignore").unlink(),
        lambda: (ws / "link").unlink(),
        lambda: os.chmod(ws / "tool.sh", 0o644),
        lambda: shutil.rmtree(ws / "empty/nested"),
        lambda: (ws / "many/d07/f.txt").unlink(),
        lambda: ((ws / "a/x.txt").unlink(), (ws / "a/x.txt").mkdir()),
        lambda: shutil.rmtree(ws / "sub/.git"),
        lambda: None,
    ]
    for i, change in enumerate(steps):
        change()
        got_c, got_py = _capture_both(ws, c, py, f"nodes:n:{i}", monkeypatch)
        diff = {k for k in got_c.entries.keys() | got_py.entries.keys() if got_c.entries.get(k) != got_py.entries.get(k)}
        assert (got_c.entries, got_c.skipped) == (got_py.entries, got_py.skipped), (i, diff, {k: (got_c.entries.get(k), got_py.entries.get(k)) for k in diff})
    final = got_c
    assert not any(p.startswith((".state-c", ".state-py")) for p in final.entries)
    assert "deep/.git" in final.entries and "sub/.git/HEAD" not in final.entries
    assert final.skipped.get("a/fifo") is not None
    assert os.fsdecode(b"a/bad-\xff\xfe.txt") in final.entries


def test_an_unreadable_directory_and_the_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory that cannot be listed is skipped with its reason both ways."""
    ws = tmp_path / "ws"
    write(ws, "ok/f.txt", "f\n")
    write(ws, "locked/secret.txt", "s\n")
    write(ws, ".iterionignore", "store-c/\n")
    c = Tracker(ws / "store-c", ws, "c")
    py = Tracker(ws / "store-c" / "py", ws, "py")
    os.chmod(ws / "locked", 0)
    try:
        got_c, got_py = _capture_both(ws, c, py, "nodes:n:0", monkeypatch)
    finally:
        os.chmod(ws / "locked", 0o755)
    assert (got_c.entries, got_c.skipped) == (got_py.entries, got_py.skipped)
    assert not any(p.startswith("store-c") for p in got_c.entries)
    if os.geteuid() != 0:  # root lists any directory
        assert got_c.skipped.get("locked") is not None


_NAMES = st.sampled_from(["a", "b", "c.o", ".gitignore", "x y", "é", "d"])
_OPS = st.lists(st.tuples(st.sampled_from(["write", "grow", "rm", "mkdir", "rmtree", "rule", "link"]),
                          st.lists(_NAMES, min_size=1, max_size=3)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_random_edits_same_manifest_both_ways(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, list[str]]]) -> None:
    """Random edits between captures: the C walk (reusing its directory records) and the Python
    walk record the same manifest after every step."""
    base = tmp_path_factory.mktemp("rand")
    ws = base / "ws"
    write(ws, "seed.txt", "seed\n")
    c = Tracker(base / "sc", ws, "c")
    py = Tracker(base / "sp", ws, "py")
    mp = pytest.MonkeyPatch()
    try:
        for i, (op, parts) in enumerate(ops):
            p = ws.joinpath(*parts)
            try:
                if op == "write":
                    write(ws, "/".join(parts), f"{i}\n")
                elif op == "grow" and p.is_file():
                    p.write_bytes(p.read_bytes() + b"more\n")
                elif op == "rm" and (p.is_file() or p.is_symlink()):
                    p.unlink()
                elif op == "mkdir":
                    p.mkdir(parents=True, exist_ok=True)
                elif op == "rmtree" and p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif op == "rule":
                    write(ws, "/".join([*parts[:-1], ".gitignore"]), f"{parts[-1]}\n*.o\n")
                elif op == "link" and not p.exists() and not p.is_symlink():
                    p.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink("seed.txt", p)
            except (FileExistsError, NotADirectoryError, IsADirectoryError, FileNotFoundError):
                pass  # an op that does not apply to this tree's current shape
            got_c, got_py = _capture_both(ws, c, py, f"nodes:n:{i}", mp)
            assert (got_c.entries, got_c.skipped) == (got_py.entries, got_py.skipped), (i, op, parts)
    finally:
        mp.undo()


def test_the_store_directory_is_never_listed_and_its_parent_is_not_empty(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk leaves out the directory whose (dev, ino) is the store's, whatever the rules say,
    and a directory holding only the store is not recorded as an empty directory - both ways."""
    from workspacetrack.ignore import IgnoreRules
    from workspacetrack.objects import ObjectStore
    from workspacetrack.walk import Scan

    ws = tmp_path / "ws"
    write(ws, "f.txt", "f\n")
    write(ws, "holder/store/objects/x", "inside the store\n")
    write(ws, "other/store2/y", "not the store\n")
    st = os.stat(ws / "holder" / "store")
    results = []
    for fast in (walk._fast, None):
        monkeypatch.setattr(walk, "_fast", fast)
        scan = Scan(str(ws), IgnoreRules(ws), ObjectStore(tmp_path / f"objs-{fast is None}"), 1 << 20, {},
                    (st.st_dev, st.st_ino), use_index=False)
        scan.walk("", scan.rules.root_levels)
        rows = scan.found_rows()
        results.append((sorted(rows), {d: sorted(r[1]) for d, r in scan.dirs.items()}))
        assert "holder" not in rows and not any(p.startswith("holder/store") for p in rows)
        assert "other/store2/y" in rows
    assert results[0] == results[1]


def test_rows_and_parts_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk's records turned into rows, entries and skips: C and Python give equal dicts
    (undecodable names, an empty directory's own row, a fifo's skip, symlink targets)."""
    from workspacetrack.ignore import IgnoreRules
    from workspacetrack.objects import ObjectStore
    from workspacetrack.walk import Scan

    ws = tmp_path / "ws"
    _hostile_tree(ws)
    scan = Scan(str(ws), IgnoreRules(ws), ObjectStore(tmp_path / "objs"), 1 << 20, {}, None, use_index=False)
    scan.walk("", scan.rules.root_levels)
    scan.extra_skipped["gone/dir"] = "unreadable"
    by_c = scan.found_rows_and_parts()
    monkeypatch.setattr(walk, "_fast", None)
    by_py = scan.found_rows_and_parts()
    assert by_c == by_py
    rows, entries, skipped, entries_json = by_c
    assert entries_json is None  # undecodable names: the manifest is written the Python way
    assert "empty/nested" in entries and skipped["gone/dir"] == "unreadable" and "a/fifo" in skipped
    assert entries["link"][3] == "a/x.txt" and os.fsdecode(b"a/bad-\xff\xfe.txt") in rows


def test_rows_and_parts_sorted_with_their_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On names that are plain text, C gives the entries' JSON in key order, in the same pass
    (past 1,024 entries the sort and the JSON run on a thread of their own): the stored
    manifest is byte for byte the one the Python way writes."""
    from workspacetrack.ignore import IgnoreRules
    from workspacetrack.objects import ObjectStore
    from workspacetrack.store import _stored_manifest
    from workspacetrack.walk import Scan

    ws = tmp_path / "ws"
    for rel in ("b/z.txt", "b.txt", "a/b/c.txt", "a.b", "a/\u00e9t\u00e9 \"q\".txt", "a/tab\there", "Z", "b/0"):
        write(ws, rel, rel)
    for i in range(1100):
        write(ws, f"many/{'ab'[i % 2]}/f{(i * 7919) % 1100}.txt", str(i))
    os.symlink("b.txt", ws / "link")
    (ws / "empty").mkdir()
    scan = Scan(str(ws), IgnoreRules(ws), ObjectStore(tmp_path / "objs"), 1 << 20, {}, None, use_index=False)
    scan.walk("", scan.rules.root_levels)
    rows, entries, skipped, entries_json = scan.found_rows_and_parts()
    assert entries_json is not None and len(entries) > 1100
    assert list(json.loads(entries_json)) == sorted(entries)  # stored in key order
    monkeypatch.setattr(walk, "_fast", None)
    rows_py, entries_py, skipped_py, json_py = scan.found_rows_and_parts()
    assert json_py is None and (rows, entries, skipped) == (rows_py, entries_py, skipped_py)
    by_c = _stored_manifest(entries, skipped, entries_json, ids="git")[1]
    monkeypatch.setattr(store, "FAST", None)  # pydantic writes all of it
    assert by_c == _stored_manifest(entries_py, skipped_py, None, ids="git")[1]


def test_a_walk_with_no_thread_to_be_had_lists_on_its_own_thread(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing runs ahead on background threads; where none can be started (a pids limit:
    RuntimeError "can't start new thread"), the walk lists each batch itself and records the same."""
    import threading

    ws = tmp_path / "ws"
    for i in range(300):
        write(ws, f"d{i % 150:03d}/f{i}.txt", str(i))
    first = Tracker(tmp_path / "s1", ws, "r1")
    expected = first.capture(L("pre:a:0"))
    first.close()

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    second = Tracker(tmp_path / "s2", ws, "r2")
    got = second.capture(L("pre:a:0"))
    second.close()
    assert second.store.read_manifest(got.manifest).entries == first.store.read_manifest(expected.manifest).entries
