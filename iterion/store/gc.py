"""`iterion gc`: reclaim what only finished or deleted runs reference.

What a run's recorded versions occupy: its in-place snapshots (``runs/<run>/track``), the
content objects of the store-wide object store (``<store>/objects``, shared by every run), its
git pin (``refs/iterion/pins/<run>``), and for worktree runs its worktree
(``<store>/worktrees/<run>``) and boundary refs (``refs/iterion/runs/<run>/...``). The run
document, its events and artifacts stay: ``inspect`` still shows a collected run.

Reported, not collected: the worktrees that stay (``kept_worktrees``): a parked, failed or
cancelled run's (a resume or rewind runs there; a finished run's is removed as it finishes,
iterion/engine/worktree.py), or a finished one kept by the options.

Collected: ``finished`` runs (no command can resume or rewind one), minus the ``--keep-last``
most recently finished, minus those finished less than ``--older-than`` ago, minus a sub-bot
child of a run that is kept anyway. Deleted runs (their directory removed) hold nothing but
objects, which the sweep finds unreferenced. Never collected: running, queued, parked
(``paused_*``), ``failed_resumable``, ``cancelled``, ``failed`` (rewindable), a run whose
document cannot be read, or a directory that is not (yet) a run.

INVARIANT - mark, then sweep, under the store's gc lock: the whole collection holds
``objects/.gc.lock`` exclusively, and every capture and restore holds it shared
(``workspacetrack.objects``), so no object is written, deduplicated against or referenced while
gc decides. Step 1 removes the collected runs' own records (idempotent: a run killed half-way
is still finished and is finished off by the next gc). Step 2 marks every object any remaining
run directory references: its snapshots' manifests, their delta bases and entries, its ignore
rules, and its stat cache's rows and manifest (rows may name objects a not-yet-committed scan
wrote). Step 3 bumps ``objects/.gc-generation`` (processes forget what they believed present)
and deletes only unmarked objects. A SIGKILL at any point therefore leaves every object a kept
run needs in place: the mark never shrinks for a kept run, and nothing is deleted before it is
complete. A kept run whose state cannot be read stops the sweep (nothing is deleted).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gitrefs.gitcli import run_git
from gitrefs.persist import UserError, atomic_write_bytes, file_lock
from gitrefs.persist.killpoint import kill_point
from iterion import durations
from iterion.store.run_doc import RunDoc, WorkspaceMode
from iterion.store.status import RunStatus
from iterion.store.store import Store
from workspacetrack.gitsource import PIN_PREFIX
from workspacetrack.models import EMPTY_DIR, Manifest
from workspacetrack.objects import GC_GENERATION, GC_LOCK
from workspacetrack.store import STATCACHE_DIR, TrackStore, shared_objects_dir

_SPACE_BEFORE_UNIT = re.compile(r"(?<=[\d.])\s+(?=[a-zµμ])")
_HEX = re.compile(r"^[0-9a-f]+$")
COLLECTED_MARK = "gc-collected"  # in runs/<run>/: this finished run's versions are gone


class GcError(UserError):
    pass


def parse_duration(text: str) -> timedelta:
    """``30s``, ``15m``, ``12h``, ``7d``, ``2w``, ``1d12h``: the one duration grammar
    (iterion/durations.py) with a unit required: for an age that decides what is deleted, a bare
    ``7`` (days? seconds?) is refused rather than guessed. Any case and a space before a unit
    (``7 D``) are tolerated, as this flag always did."""
    try:
        seconds = durations.parse_duration(_SPACE_BEFORE_UNIT.sub("", text.strip().lower()), bare_seconds=False)
    except durations.DurationError:
        raise GcError(f"--older-than {text!r} is not a duration",
                      hint="give a number with s, m, h, d or w, e.g. --older-than 7d") from None
    try:
        return timedelta(seconds=seconds)
    except OverflowError:  # past timedelta's range: older than any run can be (choose() keeps all)
        return timedelta.max


@dataclass
class CollectedRun:
    run_id: str
    name: str
    finished_at: str | None
    snapshot_bytes: int = 0
    worktree_bytes: int = 0
    refs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "finished_at": self.finished_at,
                "snapshot_bytes": self.snapshot_bytes, "worktree_bytes": self.worktree_bytes,
                "refs": self.refs}


@dataclass
class KeptWorktree:
    """A worktree iterion made that stays: its run may resume or rewind there (or gc keeps it)."""

    run_id: str
    name: str
    status: str
    path: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "status": self.status, "path": self.path,
                "bytes": self.bytes}


@dataclass
class GcReport:
    dry_run: bool
    collected: list[CollectedRun] = field(default_factory=list)
    kept_worktrees: list[KeptWorktree] = field(default_factory=list)
    kept_runs: int = 0
    objects_removed: int = 0
    object_bytes: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def freed_bytes(self) -> int:
        return self.object_bytes + sum(r.snapshot_bytes + r.worktree_bytes for r in self.collected)

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "freed_bytes": self.freed_bytes, "kept_runs": self.kept_runs,
                "objects_removed": self.objects_removed, "object_bytes": self.object_bytes,
                "runs": [r.to_json() for r in self.collected],
                "kept_worktrees": [w.to_json() for w in self.kept_worktrees], "warnings": self.warnings}


def _finished_at(doc: RunDoc) -> datetime:
    return doc.finished_at or doc.updated_at


def choose(store: Store, *, keep_last: int = 0, older_than: timedelta | None = None,
           now: datetime | None = None, docs_out: list[RunDoc] | None = None) -> tuple[list[RunDoc], int]:
    """(finished runs to collect, number of run directories whose versions are kept);
    ``docs_out``: filled with every readable run document."""
    if keep_last < 0:
        raise GcError(f"--keep-last must be >= 0, got {keep_last}")
    now = now or datetime.now(UTC)
    entries = store.list_entries()
    docs = [e for e in entries if isinstance(e, RunDoc)]
    if docs_out is not None:
        docs_out.extend(docs)
    finished = sorted((d for d in docs if d.status is RunStatus.FINISHED), key=_finished_at, reverse=True)
    candidates = [d for d in finished[keep_last:] if not (store.run_dir(d.id) / COLLECTED_MARK).exists()]
    if older_than is not None:
        try:
            cutoff = now - older_than
        except OverflowError:  # before year 1: no run finished that long ago
            cutoff = None
        candidates = [d for d in candidates if cutoff is not None and _finished_at(d) <= cutoff]
    chosen = {d.id for d in candidates if not store.is_locked(d.id)}  # a finishing process still holds it
    # a child whose parent is kept stays with it (a rewind of the parent may still look at it)
    changed = True
    while changed:
        changed = False
        for d in docs:
            if d.id not in chosen:
                for child in d.subbot_children.values():
                    if child in chosen:
                        chosen.discard(child)
                        changed = True
    out = [d for d in candidates if d.id in chosen]
    # kept: every run directory whose versions stay (not collected now, nor by an earlier gc)
    total = sum(1 for p in store.runs_dir.iterdir() if p.is_dir() and not (p / COLLECTED_MARK).exists())
    return out, total - len(out)


def collect(store: Store, *, keep_last: int = 0, older_than: timedelta | None = None,
            dry_run: bool = False, now: datetime | None = None) -> GcReport:
    """Collect (see the module docstring); ``dry_run``: the same decisions, nothing deleted."""
    objects_dir = store.root / "objects"
    report = GcReport(dry_run=dry_run)
    if not store.runs_dir.is_dir():
        return report
    with file_lock(objects_dir / GC_LOCK):
        every: list[RunDoc] = []
        runs, report.kept_runs = choose(store, keep_last=keep_last, older_than=older_than, now=now, docs_out=every)
        gone = {d.id for d in runs}
        report.kept_worktrees = _kept_worktrees(store, [d for d in every if d.id not in gone])
        for doc in runs:
            report.collected.append(_drop_run(store, doc, dry_run, report.warnings))
            if not dry_run:
                kill_point("gc")
        live = _mark(store, gone)
        removed, freed = _sweep(objects_dir, live, dry_run)
        report.objects_removed, report.object_bytes = removed, freed
    return report


# -- step 1: a collected run's own records -------------------------------------------------------

def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _drop_run(store: Store, doc: RunDoc, dry_run: bool, warnings: list[str]) -> CollectedRun:
    out = CollectedRun(doc.id, doc.name, doc.finished_at.isoformat() if doc.finished_at else None)
    track = store.track_dir(doc.id)
    trash = track.with_name(".track.gc-trash")
    out.snapshot_bytes = _tree_bytes(track) + _tree_bytes(trash)
    repo = _repo_of(doc)
    if repo is not None:
        out.refs = _run_refs(repo, doc.id)
    worktree = _own_worktree(store, doc)  # a worktree iterion did not create under its store is never removed
    if worktree is not None and worktree.exists():
        out.worktree_bytes = _tree_bytes(worktree)
    if dry_run:
        return out
    if repo is not None and out.refs:
        _delete_refs(repo, out.refs, warnings)
    if worktree is not None and worktree.exists():
        remove_worktree(worktree, warnings)
    if track.exists():
        shutil.rmtree(trash, ignore_errors=True)
        os.rename(track, trash)  # one step: the run stops having snapshots at once
    shutil.rmtree(trash, ignore_errors=True)
    atomic_write_bytes(store.run_dir(doc.id) / COLLECTED_MARK, b"")  # last: a killed drop is redone
    return out


def _own_worktree(store: Store, doc: RunDoc) -> Path | None:
    """The run's worktree if iterion made it under this store (never any other directory)."""
    wt = doc.worktree.path if doc.worktree is not None else None
    if not wt or not Path(wt).resolve().is_relative_to((store.root / "worktrees").resolve()):
        return None
    return Path(wt)


def _kept_worktrees(store: Store, docs: list[RunDoc]) -> list[KeptWorktree]:
    """The worktrees that stay (a finished run's is removed when it finishes: one left here is
    kept by --keep-last/--older-than, or its removal failed), with their size."""
    out = []
    for doc in docs:
        path = _own_worktree(store, doc)
        if path is not None and path.is_dir():
            out.append(KeptWorktree(doc.id, doc.name, doc.status.value, str(path), _tree_bytes(path)))
    return out


def _git(cwd: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    proc = run_git(cwd, args, check=False, input_bytes=stdin.encode() if stdin is not None else None)
    return (proc.returncode, proc.stdout.decode("utf-8", "surrogateescape").strip(),
            proc.stderr.decode("utf-8", "replace").strip())


def _repo_of(doc: RunDoc) -> Path | None:
    """The common git directory holding the run's refs: its workspace's (in place) or its worktree's."""
    where: str | None = (doc.worktree.path if doc.workspace_mode is WorkspaceMode.WORKTREE and doc.worktree
                         else doc.workspace_dir)
    if where and not Path(where).is_dir() and doc.workspace_mode is WorkspaceMode.WORKTREE:
        where = doc.options.get("repo_dir")  # released or never created: the checkout it was added to
    if not where or not Path(where).is_dir():
        return None
    code, out, _ = _git(Path(where), "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(out) if code == 0 and out else None


def _run_refs(git_dir: Path, run_id: str) -> list[str]:
    code, out, _ = _git(git_dir, "for-each-ref", "--format=%(refname)", f"refs/iterion/runs/{run_id}/",
                        f"{PIN_PREFIX}{run_id}")
    return [r for r in out.splitlines() if r] if code == 0 else []


def _delete_refs(git_dir: Path, refs: list[str], warnings: list[str]) -> None:
    code, _, err = _git(git_dir, "update-ref", "--stdin", stdin="".join(f"delete {r}\n" for r in refs))
    if code != 0:
        warnings.append(f"could not delete refs in {git_dir}: {err}")


def remove_worktree(path: Path, warnings: list[str]) -> None:
    """``git worktree remove`` (registration and checkout), else the directory; pruned after."""
    code, common, _ = _git(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if code == 0:
        rc, _, err = _git(Path(common), "worktree", "remove", "--force", "--force", str(path))
        if rc != 0 and path.exists():
            warnings.append(f"git worktree remove {path}: {err}")
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    if code == 0:
        _git(Path(common), "worktree", "prune")


# -- step 2: mark ---------------------------------------------------------------------------------

def _mark(store: Store, gone: set[str]) -> set[str]:
    live: set[str] = set()
    for run_dir in sorted(store.runs_dir.iterdir()):
        if not run_dir.is_dir() or run_dir.name in gone:
            continue
        track = run_dir / "track"
        if not track.is_dir():
            continue
        try:
            ts = TrackStore(track, run_dir.name)
        except ValueError:
            continue  # not a run directory name: nothing of ours
        if shared_objects_dir(track, run_dir.name) != store.root / "objects":
            continue
        _mark_run(ts, live)
    return live


def _mark_run(ts: TrackStore, live: set[str]) -> None:
    try:
        state = ts.load_state()
    except Exception as exc:  # noqa: BLE001 - any unreadable state stops the sweep
        raise GcError(f"cannot read the snapshots of run {ts.run_id}: {exc}",
                      hint="nothing was deleted; inspect or remove that run, then run gc again") from None
    seen: set[str] = set()
    if state is not None:
        if state.ignore_rules:
            live.add(state.ignore_rules)
        for rec in state.snapshots.values():
            _mark_manifest(ts, rec.manifest, live, seen)
    cache = ts.load_cache()  # unreadable: a cold cache, nothing it names is ever trusted
    if cache.manifest:
        _mark_manifest(ts, cache.manifest, live, seen, required=False)
    for row in cache.rows.values():
        h = row[1]
        if h and h[0] != "!" and h != EMPTY_DIR:
            live.add(h)


def _mark_manifest(ts: TrackStore, digest: str, live: set[str], seen: set[str], *, required: bool = True) -> None:
    while digest and digest not in seen:
        seen.add(digest)
        live.add(digest)
        try:
            raw = Manifest.model_validate_json(ts.objects.read(digest))
        except Exception as exc:  # noqa: BLE001
            if not required or not ts.objects.has(digest):
                return  # already gone: it protects nothing any more
            raise GcError(f"run {ts.run_id}: manifest {digest} is unreadable ({exc})",
                          hint="nothing was deleted; repair or remove that run, then run gc again") from None
        for e in raw.entries.values():
            if e[0] != EMPTY_DIR:
                live.add(e[0])
        digest = raw.base or ""


# -- step 3: sweep --------------------------------------------------------------------------------

def _sweep(objects_dir: Path, live: set[str], dry_run: bool) -> tuple[int, int]:
    if not objects_dir.is_dir():
        return 0, 0
    doomed: list[tuple[Path, int]] = []
    for sub in sorted(objects_dir.iterdir()):
        if sub.name == STATCACHE_DIR and sub.is_dir():
            # stat caches shared by content: an entry no run's statcache.json links any more
            for f in sub.iterdir():
                st = f.lstat()
                if st.st_nlink <= 1:
                    doomed.append((f, st.st_size))
            continue
        if len(sub.name) != 2 or not sub.is_dir():
            if sub.name.startswith(".") and sub.name.endswith(".tmp"):  # a killed writer's stream file
                doomed.append((sub, sub.stat().st_size))
            continue
        for f in sub.iterdir():
            name = sub.name + f.name
            if f.name.startswith("."):
                doomed.append((f, f.stat().st_size))  # a temp file (no writer runs under the lock)
            elif _HEX.match(name) and name not in live:
                doomed.append((f, f.stat().st_size))
    freed = sum(size for _, size in doomed)
    if dry_run or not doomed:
        return len(doomed), freed
    # before the first deletion: every process must stop trusting what it knew of the store
    atomic_write_bytes(objects_dir / GC_GENERATION, os.urandom(8).hex().encode())
    for path, _ in doomed:
        path.unlink(missing_ok=True)
        kill_point("gc")  # test-only: a SIGKILL between any two deletions
    return len(doomed), freed
