"""RunRefs: the facade the engine and the rewind call for a run whose workspace is its own worktree.

A run's boundaries form a chain of commits: the first boundary's parent is the run's base
commit, each later one's parent is the previous boundary. ``refs/iterion/runs/<run>/head``
names the chain head; each boundary also gets its own ref (see ``gitrefs.layout``). A ``pre``
boundary is not a commit: its ref is an alias of the chain head (one ref update, no tree walk).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import shlex
from collections.abc import Sequence
from pathlib import Path

import pygit2

from gitrefs import layout
from gitrefs.boundary import BANK_KIND, BoundaryKind, BoundaryLabel
from gitrefs.checkpoint_push import push_commit, push_timeout_s
from gitrefs.commits import (
    T_ITERATION,
    T_KIND,
    T_NODE,
    T_RUN,
    T_SEQ,
    CommitSpec,
    create_commit,
    parse_trailers,
)
from gitrefs.errors import (
    GitRefsError,
    PushFailed,
    RunAlreadyStarted,
    UnknownBoundary,
    UnknownRevision,
    UnknownRun,
)
from gitrefs.gitcli import run_git
from gitrefs.ids import validate_id
from gitrefs.persist import read_model, write_model
from gitrefs.private_index import snapshot_private, stage_reported_paths
from gitrefs.produced_scope import ChainEntry, PivotNotRecorded, ProducedScope, produced_scope
from gitrefs.records import (
    BankRecord,
    BoundaryRecord,
    PushAttempt,
    PushLog,
    PushRecord,
    RecoveryHint,
    RevertPlan,
    RevertResult,
    RunRecord,
)
from gitrefs.remotes import check_remote
from gitrefs.run_lock import run_lock
from gitrefs.workspace import Workspace, open_workspace
from gitrefs.worktree_apply import apply_tree_diff, diff_path

# What a checkpoint push accepts: a label ("nodes:build:0"), a ref or commit, or a record.
Pushable = str | BoundaryLabel | BoundaryRecord | BankRecord


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class RunRefs:
    """One run's refs in one workspace. Raises NotARepository / BareRepository / InvalidIdError."""

    def __init__(self, workspace: Path | str, run_id: str) -> None:
        self.run_id = validate_id(run_id, "run id")
        self.ws: Workspace = open_workspace(workspace)
        self.repo = self.ws.repo
        self.last_snapshot = ""  # "staged" (watcher-reported paths only) or "full": the last snapshot's way
        self.last_full_way = ""  # of the last "full" one: "seed", "add" or "status" (private_index.Snapshot)

    # --- run lifecycle --------------------------------------------------------------------

    @property
    def _record_path(self) -> Path:
        return self.ws.run_dir(self.run_id) / "run.json"

    @property
    def _push_log_path(self) -> Path:
        return self.ws.run_dir(self.run_id) / "pushes.json"

    @property
    def started(self) -> bool:
        return self._record_path.is_file()

    @classmethod
    def start(cls, workspace: Path | str, run_id: str, base: str | None = None) -> RunRefs:
        """Record the run's base: ``base`` (any revision) or HEAD; an unborn HEAD gets an empty root."""
        rr = cls(workspace, run_id)
        if rr.started:
            raise RunAlreadyStarted(f"run {run_id!r} is already started in {rr.ws.workdir}",
                                    hint="use another run id, or keep writing boundaries to this one")
        unborn = False
        if base is not None:
            base_commit = rr._resolve_commit(base)
        elif rr.repo.head_is_unborn:
            # The chain needs a root to alias `pre` to and to diff against: the empty tree, written
            # as a real object so the chain can be pushed and fsck'd.
            unborn = True
            base_commit = create_commit(rr.repo, CommitSpec(
                f"iterion: run {run_id} base (unborn HEAD)",
                {T_RUN: run_id, T_KIND: layout.BASE}, str(rr.repo.TreeBuilder().write()), ()))
        else:
            base_commit = str(rr.repo.head.target)
        rr._set_ref(layout.base_ref(run_id), base_commit)
        write_model(rr._record_path, RunRecord(run_id=run_id, base=None if unborn else base_commit,
                                               started_at=_now()))
        return rr

    def record(self) -> RunRecord:
        if not self.started:
            known = list_runs(self.ws.workdir)
            raise UnknownRun(f"no run {self.run_id!r} in {self.ws.workdir}",
                             hint=(f"known runs: {', '.join(known)}" if known else
                                   f"start it first: iterion refs start --run {self.run_id}"))
        return read_model(self._record_path, RunRecord)

    def base_commit(self) -> str:
        self.record()
        return self._ref_target(layout.base_ref(self.run_id)) or self._missing(layout.base_ref(self.run_id))

    def chain_head(self) -> str:
        """The run's latest boundary commit (the base while no boundary exists)."""
        return self._ref_target(layout.head_ref(self.run_id)) or self.base_commit()

    # --- refs helpers ---------------------------------------------------------------------

    def _ref_target(self, name: str) -> str | None:
        ref = self.repo.references.get(name)
        return None if ref is None else str(ref.resolve().target)

    def _set_ref(self, name: str, commit: str, *, force: bool = True) -> None:
        self.repo.references.create(name, pygit2.Oid(hex=commit), force=force)

    def _missing(self, name: str) -> str:
        raise GitRefsError(f"ref {name} is missing; the run's refs were deleted outside iterion")

    def _resolve_commit(self, rev: str) -> str:
        try:
            return str(self.repo.revparse_single(rev).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise UnknownRevision(f"{rev!r} names no commit in {self.ws.workdir}") from None

    def _tree_of(self, rev: str) -> str:
        try:
            return str(self.repo.revparse_single(rev).peel(pygit2.Tree).id)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise UnknownRevision(f"{rev!r} names no commit or tree in {self.ws.workdir}") from None

    def _run_refs(self) -> list[tuple[layout.ParsedRef, str]]:
        prefix = layout.run_prefix(self.run_id)
        out = []
        for name in self.repo.references:
            if name.startswith(prefix):
                try:
                    parsed = layout.parse_ref(name)
                except GitRefsError:
                    continue
                out.append((parsed, str(self.repo.references[name].resolve().target)))
        return out

    # --- snapshots and boundaries ---------------------------------------------------------

    def snapshot(self, reported: Sequence[str] | None = None, head: str | None = None) -> str:
        """Tree id of the working tree as `git add -A` on a copy of the user's index would record it.

        Nothing of the user's is written; the run's private index (a warm stat cache) is.
        ``reported``: every path a watcher saw change since the last boundary (the caller
        vouches for that): only those are staged, unless in doubt (``private_index``).
        ``head``: the chain head if the caller has it (looked up otherwise).
        """
        if reported is not None:
            tree = stage_reported_paths(self.ws, self.run_id, reported)
            if tree is not None:
                self.last_snapshot = "staged"
                return tree
        self.last_snapshot = "full"
        # The chain head's tree is usually the last one P gave: what `git status` on P compares with.
        if head is None and self.started:
            head = self._ref_target(layout.head_ref(self.run_id)) or self._ref_target(layout.base_ref(self.run_id))
        snap = snapshot_private(self.ws, self.run_id, head)
        self.last_full_way = snap.way
        return snap.tree

    def write_boundary(self, label: BoundaryLabel, reported: Sequence[str] | None = None, *,
                       unchanged: bool = False) -> BoundaryRecord:
        """Record a boundary; ``reported`` as for ``snapshot``. ``unchanged``: the caller vouches
        that the run's tree is the chain head's (its checkout does not exist yet): no working
        tree is read, the head's tree is recorded."""
        self.record()
        with run_lock(self.ws.run_dir(self.run_id)):
            return self._write_boundary_locked(label, reported, unchanged)

    def _write_boundary_locked(self, label: BoundaryLabel, reported: Sequence[str] | None = None,
                               unchanged: bool = False) -> BoundaryRecord:
        ref = layout.boundary_ref(self.run_id, label)
        prev = self.chain_head()
        if label.kind.is_alias:
            self._set_ref(ref, prev)
            return BoundaryRecord(label, ref, prev, self._tree_of(prev))
        tree = self._tree_of(prev) if unchanged else self.snapshot(reported, prev)
        commit = create_commit(self.repo, CommitSpec(
            f"iterion: {label} (run {self.run_id})",
            {T_RUN: self.run_id, T_NODE: label.node, T_ITERATION: str(label.iteration),
             T_KIND: label.kind.value},
            tree, (prev,)))
        # Head first: a crash between the two leaves the commit in the chain (listed from its
        # trailers) rather than a labelled ref outside it.
        self._set_ref(layout.head_ref(self.run_id), commit)
        self._set_ref(ref, commit)
        return BoundaryRecord(label, ref, commit, tree)

    def boundaries(self) -> list[BoundaryRecord]:
        """Every boundary in chain order; ``pre`` aliases sit right after the commit they alias."""
        base = self.base_commit()
        kinds = {k.value for k in BoundaryKind}
        walked: list[tuple[str, BoundaryRecord | None]] = []  # (commit, record); None: a revert step
        commit = self.repo[pygit2.Oid(hex=self.chain_head())].peel(pygit2.Commit)
        while str(commit.id) != base:
            t = parse_trailers(commit.message)
            rec = None
            if t.get(T_RUN) == self.run_id and t.get(T_KIND) in kinds:
                label = BoundaryLabel(BoundaryKind(t[T_KIND]), t[T_NODE], int(t[T_ITERATION]))
                rec = BoundaryRecord(label, layout.boundary_ref(self.run_id, label), str(commit.id),
                                     str(commit.tree_id))
            walked.append((str(commit.id), rec))
            if not commit.parents:
                break
            commit = commit.parents[0]
        walked.reverse()
        position = {c: i for i, (c, _) in enumerate(walked)}
        position.setdefault(base, -1)
        keyed: list[tuple[tuple[int, int, str], BoundaryRecord]] = [
            ((i, 0, ""), rec) for i, (_, rec) in enumerate(walked) if rec is not None]
        for parsed, target in self._run_refs():
            alias = parsed.label
            if alias is not None and alias.kind.is_alias and target in position:
                name = layout.boundary_ref(self.run_id, alias)
                keyed.append(((position[target], 1, name),
                              BoundaryRecord(alias, name, target, self._tree_of(target))))
        keyed.sort(key=lambda kv: kv[0])
        return [rec for _, rec in keyed]

    def chain_entries(self) -> list[ChainEntry]:
        return [ChainEntry(rec.label, rec.commit) for rec in self.boundaries()]

    def resolve(self, label: BoundaryLabel) -> str:
        """The commit a boundary label recorded (its latest occurrence)."""
        self.record()
        target = self._ref_target(layout.boundary_ref(self.run_id, label))
        if target is None:
            raise UnknownBoundary(f"run {self.run_id!r} recorded no boundary {label}",
                                  hint=f"list them: iterion refs list --run {self.run_id}")
        return target

    # --- produced scope -------------------------------------------------------------------

    def changed_paths(self, a: str, b: str) -> set[str]:
        """Paths whose entry differs between two commits (or trees): no renames, both sides named."""
        ta, tb = self._tree_of(a), self._tree_of(b)
        if ta == tb:
            return set()
        diff = self.repo[ta].peel(pygit2.Tree).diff_to_tree(self.repo[tb].peel(pygit2.Tree))
        paths: set[str] = set()
        for delta in diff.deltas:
            paths.add(diff_path(delta.old_file))
            paths.add(diff_path(delta.new_file))
        return paths

    def produced_scope(self, pivot: BoundaryLabel) -> ProducedScope:
        try:
            return produced_scope(self.chain_entries(), pivot, self.changed_paths)
        except PivotNotRecorded as exc:
            raise UnknownBoundary(str(exc),
                                  hint=f"list them: iterion refs list --run {self.run_id}") from None

    # --- bank and revert ------------------------------------------------------------------

    def banks(self) -> list[BankRecord]:
        out = []
        for parsed, target in self._run_refs():
            if parsed.kind == BANK_KIND and parsed.node is not None and parsed.number is not None:
                ref = layout.bank_ref(self.run_id, parsed.node, parsed.number)
                out.append(BankRecord(parsed.node, parsed.number, ref, target, self._tree_of(target)))
        return sorted(out, key=lambda b: (b.node, b.seq))

    def _head_commit(self) -> str | None:
        return None if self.repo.head_is_unborn else str(self.repo.head.target)

    def bank(self, node: str) -> BankRecord:
        """Commit the workspace as it stands (untracked work included) under rewind/<node>/<seq>."""
        self.record()
        validate_id(node, "node id")
        seq = 1 + max((b.seq for b in self.banks() if b.node == node), default=0)
        tree = self.snapshot()
        parent = self._head_commit() or self.base_commit()
        commit = create_commit(self.repo, CommitSpec(
            f"iterion: bank before rewinding to {node} (run {self.run_id})",
            {T_RUN: self.run_id, T_NODE: node, T_KIND: BANK_KIND, T_SEQ: str(seq)}, tree, (parent,)))
        # Never overwrite a bank: if a concurrent bank took this sequence, take the next one.
        for _ in range(100):
            ref = layout.bank_ref(self.run_id, node, seq)
            try:
                self._set_ref(ref, commit, force=False)
                return BankRecord(node, seq, ref, commit, tree)
            except pygit2.AlreadyExistsError:
                seq += 1
        raise GitRefsError(f"could not allocate a bank ref for node {node!r} of run {self.run_id!r}")

    def revert_to(self, label: BoundaryLabel) -> RevertResult:
        """Bank the workspace, commit the boundary's tree on top of HEAD, and make the tree match it."""
        return self.apply_revert(self.prepare_revert(label))

    def missing_objects(self, label: BoundaryLabel) -> list[str]:
        """Paths of the boundary's tree whose object the repository lacks (read only)."""
        missing: list[str] = []

        def walk(tree_id: pygit2.Oid, prefix: str) -> None:
            try:
                tree = self.repo[tree_id].peel(pygit2.Tree)
            except (KeyError, ValueError, pygit2.GitError):
                missing.append(prefix or ".")
                return
            for entry in tree:
                path = f"{prefix}{entry.name}"
                if entry.filemode == pygit2.enums.FileMode.TREE:
                    walk(entry.id, path + "/")
                elif entry.filemode != pygit2.enums.FileMode.COMMIT and not self.repo.odb.exists(entry.id):
                    missing.append(path)

        walk(pygit2.Oid(hex=self._tree_of(self.resolve(label))), "")
        return missing

    def prepare_revert(self, label: BoundaryLabel) -> RevertPlan:
        """Bank the workspace and create (not apply) the revert commit; HEAD and the tree stay."""
        target = self.resolve(label)
        target_tree = self._tree_of(target)
        bank = self.bank(label.node)
        old_head = self._head_commit()
        revert = create_commit(self.repo, CommitSpec(
            f"iterion: revert workspace to {label} (run {self.run_id})",
            {T_RUN: self.run_id, T_NODE: label.node, T_ITERATION: str(label.iteration), T_KIND: "revert"},
            target_tree, (old_head,) if old_head else ()))
        return RevertPlan(label=str(label), target_commit=target, target_tree=target_tree,
                          bank=dataclasses.asdict(bank), old_head=old_head, revert_commit=revert)

    def apply_revert(self, plan: RevertPlan) -> RevertResult:
        """Move HEAD to the revert commit and the tree to its content; idempotent, so a killed
        apply of the same plan is finished by calling it again (HEAD already moved is kept,
        paths already written or removed are written/removed again harmlessly)."""
        label = BoundaryLabel.parse(plan.label)
        bank = BankRecord(**plan.bank)
        revert = plan.revert_commit
        head = self._head_commit()
        if head != revert:
            # update-ref with the old value: refuses if HEAD moved since we read it (another writer).
            run_git(self.ws.workdir, ["update-ref", "-m", f"iterion: revert to {label} (run {self.run_id})",
                                      "HEAD", revert, plan.old_head or ""])
        applied = apply_tree_diff(self.repo, self.ws.workdir, bank.tree, plan.target_tree)
        # Index := the revert commit's tree, keeping stat data of untouched entries.
        # (exit 1 only says paths still differ, e.g. a skipped submodule: reported in `skipped`.)
        proc = run_git(self.ws.workdir, ["reset", "-q"], env={"GIT_OPTIONAL_LOCKS": "1"}, check=False)
        if proc.returncode not in (0, 1):
            raise GitRefsError(f"reverted HEAD to {revert[:12]} but could not reset the index: "
                               f"{proc.stderr.decode('utf-8', 'replace').strip()}")
        chain_commit = self._chain_revert_step(label)
        return RevertResult(label, plan.target_commit, revert, bank, tuple(sorted(applied.written)),
                            tuple(sorted(applied.removed)), tuple(sorted(applied.skipped)), chain_commit)

    def undo_revert(self, label: BoundaryLabel, revert_commit: str, bank_ref: str, *,
                    completing: bool = False) -> tuple[list[str], list[str], list[str]]:
        """Undo ``revert_to(label)``: HEAD back to the revert commit's parent (refused when HEAD
        moved since), the working tree back to the bank's tree, the chain advanced to it as the
        revert advanced it. Returns (written, removed, skipped) paths.

        ``completing``: an undo a killed process began; HEAD may already be at the parent (then
        it stays), and the tree step converges on the bank's tree whatever part of it landed."""
        head = self._head_commit()
        parents = self.repo[revert_commit].peel(pygit2.Commit).parent_ids
        parent = str(parents[0]) if parents else None
        if head != revert_commit and not (completing and head == parent):
            raise GitRefsError(f"HEAD of {self.ws.workdir} is no longer the rewind's revert commit "
                               f"{revert_commit[:12]} (now {(head or 'unborn')[:12]}): the run moved on")
        bank_tree = self._tree_of(str(self.repo.revparse_single(bank_ref).peel(pygit2.Commit).id))
        disk = self.snapshot()
        if head == revert_commit:
            run_git(self.ws.workdir, ["update-ref", "-m", f"iterion: undo the revert to {label} (run {self.run_id})",
                                      "HEAD", parent or "", revert_commit])
        applied = apply_tree_diff(self.repo, self.ws.workdir, disk, bank_tree)
        run_git(self.ws.workdir, ["reset", "-q"], env={"GIT_OPTIONAL_LOCKS": "1"}, check=False)
        self._chain_revert_step(label)
        return sorted(applied.written), sorted(applied.removed), sorted(applied.skipped)

    def _chain_revert_step(self, label: BoundaryLabel) -> str:
        """Advance the chain head to the reverted tree (an unlabelled step, not a boundary).

        A later ``pre`` aliases the chain head on the promise that nothing touched the tree since
        the last boundary; a revert breaks that promise, so it records what it left on disk.
        Without this a replayed node's ``pre`` would alias the pre-revert state, and a second
        rewind to it would restore the very output the first one dropped.
        """
        with run_lock(self.ws.run_dir(self.run_id)):
            commit = create_commit(self.repo, CommitSpec(
                f"iterion: workspace reverted to {label} (run {self.run_id})",
                {T_RUN: self.run_id, T_NODE: label.node, T_ITERATION: str(label.iteration), T_KIND: "revert"},
                self.snapshot(), (self.chain_head(),)))
            self._set_ref(layout.head_ref(self.run_id), commit)
        return commit

    # --- checkpoint push and recovery -----------------------------------------------------

    def push_log(self) -> PushLog:
        self.record()
        return read_model(self._push_log_path, PushLog) if self._push_log_path.is_file() else PushLog()

    def _resolve_pushable(self, what: Pushable) -> str:
        if isinstance(what, (BoundaryRecord, BankRecord)):
            return what.commit
        if isinstance(what, BoundaryLabel):
            return self.resolve(what)
        try:
            return self.resolve(BoundaryLabel.parse(what))
        except ValueError:
            return self._resolve_commit(what)

    def push(self, remote: str, commit_or_label: Pushable) -> PushRecord:
        """Push a boundary or bank commit to ``remote`` under refs/iterion/runs/<run>/checkpoints/<seq>."""
        limit = push_timeout_s()  # a garbage $ITERION_PUSH_TIMEOUT_S refuses before anything is written
        self.record()
        with run_lock(self.ws.run_dir(self.run_id)):
            return self._push_locked(remote, commit_or_label, limit)

    def _push_locked(self, remote: str, commit_or_label: Pushable, limit: float) -> PushRecord:
        log = self.push_log()
        check_remote(self.ws, remote)
        commit = self._resolve_pushable(commit_or_label)
        seq = 1 + max((a.sequence for a in log.attempts), default=0)
        ref = layout.checkpoint_ref(self.run_id, seq)
        # the one push every caller uses (gitrefs.checkpoint_push); a sequence is never reused here
        outcome = push_commit(self.ws.workdir, remote, commit, ref, force=False, timeout_s=limit)
        ok, error = outcome.ok, outcome.error
        attempt = PushAttempt(sequence=seq, remote=remote, ref=ref, commit=commit, time=_now(), ok=ok,
                              error=error)
        write_model(self._push_log_path, PushLog(attempts=[*log.attempts, attempt]))
        if not ok:
            raise PushFailed(f"push of {commit[:12]} to {remote} failed: {error}",
                             hint="the last successful checkpoint is still recorded: iterion refs hint")
        return PushRecord(seq, remote, ref, commit, attempt.time)

    def recovery_hint(self) -> RecoveryHint | None:
        """The latest successfully pushed checkpoint, or None (no ref is ever invented)."""
        last = self.push_log().latest_success()
        if last is None:
            return None
        return RecoveryHint(
            ref=last.ref, commit=last.commit, sequence=last.sequence, time=last.time, remote=last.remote,
            fetch_command=f"git fetch {shlex.quote(last.remote)} {last.ref}",
            verify_command="git rev-parse FETCH_HEAD",
            verify=f"`git rev-parse FETCH_HEAD` prints {last.commit}")


def list_runs(workspace: Path | str) -> list[str]:
    """Run ids with a record or refs in the workspace's repository."""
    ws = open_workspace(workspace)
    runs: set[str] = set()
    runs_dir = ws.commondir / "iterion" / "runs"
    if runs_dir.is_dir():
        runs |= {p.name for p in runs_dir.iterdir() if (p / "run.json").is_file()}
    for name in ws.repo.references:
        if name.startswith(layout.RUNS_PREFIX):
            runs.add(name[len(layout.RUNS_PREFIX):].split("/", 1)[0])
    return sorted(runs)
