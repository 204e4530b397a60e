"""A third ``Versioning``: recorded states held by the process, for tests that exercise the
engine's flow and do not need what git or the snapshot store add (durability across processes).

It keeps the interface's contract (tests/versioning/test_contract.py runs it beside the two real
mechanisms) with these documented limits: nothing survives the process (a run resumed by another
process has no chain), ``FilesPlan`` records no decision (a restore a killed process began is
decided anew, which converges because every step is idempotent), and ``undo_command`` is None
(the bank lives in this process; ``undo`` reaches it). A person's edit after the last boundary
is always left in place, never overwritten.

States are the workspace's captured files (git's and ``.iterionignore``'s ignore rules apply, as
for the tracker), content-addressed, in a registry keyed by (workspace, run id): reopening the
same run in the same process (a resume, a rewind) finds its chain. ``use_memory_versioning``
(tests) makes ``open_versioning`` choose this mechanism for every run shape.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gitrefs.boundary import BoundaryLabel
from gitrefs.errors import UnknownBoundary
from gitrefs.produced_scope import ChainEntry, PivotNotRecorded, ProducedScope
from gitrefs.produced_scope import produced_scope as compute_produced_scope
from gitrefs.produced_scope import recorded_paths as compute_recorded_paths
from iterion.engine.versioning import StateReader, Versioning
from iterion.engine.versioning_track import empty_scope_reason, name_left_in_place
from iterion.engine.versioning_types import (
    DIFF_TOTAL_CAP,
    MEMORY,
    FilesReport,
    MissingObject,
    OnPlanned,
    PushState,
    RestoreRequest,
    RestoreScope,
    Skipped,
    StateChange,
    UndoBank,
    UndoOutcome,
)
from workspacetrack.ignore import IgnoreRules
from workspacetrack.models import SkipReason

if TYPE_CHECKING:
    import pygit2

Files = dict[str, tuple[bool, bytes]]  # path -> (executable, content)
GUARDED = f"{SkipReason.PROTECTED}: a workflow source file"


@dataclass
class _Record:
    """One run's recorded states (shared by every ``MemoryVersioning`` opened on the run)."""

    states: dict[str, Files] = field(default_factory=dict)
    chain: list[ChainEntry] = field(default_factory=list)
    times: list[str] = field(default_factory=list)  # when each chain entry was recorded
    banks: dict[str, tuple[Files, frozenset[str]]] = field(default_factory=dict)  # id -> (disk, touched)


_RECORDS: dict[tuple[str, str], _Record] = {}
_RECORDS_LOCK = threading.Lock()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _digest(files: Files) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        exe, data = files[path]
        h.update(f"{path}\0{int(exe)}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
        h.update(data)
    return h.hexdigest()


class MemoryVersioning(Versioning):
    mechanism = MEMORY

    def __init__(self, workspace: Path, run_id: str) -> None:
        super().__init__()
        self.workspace = Path(workspace)
        self.run_id = run_id
        key = (os.path.realpath(self.workspace), run_id)
        with _RECORDS_LOCK:
            self._rec = _RECORDS.setdefault(key, _Record())

    # -- capturing ----------------------------------------------------------------------------
    def _capture(self) -> Files:
        rules = IgnoreRules(self.workspace)
        out: Files = {}
        for top, dirs, names in os.walk(self.workspace):
            rel_top = os.path.relpath(top, self.workspace)
            prefix = "" if rel_top == "." else rel_top.replace(os.sep, "/") + "/"
            dirs[:] = [d for d in dirs if not rules.ignores(prefix + d, is_dir=True)
                       and not os.path.islink(os.path.join(top, d))]
            for name in names:
                rel = prefix + name
                full = os.path.join(top, name)
                if rules.ignores(rel) or os.path.islink(full) or not os.path.isfile(full):
                    continue
                with open(full, "rb") as fh:
                    out[rel] = (os.access(full, os.X_OK), fh.read())
        return out

    def _store(self, files: Files) -> str:
        sid = _digest(files)
        self._rec.states.setdefault(sid, files)
        return sid

    def _write(self, label: BoundaryLabel) -> str:
        sid = self._store(self._capture())
        self._rec.chain.append(ChainEntry(label, sid))
        self._rec.times.append(_now())
        return sid

    def chain(self) -> list[ChainEntry]:
        return list(self._rec.chain)

    def _resolve(self, anchor: BoundaryLabel) -> str:
        for entry in reversed(self._rec.chain):
            if entry.label == anchor:
                return entry.state
        raise UnknownBoundary(f"no boundary {anchor} was recorded for run {self.run_id}")

    def changed_paths(self, a: str, b: str) -> set[str]:
        fa, fb = self._rec.states[a], self._rec.states[b]
        return {p for p in fa.keys() | fb.keys() if fa.get(p) != fb.get(p)}

    def produced_scope(self, pivot: BoundaryLabel) -> ProducedScope:
        try:
            return compute_produced_scope(self._rec.chain, pivot, self.changed_paths)
        except PivotNotRecorded as exc:
            raise UnknownBoundary(str(exc)) from None

    # -- restoring ----------------------------------------------------------------------------
    def restore(self, req: RestoreRequest, on_planned: OnPlanned | None = None) -> FilesReport:
        from iterion.engine.versioning_plan import FilesPlan

        report = FilesReport(mechanism=self.mechanism, scope=req.scope.value, anchor=str(req.anchor))
        target = self._rec.states[self._resolve(req.anchor)]
        report.ref = self._resolve(req.anchor)
        last = self._rec.states[self._rec.chain[-1].state]
        disk = self._capture()
        differs = {p for p in disk.keys() | target.keys() if disk.get(p) != target.get(p)}
        if req.scope is RestoreScope.PRODUCED:
            theirs = frozenset().union(*(paths for _, paths in req.other_runs))
            produced = set(self.produced_scope(req.anchor).paths)
            scope = differs & produced
            others = sorted(scope & theirs)
            scope -= theirs
        else:
            scope, others = differs, []
        protected = set(req.protected)
        guarded = sorted(scope & protected)
        # a person's edit after the last boundary: not the run's to revert
        edited = sorted(p for p in scope - protected if disk.get(p) != last.get(p))
        act = sorted(scope - protected - set(edited))
        report.restored = [p for p in act if p in target]
        report.removed = [p for p in act if p not in target]
        report.skipped = [Skipped(p, GUARDED) for p in guarded]
        name_left_in_place(report, sorted({*edited, *others}), list(req.other_runs))
        report.in_scope = sorted({*act, *guarded})
        if not act:
            report.skip_reason = (empty_scope_reason(req.anchor) if not scope
                                  else f"the workspace already matches {req.anchor}: nothing to restore")
            return report
        if req.dry_run:
            return report
        bank = self._store(disk)
        self._rec.banks[bank] = (disk, frozenset(act))
        report.backup_ref = bank
        if on_planned is not None:
            on_planned(FilesPlan())  # the decision lives in this process only (see module doc)
        self._apply(target, act)
        report.reverted = True
        return report

    def _apply(self, target: Files, paths: list[str]) -> None:
        for rel in paths:
            full = self.workspace / rel
            if rel in target:
                exe, data = target[rel]
                full.parent.mkdir(parents=True, exist_ok=True)
                full.write_bytes(data)
                full.chmod(0o755 if exe else 0o644)
            else:
                full.unlink(missing_ok=True)
                parent = full.parent
                while parent != self.workspace and parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
                    parent = parent.parent

    def missing_objects(self, anchor: BoundaryLabel, scope: RestoreScope, protected: list[str]) -> list[MissingObject]:
        return []  # every recorded state is held whole

    @property
    def objects_home(self) -> str:
        return "the process's memory"

    def recorded_at(self, anchor: BoundaryLabel) -> str | None:
        for entry, when in zip(reversed(self._rec.chain), reversed(self._rec.times)):
            if entry.label == anchor:
                return when
        return None

    def recorded_paths(self, after: str | None = None) -> frozenset[str]:
        when = {id(e): t for e, t in zip(self._rec.chain, self._rec.times)}

        def counts(_start: ChainEntry, end: ChainEntry) -> bool:
            return after is None or when.get(id(end), "") > after

        return compute_recorded_paths(self._rec.chain, self.changed_paths, counts=counts)

    def undo_command(self, report: FilesReport) -> str | None:
        return None  # the bank lives in this process (see module doc)

    def undo(self, bank: UndoBank, *, completing: bool = False) -> UndoOutcome:
        if bank.bank not in self._rec.banks:
            raise UnknownBoundary(f"no bank {bank.bank[:12]} in this process for run {self.run_id}")
        banked, touched = self._rec.banks[bank.bank]
        paths = sorted(set(bank.touched) & touched if bank.touched else touched)
        self._apply(banked, paths)
        return UndoOutcome([p for p in paths if p in banked], [p for p in paths if p not in banked], [])

    # -- reading and pushing ------------------------------------------------------------------
    def state_reader(self) -> StateReader:
        return self

    def changes(self, a: str, b: str) -> list[StateChange]:
        fa, fb = self._rec.states[a], self._rec.states[b]
        out = []
        for p in sorted(self.changed_paths(a, b)):
            kind = "added" if p not in fa else "deleted" if p not in fb else \
                "mode_changed" if fa[p][1] == fb[p][1] else "modified"
            out.append(StateChange(p, kind))
        return out

    def unified_diff(self, a: str, b: str) -> tuple[str, bool]:
        fa, fb = self._rec.states[a], self._rec.states[b]
        parts: list[str] = []
        total = 0
        for c in self.changes(a, b):
            old, new = fa.get(c.path, (False, b""))[1], fb.get(c.path, (False, b""))[1]
            try:
                chunk = "".join(difflib.unified_diff(
                    old.decode().splitlines(keepends=True), new.decode().splitlines(keepends=True),
                    fromfile="/dev/null" if c.kind == "added" else f"a/{c.path}",
                    tofile="/dev/null" if c.kind == "deleted" else f"b/{c.path}"))
            except UnicodeDecodeError:
                chunk = f"Binary or large file {c.path} {c.kind}\n"
            if total + len(chunk) > DIFF_TOTAL_CAP:
                return "".join(parts), True
            parts.append(chunk)
            total += len(chunk)
        return "".join(parts), False

    def push_state(self) -> PushState:
        """The head state written as a commit (objects only: no ref, index or HEAD moves)."""
        import pygit2

        repo = pygit2.Repository(str(self.push_dir()))
        sid = self._rec.chain[-1].state if self._rec.chain else self._store(self._capture())
        tree = _write_tree(repo, self._rec.states[sid])
        sig = pygit2.Signature("iterion", "iterion@localhost")
        parents = [] if repo.head_is_unborn else [repo.head.target]
        commit = repo.create_commit(None, sig, sig, f"iterion: run {self.run_id} state {sid[:12]}", tree, parents)
        return PushState(str(commit), {"snapshot": sid, "tree": str(tree)})

    def push_dir(self) -> Path:
        import pygit2

        found = pygit2.discover_repository(str(self.workspace))
        if found is None:
            from gitrefs.errors import NotARepository

            raise NotARepository(f"{self.workspace} is not inside a git checkout")
        return Path(pygit2.Repository(found).workdir or self.workspace)


def _write_tree(repo: pygit2.Repository, files: Files) -> pygit2.Oid:
    import pygit2

    root: dict[str, object] = {}
    for path, (exe, data) in files.items():
        node = root
        *dirs, name = path.split("/")
        for d in dirs:
            child = node.setdefault(d, {})
            assert isinstance(child, dict)
            node = child
        node[name] = (exe, data)

    def build(node: dict[str, object]) -> pygit2.Oid:
        tb = repo.TreeBuilder()
        for name, value in sorted(node.items()):
            if isinstance(value, dict):
                tb.insert(name, build(value), pygit2.enums.FileMode.TREE)
            else:
                exe, data = cast("tuple[bool, bytes]", value)
                mode = pygit2.enums.FileMode.BLOB_EXECUTABLE if exe else pygit2.enums.FileMode.BLOB
                tb.insert(name, repo.create_blob(data), mode)
        return tb.write()

    return build(root)


def use_memory_versioning() -> None:
    """Make ``open_versioning`` return a ``MemoryVersioning`` for every run shape (tests)."""
    from iterion.engine import versioning

    versioning.set_override(lambda workspace, run_id: MemoryVersioning(workspace, run_id))


def forget(workspace: Path, run_id: str) -> None:
    """Drop a run's recorded states (tests that reuse a workspace and run id)."""
    with _RECORDS_LOCK:
        _RECORDS.pop((os.path.realpath(workspace), run_id), None)
