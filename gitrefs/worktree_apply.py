"""Make a working tree go from one recorded tree to another, path by path.

Used by the revert: the working tree is known to equal ``old`` (it was just snapshotted), so
applying the tree diff old -> new touches exactly the versioned paths that differ, and leaves
ignored and never-captured files alone.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from gitrefs.persist.killpoint import kill_point

_GITLINK = 0o160000
_LINK = 0o120000
_EXEC = 0o100755


@dataclass
class ApplyResult:
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _remove_empty_tree(path: Path) -> bool:
    """Remove directory ``path`` if it holds nothing but (nested) empty directories."""
    for child in path.iterdir():
        if child.is_symlink() or not child.is_dir() or not _remove_empty_tree(child):
            return False
    path.rmdir()
    return True


def diff_path(f: pygit2.DiffFile) -> str:
    """A diff side's path as the OS spells it: its exact bytes (surrogateescape for bytes that
    are not UTF-8; pygit2's ``path`` would replace them)."""
    return os.fsdecode(f.raw_path)


def _link_on_path(root: Path, rel: str) -> bool:
    """Whether a directory on the way to ``rel`` is a symlink (writing would follow it)."""
    cur = root
    for part in rel.split("/")[:-1]:
        cur = cur / part
        if cur.is_symlink():
            return True
        if not cur.exists():
            return False
    return False


def _write_file(dest: Path, data: bytes, mode: int) -> None:
    """Atomic replace through a short temporary name (a 255-byte name cannot grow past NAME_MAX);
    a symlink at ``dest`` is replaced, never followed. Not fsynced, as git checkout does not."""
    tmp = dest.parent / f".iterion-restore.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove(root: Path, rel: str) -> bool:
    target = root / rel
    if target.is_symlink() or target.is_file():
        # Emptied directories stay: git records none, so an empty directory an earlier node
        # made (`mkdir -p out`) may well be part of what the pivot started from.
        target.unlink()
        return True
    return not target.exists()


def _is_empty_tree(path: Path) -> bool:
    """``_remove_empty_tree``'s test, removing nothing."""
    return all(not c.is_symlink() and c.is_dir() and _is_empty_tree(c) for c in path.iterdir())


def _removable(root: Path, rel: str) -> bool:
    """``_remove``'s answer, removing nothing."""
    target = root / rel
    return target.is_symlink() or target.is_file() or not target.exists()


def apply_tree_diff(repo: pygit2.Repository, root: Path, old_tree: str, new_tree: str, *,
                    dry_run: bool = False) -> ApplyResult:
    """Apply the diff ``old_tree`` -> ``new_tree`` to ``root``; with ``dry_run``, walk it the same
    way and return the same result with nothing written (what a rewind's preview reports)."""
    result = ApplyResult()
    if old_tree == new_tree:
        return result
    diff = repo[old_tree].peel(pygit2.Tree).diff_to_tree(repo[new_tree].peel(pygit2.Tree))
    deltas = list(diff.deltas)
    # Deletions first: a file replaced by a directory (or the reverse) needs the old one gone.
    for d in deltas:
        if d.status == pygit2.enums.DeltaStatus.DELETED or (
                d.status == pygit2.enums.DeltaStatus.TYPECHANGE and d.old_file.mode != _GITLINK):
            old_path = diff_path(d.old_file)
            if d.old_file.mode == _GITLINK or _link_on_path(root, old_path):
                result.skipped.append(old_path)
            elif _removable(root, old_path) if dry_run else _remove(root, old_path):
                if d.status == pygit2.enums.DeltaStatus.DELETED:
                    result.removed.append(old_path)
            else:
                result.skipped.append(old_path)
            kill_point("restore")  # test-only fault injection (gitrefs/persist/killpoint.py)
    for d in deltas:
        if d.status == pygit2.enums.DeltaStatus.DELETED:
            continue
        rel, mode = diff_path(d.new_file), d.new_file.mode
        if mode == _GITLINK or _link_on_path(root, rel):
            # A submodule's content lives in another repository: report, never descend.
            result.skipped.append(rel)
            continue
        dest = root / rel
        if dest.is_dir() and not dest.is_symlink() and not (_is_empty_tree(dest) if dry_run
                                                             else _remove_empty_tree(dest)):
            result.skipped.append(rel)  # a directory with content the tree does not own is in the way
            continue
        if dry_run:
            result.written.append(rel)
            continue
        data = repo[d.new_file.id].peel(pygit2.Blob).data
        dest.parent.mkdir(parents=True, exist_ok=True)
        if mode == _LINK:
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            os.symlink(os.fsdecode(data), dest)
        else:
            if dest.is_symlink():
                dest.unlink()
            # The umask applies, as it does for `git checkout`.
            _write_file(dest, data, 0o755 if mode == _EXEC else 0o644)
        result.written.append(rel)
        kill_point("restore")
    # A type change (file <-> symlink) arrives as a delete plus an add: it is a restore.
    rewritten = set(result.written)
    result.removed = [p for p in result.removed if p not in rewritten]
    return result

