"""The facade the engine calls: capture boundaries, list them, diff them, scope and restore."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from gitrefs.boundary import BoundaryLabel
from gitrefs.produced_scope import ChainEntry, PivotNotRecorded, ProducedScope
from gitrefs.produced_scope import produced_scope as compute_produced_scope
from gitrefs.produced_scope import recorded_paths as compute_recorded_paths
from workspacetrack.bigfiles import DEFAULT_SIZE_CAP, size_cap_from_env
from workspacetrack.capture import MAX_DELTA_DEPTH, Capturer, CaptureStats
from workspacetrack.changes import Change, changed_paths, diff_manifests
from workspacetrack.drift import GitDrift, status_enabled
from workspacetrack.errors import StoreLayoutError, TrackError, UnknownSnapshotError
from workspacetrack.gitsource import GitSource, git_reuse_enabled
from workspacetrack.ignore import IgnoreRules
from workspacetrack.journal import Journal
from workspacetrack.models import (
    CacheRow,
    ChainLink,
    Entry,
    Manifest,
    RunState,
    SnapshotRecord,
    StateLogRecord,
)
from workspacetrack.names import mapping_from_wire, mapping_to_wire, to_wire
from workspacetrack.objects import digest_of
from workspacetrack.restore import (
    MissingObjectsError,
    PlannedRestore,
    RestoreReport,
    Scope,
    apply_planned,
    apply_restore,
    missing_objects,
    plan_restore,
    unreadable_objects,
)
from workspacetrack.store import TrackStore
from workspacetrack.walk import Scan

__all__ = ["DEFAULT_SIZE_CAP", "Tracker"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _ignored_inside(ws: Path, store: Path) -> bool:
    """A store inside the workspace is accepted only when the workspace's own ignore rules
    exclude it (iterion's default store lives in ``.git/``, which no capture enters; a ``.iterion/``
    store iterion created outside any repository carries a ``*`` .gitignore), so no capture or
    journal can ever version it. [engine addition: in-place runs with the default store]"""
    rules = IgnoreRules(ws)
    parts = store.relative_to(ws).parts
    return any(rules.ignores("/".join(parts[:i]), is_dir=True) for i in range(1, len(parts) + 1))


def _check_layout(store_dir: Path, workspace: Path) -> tuple[Path, Path]:
    ws = workspace.resolve()
    if not ws.is_dir():
        raise StoreLayoutError(f"workspace {workspace} is not a directory")
    store = store_dir.resolve()
    if store == ws or (store.is_relative_to(ws) and not _ignored_inside(ws, store)):
        raise StoreLayoutError(
            f"store {store_dir} is inside the workspace {workspace}",
            hint="keep the store beside the run's other durable state, outside the checkout "
                 "(a capture would otherwise version its own store)")
    if ws.is_relative_to(store):
        raise StoreLayoutError(f"workspace {workspace} is inside the store {store_dir}")
    if store.exists() and not store.is_dir():
        raise StoreLayoutError(f"store {store_dir} exists and is not a directory")
    store.mkdir(parents=True, exist_ok=True)
    return store, ws


class Tracker:
    """Versions one in-place run's workspace in a store outside it."""

    def __init__(self, store_dir: Path | str, workspace: Path | str, run_id: str, *,
                 size_cap: int | None = None, scratch: Path | None = None) -> None:
        """``scratch``: read the store, write nothing to it (``TrackStore``: a dry run)."""
        if size_cap is None:
            size_cap = size_cap_from_env()
        if size_cap < 0:
            raise TrackError(f"size cap must be >= 0, got {size_cap}")
        store, ws = _check_layout(Path(store_dir), Path(workspace))
        self.workspace = ws
        self.run_id = run_id
        self.size_cap = size_cap
        try:
            self.store = TrackStore(store, run_id, scratch=scratch)
        except ValueError as exc:
            raise TrackError(str(exc)) from None
        self.store.objects.attach_git(lambda: GitSource.open(ws, run_id) if git_reuse_enabled() else None)
        self.rules = IgnoreRules(ws)
        self.journal = Journal(str(ws))
        self._capturer = Capturer(self.store, ws, self.rules, self.journal, size_cap)
        self.last_capture: CaptureStats | None = None
        # how the last restore (or preview) learnt the disk state: "walk" (the capture's scan:
        # the journal's when it covers, else a full stat walk) or "git status" (drift.py)
        self.restore_mode: str | None = None
        # paths the last capture skipped that the previous head had not skipped (path -> reason)
        self.newly_skipped: dict[str, str] = {}
        self._label_index: tuple[dict[str, list[str]], RunState | None, int] = ({}, None, 0)
        state = self.store.load_state()
        if state is not None and Path(state.workspace) != ws:
            raise StoreLayoutError(f"run {run_id} versions workspace {state.workspace}, not {ws}",
                                   hint="pass the run's own --workspace, or another --run-id")
        if state is not None and state.ignore_rules is not None:
            self._freeze_rules(state.ignore_rules)

    def _choose_ids(self, state: RunState) -> None:
        """The content-id kind of this run: that of its recorded head (a run never switches:
        equal content must keep equal ids), else git blob ids when the workspace is in a git
        repository (``workspacetrack.gitsource``), else blake3."""
        if state.head is not None:
            kind = self.store.manifest_ids(self.store.snapshot(state, state.head).manifest)
        else:
            kind = "git" if self.store.objects.git is not None else "blake3"
        self.store.objects.ids = kind

    # -- the ignore rules in force: those of the run's first capture ------------------------
    def _freeze_rules(self, digest: str) -> None:
        raw = json.loads(self.store.objects.read(digest))
        self.rules.freeze(mapping_from_wire(raw))

    def _record_rules(self) -> str:
        """After the run's first capture: store the rule texts it read and freeze them, so a
        node that adds or edits ignore rules cannot shrink what this run can restore. Returns
        the object id the state records."""
        texts = self.rules.recorded()
        data = json.dumps(mapping_to_wire(texts), sort_keys=True).encode("utf-8")
        digest = self.store.objects.put(data, digest_of(data))
        self.rules.freeze(texts, just_read=True)
        self._capturer.rules_frozen()
        return digest

    # -- watching ---------------------------------------------------------------------------
    def start_watching(self) -> None:
        """Journal changes from now on; the next capture walks once, later ones read the journal."""
        self.journal.start()

    def stop_watching(self) -> None:
        if self.journal.active:
            with self.store.locked():
                self._capturer.save_cache(force=True)
        self.journal.stop()
        self._capturer.forget_baseline()

    def close(self) -> None:
        self.stop_watching()

    # -- capture ----------------------------------------------------------------------------
    def _state(self) -> RunState:
        """The run's state, as the store caches it: read it, never mutate it (``_commit``)."""
        return self.store.load_state() or RunState(run_id=self.run_id, workspace=str(self.workspace))

    def _commit(self, rec: StateLogRecord) -> RunState:
        return self.store.commit(rec, str(self.workspace))

    def capture(self, label: BoundaryLabel) -> SnapshotRecord:
        """Record a boundary. ``pre`` aliases the run's head (no walk) once the run has one."""
        self.newly_skipped = {}
        with self.store.locked():
            state = self._state()
            text = str(label)
            if label.kind.is_alias and state.head is not None:
                state = self._commit(StateLogRecord(link=_link(text, state.head)))
                assert state.head is not None
                head = self.store.snapshot(state, state.head)
                self.last_capture = CaptureStats("alias", 0, 0, True)
                return self._with_labels(head, state)
            first = state.head is None and state.ignore_rules is None
            self._choose_ids(state)
            if first:
                self.rules.record()
            previous = self.store.snapshot(state, state.head).manifest if state.head else None
            rec, rules = self._record(state, kind="boundary", label=text, record_rules=first)
            if previous is not None:
                rec.changed = self._capturer.changed_since(previous, rec.manifest)
            self.newly_skipped = self._newly_skipped(previous, rec.manifest)
            state = self._commit(StateLogRecord(snapshot=rec, link=_link(text, rec.id), head=rec.id,
                                                ignore_rules=rules))
            self._capturer.save_cache()
            return self._with_labels(rec, state)

    def _newly_skipped(self, previous: str | None, current: str) -> dict[str, str]:
        if previous == current:
            return {}
        now = self.store.read_manifest(current).skipped
        if not now:
            return {}
        before = self.store.read_manifest(previous).skipped if previous else {}
        return {p: r for p, r in now.items() if before.get(p) != r}

    def _record(self, state: RunState, *, kind: Literal["boundary", "bank"], label: str,
                touched: list[str] | None = None, manifest: str | None = None,
                record_rules: bool = False) -> tuple[SnapshotRecord, str | None]:
        """Capture (unless ``manifest`` is given) and durably write a snapshot's objects; the
        caller commits it. Returns it and the ignore rules' object id when ``record_rules``."""
        rules: str | None = None
        if manifest is None:
            manifest, stats = self._capturer.scan()
            self.last_capture = stats
            mode: str = stats.mode
            if record_rules:
                rules = self._record_rules()
        else:
            mode = "given"
        rec = SnapshotRecord(id=secrets.token_hex(16), run_id=self.run_id, kind=kind,
                             parent=state.head, labels=[label], created_at=_now(), manifest=manifest,
                             capture_mode=mode, touched=touched or [])
        self.store.objects.flush()  # objects and manifest durable before the state names them
        return rec, rules

    # -- reading ----------------------------------------------------------------------------
    def snapshots(self) -> list[SnapshotRecord]:
        """Chain snapshots, oldest first, each with every label that points at it."""
        state = self._state()
        seen: list[str] = []
        for link in state.chain:
            if link.snapshot not in seen:
                seen.append(link.snapshot)
        return [self._with_labels(self.store.snapshot(state, s), state) for s in seen]

    def banks(self) -> list[SnapshotRecord]:
        state = self._state()
        return [self.store.snapshot(state, b) for b in state.banks]

    def chain_entries(self, state: RunState | None = None) -> list[ChainEntry]:
        state = state or self._state()
        return [ChainEntry(BoundaryLabel.parse(link.label), link.snapshot) for link in state.chain]

    def resolve(self, ref: str) -> SnapshotRecord:
        """A snapshot by id, unique id prefix (>= 6 chars), boundary label, or bank label."""
        state = self._state()
        if ref in state.labels:
            return self.store.snapshot(state, state.labels[ref])
        ids = {link.snapshot for link in state.chain} | set(state.banks)
        if ref in ids:
            return self.store.snapshot(state, ref)
        for b in state.banks:
            rec = self.store.snapshot(state, b)
            if ref in rec.labels:
                return rec
        matches = [i for i in ids if len(ref) >= 6 and i.startswith(ref)]
        if len(matches) == 1:
            return self.store.snapshot(state, matches[0])
        if len(matches) > 1:
            raise UnknownSnapshotError(f"snapshot prefix {ref!r} is ambiguous in run {self.run_id}")
        raise UnknownSnapshotError(f"run {self.run_id} recorded no snapshot or label {ref!r}",
                                   hint="list them with: iterion track list")

    def manifest(self, ref: str) -> Manifest:
        return self.store.read_manifest(self.resolve(ref).manifest)

    def changes(self, a: str, b: str) -> list[Change]:
        """Added/modified/deleted/mode changes from snapshot ``a`` to ``b`` (ids or labels)."""
        ma, mb = self.resolve(a).manifest, self.resolve(b).manifest
        if ma == mb:
            return []
        return diff_manifests(self.store.read_manifest(ma), self.store.read_manifest(mb))

    def read_object(self, digest: str) -> bytes:
        return self.store.objects.read(digest)

    # -- scope and restore ------------------------------------------------------------------
    def _changed_fn(self, state: RunState) -> Callable[[str, str], set[str]]:
        """Paths changed between two snapshots of the chain: from the later one's recorded
        ``changed`` when it was captured right on top of the earlier one (no manifest read, so a
        produced scope costs what the run changed), else by diffing the two manifests."""

        def changed(a: str, b: str) -> set[str]:
            ra, rb = self.store.snapshot(state, a), self.store.snapshot(state, b)
            if ra.manifest == rb.manifest:
                return set()
            if rb.parent == a and rb.changed is not None:
                return set(rb.changed)
            return changed_paths(self.store.read_manifest(ra.manifest), self.store.read_manifest(rb.manifest))

        return changed

    def produced_scope(self, pivot: BoundaryLabel, state: RunState | None = None) -> ProducedScope:
        state = state or self._state()

        changed = self._changed_fn(state)
        try:
            return compute_produced_scope(self.chain_entries(state), pivot, changed)
        except PivotNotRecorded as exc:
            raise UnknownSnapshotError(str(exc), hint="list the run's boundaries with: iterion track list") from None

    def recorded_paths(self, after: str | None = None) -> frozenset[str]:
        """Paths this run changed in its own recorded intervals (``gitrefs.produced_scope``'s
        rule over the whole chain); with ``after`` (an ISO time), only intervals whose closing
        boundary was captured after it."""
        state = self._state()

        changed = self._changed_fn(state)

        def counts(_start: ChainEntry, end: ChainEntry) -> bool:
            return after is None or self.store.snapshot(state, end.state).created_at > after

        return compute_recorded_paths(self.chain_entries(state), changed, counts=counts)

    def restore(self, pivot: BoundaryLabel, scope: Scope | str = "produced",
                protected: Iterable[str] = (), exclude: Iterable[str] = ()) -> RestoreReport:
        """Put the workspace back to ``pivot`` for the paths ``scope`` selects; bank first.

        ``exclude``: paths taken out of a ``produced`` scope (another run's work: left in place)."""
        with self.store.locked():
            planned = self._prepare_locked(pivot, Scope(scope), protected, exclude)
            return apply_planned(self.workspace, self.store.objects, planned)

    def preview_restore(self, pivot: BoundaryLabel, scope: Scope | str = "produced",
                        protected: Iterable[str] = (), exclude: Iterable[str] = ()) -> RestoreReport:
        """What ``restore`` would do now, as its report, writing nothing to the workspace: the
        same plan against the disk captured as the restore captures it (the scan may add
        unreferenced objects to the track store and refresh its cache; no bank is taken), walked
        by the restore's own writer in dry-run mode, so it names exactly what the restore would
        restore, remove, skip, overwrite and leave in place. Refuses as ``restore`` refuses."""
        with self.store.locked():
            planned = self._prepare_locked(pivot, Scope(scope), protected, exclude, bank=False)
            report = apply_restore(self.workspace, self.store.objects, planned.plan(), pivot=planned.pivot,
                                   bank=None, dry_run=True)
            return report

    def missing_for_restore(self, pivot: BoundaryLabel, scope: Scope | str = "produced",
                            protected: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(path, object id) of every object a restore to ``pivot`` may read and the store lacks.

        Reads only: checked before a restore scans the disk or banks anything."""
        scope = Scope(scope)
        if scope is Scope.NONE:
            return []
        with self.store.locked():
            state = self._state()
            pivot_id = self._pivot_id(state, pivot)
            digest = self.store.snapshot(state, pivot_id).manifest
            paths = set(self.produced_scope(pivot, state).paths)
            if scope is Scope.FULL:
                target = self.store.read_manifest_once(digest)
                paths |= set(target.entries)
            else:  # the scope's entries alone: the check costs what the run changed, not the tree
                target, _ = self.store.read_manifest_paths(digest, paths)
            guarded = self._relative(protected)
            return missing_objects(self.store.objects, target,
                                   (p for p in paths if not any(p == g or p.startswith(g + "/") for g in guarded)))

    def prepare_restore(self, pivot: BoundaryLabel, scope: Scope | str = "produced",
                        protected: Iterable[str] = (), exclude: Iterable[str] = ()) -> PlannedRestore:
        """Plan a restore to ``pivot`` and bank the disk state it will change; write nothing.

        Refuses (MissingObjectsError) before banking when an object a write needs is missing
        or corrupt. The result is what ``apply_prepared`` applies, again if need be."""
        with self.store.locked():
            return self._prepare_locked(pivot, Scope(scope), protected, exclude)

    def apply_prepared(self, planned: PlannedRestore, *, completing: bool = False) -> RestoreReport:
        """Apply a plan ``prepare_restore`` made (``completing``: a killed apply may have begun it)."""
        with self.store.locked():
            return apply_planned(self.workspace, self.store.objects, planned, completing=completing)

    def _pivot_id(self, state: RunState, pivot: BoundaryLabel) -> str:
        if state.head is None:
            raise UnknownSnapshotError(f"run {self.run_id} has recorded nothing to restore")
        pivot_id = state.labels.get(str(pivot))
        if pivot_id is None:
            raise UnknownSnapshotError(f"no boundary {pivot} was recorded for run {self.run_id}",
                                       hint="list the run's boundaries with: iterion track list")
        return pivot_id

    def _prepare_locked(self, pivot: BoundaryLabel, scope: Scope, protected: Iterable[str],
                        exclude: Iterable[str] = (), *, bank: bool = True) -> PlannedRestore:
        state = self._state()
        pivot_id = self._pivot_id(state, pivot)
        # In a new process, a walk from the previous one's directory fingerprints (the warm
        # start) when the stat cache has them, else git's status, tells what changed since the
        # last boundary without examining the tree; failing both, one stat walk.
        self._choose_ids(state)  # (the stat cache holds ids of the run's kind)
        warm = scope is not Scope.FULL and not self.journal.active and self._capturer.can_warm()
        drift = None if warm else self._start_drift(state, scope)  # runs while the scope is worked out
        try:
            produced = self.produced_scope(pivot, state)
            pivot_digest = self.store.snapshot(state, pivot_id).manifest
            last_digest = self.store.snapshot(state, state.head or pivot_id).manifest
            last_total: int | None = None
            covered: set[str] | None = None
            if warm:
                # the scope's entries alone: what changed since comes from the warm walk
                pivot_m, _ = self.store.read_manifest_paths(pivot_digest, produced.paths)
                last_m, _ = self.store.read_manifest_paths(last_digest, produced.paths)
                covered = set(produced.paths)
            elif drift is not None and drift.reported() is not None:
                # git named what may have changed: the two states are read for those paths, the
                # stat cache's rows and the scope alone (issue 30 point 4: planning follows the
                # scope, not the tree); a walk, if git's answer is refused, reads them in full
                covered = set(produced.paths) | (drift.reported() or set()) | set(drift.doc.rows)
                covered |= {d for p in list(covered) for d in _parents(p)}
                pivot_m, _ = self.store.read_manifest_paths(pivot_digest, produced.paths)
                last_m, last_total = self.store.read_manifest_paths(last_digest, covered)
            else:
                # read once, by path: parsed without validating 100,000 tuples (entries are lists)
                pivot_m = self.store.read_manifest_once(pivot_digest)
                last_m = self.store.read_manifest_once(last_digest)
            # another run's work is taken out of a produced scope and named as left in place
            kept = produced.paths & frozenset(exclude) if scope is Scope.PRODUCED else frozenset()
            planned = self._prepare_to(state, pivot_m, last_m, scope, produced.paths - kept, protected,
                                       label=f"rewind:{pivot.node}:{len(state.banks)}", pivot=str(pivot),
                                       bank=bank, drift=drift, last_digest=last_digest,
                                       partial=(pivot_digest, covered, last_total) if covered is not None else None,
                                       warm=warm)
        finally:
            if drift is not None:
                drift.close()
        planned.left_in_place = sorted(set(planned.left_in_place) | {to_wire(p) for p in kept})  # wire form
        return planned

    def _start_drift(self, state: RunState, scope: Scope) -> GitDrift | None:
        """Ask git what changed since the last boundary (``workspacetrack.drift``) when that
        can replace the bank's full walk: a produced (or none) scope, in a process whose journal
        does not cover the time since that boundary, of a git-ids run whose stat cache was saved
        against git's index. None: the restore walks, as before."""
        if scope is Scope.FULL or self.journal.active or state.head is None or not status_enabled():
            return None
        self._choose_ids(state)
        git = self.store.objects.git if self.store.objects.ids == "git" else None
        if git is None:
            return None
        doc = self.store.load_cache()
        if doc.index is None or doc.ids != "git" or doc.size_cap != self.size_cap or doc.manifest is None:
            return None
        return GitDrift(git, doc)

    def _examine(self, last_digest: str, last: Manifest, paths: set[str],
                 rows: dict[str, CacheRow],
                 partial: tuple[set[str], int | None] | None = None) -> tuple[str, Manifest, set[str]]:
        """The disk state now, as a capture would record it, when only ``paths`` may differ from
        ``last``: each of them examined as the journal's capture examines a path it names
        (``Scan.rescan``; a directory is walked), everything else as ``last`` recorded it.
        Stored as a delta on ``last`` (its cost follows ``paths``, not the tree).

        Returns its digest, the PARTIAL state ``plan_restore`` reads when it is given the
        drifted paths (the entries of every examined path, every skipped path), and the paths
        whose state differs from ``last`` (``changed_paths`` of the two full states).

        ``partial``: ``last`` holds the entries of these paths alone, and its full state has
        this many entries (``TrackStore.read_manifest_paths``); read again for any path looked
        at beyond them (a directory git reported, walked), and in full for a full manifest."""
        try:
            st = os.stat(self.store.root)
            store_id: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            store_id = None
        # a few paths: read them rather than parse git's whole index for them
        scan = Scan(str(self.workspace), self.rules, self.store.objects, self.size_cap, rows, store_id,
                    use_index=False)
        for p in sorted(paths):
            scan.rescan(p)
        # a directory whose last entry went (or that gained its first) changes its empty-dir row
        parents = {p.rpartition("/")[0] for p in paths} - {""}
        for d in sorted(parents):
            scan.note_if_empty_dir(d)
        self.store.objects.seal()  # git blobs referenced are pinned before anything names them
        found = scan.found_rows()
        looked = paths | parents | found.keys() | scan.extra_skipped.keys()
        n_last = len(last.entries)
        if partial is not None:
            covered, total = partial
            if not looked <= covered:
                last, total = self.store.read_manifest_paths(last_digest, covered | looked)
            n_last = len(last.entries) if total is None else total
        entries: dict[str, Entry] = {}
        skipped = {p: r for p, r in last.skipped.items() if p not in looked}
        for p, (key, h, _trusted, target) in found.items():
            if h[0] == "!":
                skipped[p] = h[1:]
            else:
                entries[p] = (h, key[4], key[0], target)
        for p, reason in scan.extra_skipped.items():
            entries.pop(p, None)
            skipped[p] = reason
        d_entries: dict[str, Entry] = {}
        d_skipped: dict[str, str] = {}
        removed: list[str] = []
        drifted: set[str] = set()
        for p in looked:
            e, r, was_r = entries.get(p), skipped.get(p), last.skipped.get(p)
            was = last.entries.get(p)
            was_e: Entry | None = None if was is None else (was[0], was[1], was[2], was[3])  # a list when read once
            if e is not None:
                if e != was_e or was_r is not None:
                    d_entries[p] = e
            elif r is not None:
                if r != was_r or was_e is not None:
                    d_skipped[p] = r
            elif was_e is not None or was_r is not None:
                removed.append(p)
            same = (e is None and was_e is None) or (e is not None and was_e is not None and e[:2] == was_e[:2])
            if not same or r != was_r:
                drifted.add(p)  # changed_paths' rule: content and mode, or the skip reason
        ids = self.store.objects.ids
        current = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries,
                                           skipped=skipped, removed=[], ids=ids)
        n_changes = len(d_entries) + len(d_skipped) + len(removed)
        if n_changes == 0:
            return last_digest, current, drifted
        depth = self.store.depth_of(last_digest)
        if depth >= MAX_DELTA_DEPTH or n_changes > n_last // 8 + 64:
            if partial is not None:
                last = self.store.read_manifest_once(last_digest)
            full = {p: (e[0], e[1], e[2], e[3]) for p, e in last.entries.items() if p not in looked}
            full.update(entries)
            return self.store.put_manifest(full, skipped), current, drifted
        # (the full state is not held here: a reader of the bank applies the delta)
        return self.store.put_delta(last_digest, depth, d_entries, d_skipped, removed, None), current, drifted

    def undo(self, bank: str, protected: Iterable[str] = (), paths: Iterable[str] | None = None) -> RestoreReport:
        """Put back what the restore that took ``bank`` changed, as it was when banked; only
        ``paths`` of it when given (each must be one that restore changed)."""
        with self.store.locked():
            state = self._state()
            rec = self.resolve(bank)
            if rec.kind != "bank":
                raise TrackError(f"{bank} is not a bank snapshot (banks are taken by restore)")
            touched = frozenset(rec.touched)
            if paths is not None:
                wanted = {p.strip("/") for p in paths}
                foreign = sorted(wanted - touched)
                if foreign:
                    raise TrackError(f"the restore that took bank {rec.id[:12]} did not change "
                                     f"{', '.join(foreign[:5])}: nothing of it to undo there",
                                     hint="list what it changed with: iterion track list")
                touched = frozenset(wanted)
            bank_m = self.store.read_manifest(rec.manifest)
            planned = self._prepare_to(state, bank_m, None, Scope.PRODUCED, touched,
                                       protected, label=f"undo:{rec.id[:12]}", pivot=rec.id)
            return apply_planned(self.workspace, self.store.objects, planned)

    def _prepare_to(self, state: RunState, target: Manifest, last: Manifest | None, scope: Scope,
                    produced: frozenset[str], protected: Iterable[str], *, label: str,
                    pivot: str, bank: bool = True, drift: GitDrift | None = None,
                    last_digest: str | None = None,
                    partial: tuple[str, set[str], int | None] | None = None,
                    warm: bool = False) -> PlannedRestore:
        """``partial``: ``target`` and ``last`` hold the entries of some paths alone
        (``TrackStore.read_manifest_paths``): (the target's digest, the paths ``last`` was read
        for, its full number of entries); each is read in full where a step needs all of it."""
        # The bank IS the current disk state: capturing it first gives both the undo point and
        # the evidence (what changed since the last boundary) the report needs. With the journal
        # running (this process captured the last boundary) that costs what changed since; in
        # a new process, git's status names what may have changed (``workspacetrack.drift``)
        # and only those paths and the scope's are examined; failing that, one stat walk
        # against the stat cache (no re-hashing): the report's ``left_in_place`` is about the
        # whole tree.
        self._choose_ids(state)
        maybe = drifted = None
        if drift is not None and last is not None and last_digest is not None:
            maybe = drift.candidates(last_digest, last, self.rules, self.workspace,
                                     total=partial[2] if partial is not None else None)
        if warm and last is not None and last_digest is not None:
            manifest, stats = self._capturer.scan()
            self.last_capture = stats
            self.restore_mode = "warm walk"
            since = [] if manifest == last_digest else self._capturer.changed_since(last_digest, manifest)
            if since is not None and partial is not None:
                # the disk is the last boundary's state but for ``since``: the plan reads the
                # scope's paths and those alone
                drifted = set(since)
                current = last if not drifted else \
                    self.store.read_manifest_paths(manifest, set(produced) | drifted)[0]
            else:  # (what changed is not known without comparing whole states)
                current = self.store.read_manifest(manifest)
                if partial is not None:
                    target, last = self.store.read_manifest_once(partial[0]), self.store.read_manifest_once(last_digest)
                    partial = None
        elif drift is not None and maybe is not None and last is not None and last_digest is not None:
            in_scope = set(produced) if scope is Scope.PRODUCED else set()
            manifest, current, drifted = self._examine(last_digest, last, maybe | in_scope, drift.doc.rows,
                                                       partial[1:] if partial is not None else None)
            self.restore_mode = "git status"
        else:
            self.restore_mode = "walk" if drift is None or drift.refused is None else f"walk ({drift.refused})"
            manifest, stats = self._capturer.scan()
            self.last_capture = stats
            current = self.store.read_manifest(manifest)
            if partial is not None and last_digest is not None:  # the walk compares whole states
                target, last = self.store.read_manifest_once(partial[0]), self.store.read_manifest_once(last_digest)
                partial = None
        target_full = None
        if partial is not None:
            target_digest = partial[0]

            def target_full() -> Manifest:
                return self.store.read_manifest_once(target_digest)

        plan = plan_restore(self.workspace, self.rules, target, last, current, scope, produced,
                            self._relative(protected), drifted, target_full=target_full)
        bad = unreadable_objects(self.store.objects, plan)
        if bad:
            raise MissingObjectsError(bad)  # before the bank: nothing recorded, nothing written
        bank_id: str | None = None
        if plan.actions and bank:
            rec, _ = self._record(state, kind="bank", label=label, manifest=manifest,
                                  touched=sorted(a.path for a in plan.actions))
            self._commit(StateLogRecord(snapshot=rec, bank=rec.id))
            bank_id = rec.id
        self._capturer.save_cache()
        return PlannedRestore.of(plan, pivot=pivot, bank=bank_id)

    def _relative(self, paths: Iterable[str]) -> set[str]:
        """Protected paths as workspace-relative strings (absolute ones must lie inside it)."""
        out: set[str] = set()
        for p in paths:
            path = Path(p)
            if path.is_absolute():
                try:
                    path = path.resolve().relative_to(self.workspace)
                except ValueError:
                    continue  # outside the workspace: nothing there is ever written anyway
            text = path.as_posix().strip("/")
            if text and text != ".":
                out.add(text)
        return out

    def _with_labels(self, rec: SnapshotRecord, state: RunState) -> SnapshotRecord:
        labels = self._labels_of(state).get(rec.id)
        return rec.model_copy(update={"labels": list(labels) if labels else rec.labels})

    def _labels_of(self, state: RunState) -> dict[str, list[str]]:
        """snapshot id -> the labels of the chain links to it, in chain order. Kept across
        calls and extended by the links appended since (the chain of one loaded state only
        grows), so a boundary does not scan the whole chain: the per-node cost stays flat."""
        index, seen, folded = self._label_index
        if seen is not state or folded > len(state.chain):
            index, folded = {}, 0
        for link in state.chain[folded:]:
            index.setdefault(link.snapshot, []).append(link.label)
        self._label_index = (index, state, len(state.chain))
        return index


def _parents(path: str) -> Iterable[str]:
    """Every directory above ``path`` (an empty one has an entry of its own)."""
    while "/" in path:
        path = path.rpartition("/")[0]
        yield path


def _link(label: str, snap: str) -> ChainLink:
    return ChainLink(label=label, snapshot=snap)
