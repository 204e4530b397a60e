"""Restore: scopes, what is never touched, the report's honesty, banks and undo, symlink escapes."""

from __future__ import annotations

import os
from pathlib import Path

from .track_helpers import L, write
from workspacetrack import Tracker


def run_two_nodes(t: Tracker, ws: Path) -> None:
    """pre:a -> a writes out.txt and edits app.py -> pre:b -> b writes b.txt."""
    t.capture(L("pre:a:0"))
    write(ws, "out.txt", "a's output\n")
    write(ws, "src/app.py", "print('a')\n")
    t.capture(L("nodes:a:0"))
    t.capture(L("pre:b:0"))
    write(ws, "gen/b.txt", "b's output\n")
    t.capture(L("nodes:b:0"))


def test_produced_scope_restores_and_removes(tracker: Tracker, ws: Path) -> None:
    run_two_nodes(tracker, ws)
    report = tracker.restore(L("pre:a:0"))
    assert report.restored == ["src/app.py"]
    assert report.removed == ["gen/b.txt", "out.txt"]
    assert report.overwritten == [] and report.left_in_place == [] and not report.scope_empty
    assert (ws / "src/app.py").read_text() == "print('v1')\n"
    assert not (ws / "out.txt").exists() and not (ws / "gen/b.txt").exists()
    assert (ws / "gen").is_dir() and not any((ws / "gen").iterdir())  # emptied directories stay
    assert report.bank is not None


def test_pivot_later_in_chain_restores_only_its_range(tracker: Tracker, ws: Path) -> None:
    run_two_nodes(tracker, ws)
    report = tracker.restore(L("pre:b:0"))
    assert report.removed == ["gen/b.txt"] and report.restored == []
    assert (ws / "out.txt").exists() and (ws / "src/app.py").read_text() == "print('a')\n"


def test_human_edit_while_paused_survives_produced_rewind(tracker: Tracker, ws: Path) -> None:
    tracker.capture(L("pre:h:0"))
    write(ws, "draft.md", "node's draft\n")
    tracker.capture(L("pause:h:0"))
    write(ws, "NOTES.md", "the operator's own notes, written while the run waited\n")
    write(ws, "README.md", "operator edited this too\n")
    tracker.capture(L("resume:h:0"))
    write(ws, "final.md", "node's final\n")
    tracker.capture(L("nodes:h:0"))
    report = tracker.restore(L("pre:h:0"))
    assert report.removed == ["draft.md", "final.md"]
    assert (ws / "NOTES.md").read_text().startswith("the operator's own notes")
    assert (ws / "README.md").read_text() == "operator edited this too\n"
    assert "NOTES.md" not in report.left_in_place and "README.md" not in report.left_in_place


def test_file_rewritten_then_put_back_is_in_scope_and_restored(tracker: Tracker, ws: Path) -> None:
    tracker.capture(L("pre:a:0"))
    write(ws, "src/util.py", "X = 2\n")
    tracker.capture(L("nodes:a:0"))
    tracker.capture(L("pre:b:0"))
    write(ws, "src/util.py", "X = 1\n")  # b puts it back: identical at both ends of the range
    tracker.capture(L("nodes:b:0"))
    tracker.capture(L("pre:c:0"))
    write(ws, "src/util.py", "X = 3  # c died before its boundary\n")  # an uncaptured third write
    assert "src/util.py" in tracker.produced_scope(L("pre:a:0")).paths
    report = tracker.restore(L("pre:a:0"))
    assert report.restored == ["src/util.py"]
    assert report.overwritten == ["src/util.py"]  # matched neither the pivot nor the last boundary
    assert (ws / "src/util.py").read_text() == "X = 1\n"
    banked = tracker.manifest(report.bank or "").entries["src/util.py"][0]
    assert tracker.read_object(banked) == b"X = 3  # c died before its boundary\n"


def test_empty_scope_restores_nothing_and_says_so(tracker: Tracker, ws: Path) -> None:
    tracker.capture(L("nodes:a:0"))
    tracker.capture(L("pre:b:0"))
    tracker.capture(L("nodes:b:0"))  # b changed nothing
    write(ws, "README.md", "edited by the operator after the run stopped\n")
    report = tracker.restore(L("pre:b:0"))
    assert report.scope_empty and "nothing to restore" in report.message
    assert report.restored == [] and report.removed == [] and report.bank is None
    assert report.left_in_place == ["README.md"]
    assert (ws / "README.md").read_text().startswith("edited by the operator")


def test_scope_none_touches_nothing_and_full_reverts_every_captured_path(tracker: Tracker, ws: Path) -> None:
    tracker.capture(L("pre:h:0"))
    tracker.capture(L("pause:h:0"))
    write(ws, "human.txt", "written during the pause\n")
    tracker.capture(L("resume:h:0"))
    write(ws, "node.txt", "node output\n")
    tracker.capture(L("nodes:h:0"))
    write(ws, "uncaptured.txt", "never captured by any boundary\n")
    none = tracker.restore(L("pre:h:0"), "none")
    assert none.restored == none.removed == [] and "none" in none.message
    assert sorted(none.left_in_place) == ["uncaptured.txt"]
    full = tracker.restore(L("pre:h:0"), "full")
    assert full.removed == ["human.txt", "node.txt"]  # full: every versioned path, pause or not
    assert (ws / "uncaptured.txt").exists()  # never captured by the chain: untouched even by full


def test_protected_ignored_and_oversized_paths_are_untouched_and_reported(ws: Path, store: Path) -> None:
    write(ws, "flow.bot", "workflow v1\n")
    t = Tracker(store, ws, "r", size_cap=1000)
    t.capture(L("pre:a:0"))
    write(ws, "flow.bot", "workflow v2 (the operator's edit that motivates the rewind)\n")
    write(ws, "big.bin", b"x" * 10)
    write(ws, "cache.tmp", "node output, later ignored\n")
    t.capture(L("nodes:a:0"))
    write(ws, "big.bin", b"x" * 5000)  # now oversized
    write(ws, ".gitignore", "*.tmp\n")
    report = t.restore(L("pre:a:0"), protected=["flow.bot", str(ws / "nothing-here")])
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    # a rule added during the run does not shrink what it can restore: cache.tmp is the node's
    assert reasons == {"flow.bot": "protected", "big.bin": "oversized"}
    assert (ws / "flow.bot").read_text().startswith("workflow v2")
    assert (ws / "big.bin").stat().st_size == 5000 and not (ws / "cache.tmp").exists()


def test_symlink_escape_is_refused_and_reported(tracker: Tracker, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tracker.capture(L("pre:a:0"))
    write(ws, "gen/x.txt", "node output\n")
    write(ws, "link.txt", "node output\n")
    write(ws, "src/app.py", "print('a')\n")
    tracker.capture(L("nodes:a:0"))
    # After the run stopped, the directories/files are swapped for links pointing outside.
    (ws / "gen" / "x.txt").unlink()
    (ws / "gen").rmdir()
    os.symlink(outside, ws / "gen")
    (outside / "x.txt").write_text("outside content must survive\n")
    (ws / "src" / "app.py").unlink()
    os.symlink(outside / "target.py", ws / "src" / "app.py")
    (outside / "target.py").write_text("outside file must survive\n")
    report = tracker.restore(L("pre:a:0"))
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert reasons["gen/x.txt"] == "symlink_escape"
    # a link standing where a path is restored is itself replaced: never followed
    assert report.removed == ["link.txt"] and "src/app.py" in report.restored
    assert (outside / "x.txt").read_text() == "outside content must survive\n"
    assert (outside / "target.py").read_text() == "outside file must survive\n"
    assert os.path.islink(ws / "gen") and not os.path.islink(ws / "src" / "app.py")
    assert (ws / "src" / "app.py").read_text() == "print('v1')\n"


def test_restore_is_undoable_from_its_bank(tracker: Tracker, ws: Path) -> None:
    run_two_nodes(tracker, ws)
    write(ws, "out.txt", "a's output, hand-polished after the run stopped\n")
    report = tracker.restore(L("pre:a:0"))
    assert report.overwritten == ["out.txt"] and report.bank
    assert not (ws / "out.txt").exists()
    undo = tracker.undo(report.bank)
    assert sorted(undo.restored) == ["gen/b.txt", "out.txt", "src/app.py"]
    assert (ws / "out.txt").read_text() == "a's output, hand-polished after the run stopped\n"
    assert (ws / "src/app.py").read_text() == "print('a')\n"


def test_mode_and_symlink_entries_are_restored(tracker: Tracker, ws: Path) -> None:
    write(ws, "run.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("src/app.py", ws / "alias")
    tracker.capture(L("pre:a:0"))
    os.chmod(ws / "run.sh", 0o644)
    (ws / "alias").unlink()
    write(ws, "alias", "a regular file now\n")
    tracker.capture(L("nodes:a:0"))
    report = tracker.restore(L("pre:a:0"))
    assert sorted(report.restored) == ["alias", "run.sh"]
    assert (ws / "run.sh").stat().st_mode & 0o777 == 0o755
    assert os.readlink(ws / "alias") == "src/app.py"


def test_left_in_place_lists_changes_outside_the_scope(tracker: Tracker, ws: Path) -> None:
    run_two_nodes(tracker, ws)
    write(ws, "README.md", "operator edit after the run stopped\n")
    report = tracker.restore(L("pre:b:0"))
    assert report.left_in_place == ["README.md"]
    assert (ws / "README.md").read_text() == "operator edit after the run stopped\n"


def test_an_empty_directory_an_earlier_node_made_survives_the_restore(tracker: Tracker, ws: Path) -> None:
    """`mkdir -p out` in one node, files written into it by the next: rewinding the second must
    leave `out/` in place, or its replay meets a tree its pivot never had."""
    tracker.capture(L("pre:setup:0"))
    (ws / "out").mkdir()
    tracker.capture(L("nodes:setup:0"))
    tracker.capture(L("pre:fill:0"))
    write(ws, "out/a.txt", "made by fill\n")
    tracker.capture(L("nodes:fill:0"))
    report = tracker.restore(L("pre:fill:0"))
    assert report.removed == ["out/a.txt"]
    assert (ws / "out").is_dir() and not any((ws / "out").iterdir())


def test_a_file_comes_back_where_an_emptied_directory_stands(tracker: Tracker, ws: Path) -> None:
    write(ws, "thing", "a file at the pivot\n")
    tracker.capture(L("pre:a:0"))
    (ws / "thing").unlink()
    write(ws, "thing/inner.txt", "the node made a directory of it\n")
    tracker.capture(L("nodes:a:0"))
    report = tracker.restore(L("pre:a:0"))
    assert "thing" in report.restored and "thing/inner.txt" in report.removed
    assert (ws / "thing").read_text() == "a file at the pivot\n"
