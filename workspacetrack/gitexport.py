"""Exporting an in-place run's snapshot as a git commit, so it can be pushed like a worktree run's.

The commit is written into the workspace repository's object database ONLY: no ref, and the
user's index, HEAD and branches are never touched (blobs and trees are written with pygit2,
never through ``git add``). Its tree is the repository as the snapshot saw it:

* inside the workspace (the repository's top level or a directory in it): every captured file
  and symlink of the snapshot, with its exec bit;
* what the snapshot could NOT see keeps HEAD's version: paths outside the workspace, files the
  capture skipped (over the size limit, unreadable) and files git tracks although an ignore rule
  matches them (the tracker never captures ignored paths, so their absence is no deletion);
* a submodule (a gitlink in HEAD) stays HEAD's gitlink; the files under it are not exported;
* left out, and listed in ``skipped``: empty directories (git records none), any path with a
  ``.git`` component (git refuses those on checkout) and names that are not UTF-8.

The parent is HEAD (none when HEAD is unborn), so ``git diff FETCH_HEAD^ FETCH_HEAD`` shows the
workspace's state against the commit it was based on.

Blob ids are cached by content hash (``gitblobs.json`` in the track store): a blob id depends on
the content alone, so the cache holds for every repository, and a cached id is only trusted when
the object is present in the target repository.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2
from pydantic import Field

from gitrefs.commits import T_KIND, T_RUN, CommitSpec, create_commit
from gitrefs.persist import VersionedModel, read_model, write_model
from gitrefs.workspace import open_workspace
from workspacetrack.gitsource import is_blob_id
from workspacetrack.models import Manifest
from workspacetrack.names import display, is_clean, to_bytes

T_SNAPSHOT = "Iterion-Snapshot"
T_LABEL = "Iterion-Label"
EXPORT_KIND = "checkpoint"

_BLOB, _EXEC, _LINK, _GITLINK, _TREE = 0o100644, 0o100755, 0o120000, 0o160000, 0o040000


class BlobCache(VersionedModel):
    """blake3 content id -> git blob id (content-determined, so valid in every repository)."""

    blobs: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class Export:
    commit: str
    tree: str
    parent: str | None
    snapshot: str
    skipped: list[str] = field(default_factory=list)  # display form, sorted


def _bad_component(path: str) -> bool:
    return any(part.lower() == ".git" for part in path.split("/"))


def _flatten(repo: pygit2.Repository, tree: pygit2.Tree, base: str, out: dict[str, tuple[str, int]]) -> None:
    for entry in tree:
        path = f"{base}{entry.name}"
        if entry.filemode == _TREE:
            _flatten(repo, repo[entry.id].peel(pygit2.Tree), path + "/", out)
        else:
            out[path] = (str(entry.id), entry.filemode)


def _write_tree(repo: pygit2.Repository, flat: dict[str, tuple[str, int]]) -> str:
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        node = nested
        parts = path.split("/")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):  # a file where a directory is needed: the file wins
                break
            node = child
        else:
            node.setdefault(parts[-1], value)

    def build(node: dict[str, Any]) -> str | None:
        tb = repo.TreeBuilder()
        count = 0
        for name, value in node.items():
            if isinstance(value, dict):
                sub = build(value)
                if sub is None:
                    continue
                tb.insert(name, pygit2.Oid(hex=sub), _TREE)
            else:
                tb.insert(name, pygit2.Oid(hex=value[0]), value[1])
            count += 1
        return str(tb.write()) if count else None

    return build(nested) or str(repo.TreeBuilder().write())


class _Blobs:
    def __init__(self, repo: pygit2.Repository, cache_path: Path, objects: Any) -> None:
        self.repo, self.path, self.objects = repo, cache_path, objects
        try:
            self.cache = read_model(cache_path, BlobCache) if cache_path.is_file() else BlobCache()
        except Exception:  # noqa: BLE001 - a damaged cache is only a cache: start again
            self.cache = BlobCache()
        self.dirty = False

    def file(self, digest: str) -> str:
        known = self.cache.blobs.get(digest)
        if known is not None and pygit2.Oid(hex=known) in self.repo:
            return known
        if is_blob_id(digest) and pygit2.Oid(hex=digest) in self.repo:
            return digest  # recorded by git blob id (workspacetrack.gitsource): git already has it
        # streamed from the object file (its bytes are the content): a big file never sits in memory
        where = self.objects.locate(digest)
        oid = str(self.repo.create_blob_fromdisk(str(where)) if where is not None
                  else self.repo.create_blob(self.objects.read(digest)))
        self.cache.blobs[digest] = oid
        self.dirty = True
        return oid

    def link(self, target: str) -> str:
        return str(self.repo.create_blob(to_bytes(target)))

    def save(self) -> None:
        if self.dirty:
            try:
                write_model(self.path, self.cache)
            except OSError:
                pass  # a cache that cannot be written costs re-hashing next time, nothing else


def export_snapshot(tracker: Any, snapshot_id: str | None = None, *, subject: str | None = None,
                    trailers: dict[str, str] | None = None) -> Export:
    """Write ``snapshot_id`` (default: the run's head snapshot) of ``tracker`` (a
    ``workspacetrack.tracker.Tracker``) as a commit in its workspace's repository.

    Raises ``gitrefs.NotARepository`` when the workspace is not inside a git checkout, and
    ``UnknownSnapshotError`` when the run recorded nothing yet.
    """
    from workspacetrack.errors import UnknownSnapshotError

    ws = open_workspace(tracker.workspace)
    repo = ws.repo
    state = tracker.store.load_state()
    snap_id = snapshot_id or (state.head if state is not None else None)
    if state is None or snap_id is None:
        raise UnknownSnapshotError(f"run {tracker.run_id} has recorded no snapshot to export")
    rec = tracker.store.snapshot(state, snap_id)
    manifest: Manifest = tracker.store.read_manifest(rec.manifest)
    top = Path(ws.workdir).resolve()
    rel_ws = Path(tracker.workspace).resolve().relative_to(top).as_posix()
    prefix = "" if rel_ws in ("", ".") else rel_ws + "/"

    parent = None if repo.head_is_unborn else str(repo.head.target)
    head_flat: dict[str, tuple[str, int]] = {}
    if parent is not None:
        _flatten(repo, repo[pygit2.Oid(hex=parent)].peel(pygit2.Tree), "", head_flat)

    flat: dict[str, tuple[str, int]] = {}
    gitlinks: list[str] = []
    for path, value in head_flat.items():
        if not path.startswith(prefix):
            flat[path] = value  # outside the workspace: the snapshot never saw it
            continue
        rel = path[len(prefix):]
        if value[1] == _GITLINK:
            flat[path] = value
            gitlinks.append(rel + "/")
        elif rel not in manifest.entries and (rel in manifest.skipped or tracker.rules.ignores(rel)):
            flat[path] = value  # tracked, but invisible to the capture: HEAD's version stands

    skipped: list[str] = []
    blobs = _Blobs(repo, Path(tracker.store.root) / "gitblobs.json", tracker.store.objects)
    for rel, (digest, mode, _size, target) in manifest.entries.items():
        if stat.S_ISDIR(mode):
            skipped.append(display(rel) + "/")  # an empty directory: git records none
            continue
        if _bad_component(rel) or not is_clean(rel):
            skipped.append(display(rel))
            continue
        if any(rel.startswith(g) for g in gitlinks):
            continue  # inside a submodule: its gitlink stands for it
        if stat.S_ISLNK(mode):
            flat[prefix + rel] = (blobs.link(target or ""), _LINK)
        else:
            flat[prefix + rel] = (blobs.file(digest), _EXEC if mode & 0o111 else _BLOB)
    blobs.save()
    tree = _write_tree(repo, flat)
    spec = CommitSpec(subject or f"iterion: workspace checkpoint of run {tracker.run_id}",
                      {T_RUN: tracker.run_id, T_KIND: EXPORT_KIND, T_SNAPSHOT: rec.id,
                       **({T_LABEL: rec.labels[-1]} if rec.labels else {}), **(trailers or {})},
                      tree, (parent,) if parent else ())
    commit = create_commit(repo, spec)
    return Export(commit=commit, tree=tree, parent=parent, snapshot=rec.id, skipped=sorted(skipped))
