"""A run's private index: git's stat cache kept warm from one boundary to the next.

The snapshot rule is "what `git add -A && git write-tree` records on a COPY of the user's
index, now". Re-copying the user's index at every boundary is exact but slow: every racily
clean entry of the user's index (a fresh `git worktree add` leaves thousands) is re-hashed,
every file the run created is re-hashed, and write-tree rebuilds the cache-tree - each time.

Here the copy is kept (``<gitdir>/iterion/runs/<run>/index``) and `git add -A` is re-applied to
it, so git refreshes its stat data and cache-tree once; an unchanged boundary is one `git add -A`
that writes nothing, and the tree id is then reused (the index file did not change, so neither
did its tree). Kept copy P and fresh copy C of the user's index U give the same tree unless:

* U changed (``git add``, ``git rm --cached``, ...): P is re-seeded from U;
* a path P holds but U does not has become ignored since it was added (`git add -A` never drops
  a tracked path for being ignored), or P holds a blob hashed under attributes or config that
  have changed since (its stat data is clean, so git does not re-hash it): P is re-seeded
  whenever any such source changed - the ``.gitignore``/``.gitattributes`` of every directory
  in the last tree, ``info/exclude``, ``info/attributes``, the excludes and attributes files,
  the config files; and when a directory of the tree gains a ``.git``;
* a path U tracks although ignored was deleted and has come back (C re-adds it, P sees an
  ignored untracked file): P is re-seeded when such a path exists again outside the tree;
* a gitlink P holds lost its repository (C sees a plain directory, P keeps the gitlink): P is
  re-seeded when a gitlink of the last tree has no ``.git`` any more.

With a watcher (``stage_reported_paths``), a boundary does not even run `git add -A` over the
tree: it stages into P only the paths the watcher reported changed since the last boundary, the
way git's fsmonitor lets `git status` look only where something happened. That stands for
`git add -A` exactly when P stood for a copy at the last boundary and nothing else can have
changed the outcome; on any doubt it gives up and the caller does the full boundary: P not
trusted or rewritten by someone else, the user's index changed, a source outside the tree
changed, a reported path is (or is inside) an ignore/attributes file, a ``.git`` or a gitlink
of the last tree. (The watcher's own doubts - an overflow, a restart, no baseline - are the
caller's: it then never calls this.)

Without a watcher, a boundary whose P still stands for a copy (``_snapshot_by_status``) asks
`git status` on P which paths `git add -A` would change, and stages only those the same way.
`git add -A` reads every directory of the tree; status keeps git's untracked cache in P and reads
only the directories whose stat data changed, which is most of the difference at 100,000 files.
What status cannot say plainly (a submodule, a new embedded repository, a rule file, an unmerged
entry) is a doubt: `git add -A` on P, as before. The cache lives only along this way, and P is
dated to before status looked (``_back_date``: a directory changed in the same timestamp tick
after status read it would otherwise keep its stale listing for good - git's own status has that
hole); every other command that writes P drops the cache.

Re-seeding is the original algorithm (copy U, `git add -A`, write-tree), so every case it does
not cover costs one slow boundary, never a wrong tree.

P is a split index (git's ``core.splitIndex``): its entries sit in a shared index written once,
and each boundary's `git add -A` and `write-tree` write only the entries changed since - a few KB
instead of the whole index (9 MB at 100,000 files, hashed at every write, twice per boundary).
git keeps shared indexes in ``$GIT_DIR``, so every git command on P runs with a git dir of its
own (``<private dir>/gitdir``, holding a HEAD and the shared indexes) and the repository's as
``GIT_COMMON_DIR`` (config, objects, refs, info/exclude, info/attributes as usual): the shared
indexes never land among the user's files, and git's clean-up of old ones
(``splitIndex.sharedIndexExpire=now``) only ever sees this run's. The private git dir's HEAD
names the run's chain head, for `git status` to compare P with; nothing else reads it. The per-worktree files git
would then look for in the private git dir instead of the user's - ``config.worktree`` and
``info/sparse-checkout`` - keep P whole when either exists (both are sources: their coming or
going re-seeds). A missing or damaged shared index (a crash between git writing the new one and
P pointing at it, say) makes P unreadable, which re-seeds like any damaged P. Signatures taken less than
``_RACY_NS`` before the boundary started are not trusted (a second change within the same
timestamp tick would be invisible), which forces a re-seed next time.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pygit2

from gitrefs.errors import GitCommandFailed
from gitrefs.gitcli import GitProcess, git_out, run_git
from gitrefs.persist import VersionedModel, atomic_write_bytes, read_model
from gitrefs.run_lock import file_lock
from gitrefs.snapshot import ADD_ALL
from gitrefs.workspace import Workspace

# Coarser than any Linux filesystem's timestamp tick: an ignore source changed this shortly before
# a boundary may have changed after git read it, so it is not trusted.
_RACY_NS = 100_000_000

Sig = str | None  # a digest of the content; None: absent


def index_sig(path: Path) -> Sig:
    """An index file's identity: its trailing checksum (git writes it over the whole content).

    Content, not stat data: a rewrite within one timestamp tick that reuses the inode and the
    size would fool a stat signature.
    """
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - 20, 0))
            trailer = f.read(20)
    except FileNotFoundError:
        return None
    # index.skipHash writes a zero trailer: no identity, never "unchanged".
    return f"{size}:{trailer.hex()}" if trailer.strip(b"\0") else f"unhashed:{time.time_ns()}"


def source_sig(path: str, since_ns: int) -> tuple[Sig, bool]:
    """(digest of an ignore/config file's content, whether it is racy: changed near ``since_ns``)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
            st = os.fstat(f.fileno())
    except (FileNotFoundError, NotADirectoryError):
        return None, False
    except IsADirectoryError:
        return "dir", False
    return hashlib.blake2b(data, digest_size=16).hexdigest(), max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns - _RACY_NS


def source_unchanged(path: str, sig: Sig) -> bool:
    """``source_sig(path)`` still is ``sig``. An absent source (most of them: a directory's
    .gitignore, .gitattributes and .git) is checked without an exception or an open:
    ``access`` fails exactly where opening would (nothing there, or a dangling symlink)."""
    if sig is None and not os.access(path, os.F_OK):
        return True
    return source_sig(path, 0)[0] == sig


class PrivateIndexState(VersionedModel):
    """What the private index was derived from, to tell when it may no longer stand for a copy."""

    user_index: Sig
    private_index: Sig
    tree: str
    sources: dict[str, Sig]  # ignore rules and config, by absolute path
    tracked_ignored: list[str]  # paths the user's index tracks although ignored
    dirs: dict[str, str] = {}  # the tree's directories ("" the root, else "a/b/") -> tree id
    gitlinks: list[str] = []  # the tree's submodules / embedded repositories
    trusted: bool  # False: a source changed right before the last boundary; re-seed next time
    split: bool = False  # P is a split index over the private git dir (absent in older states: whole)


class _Paths(NamedTuple):
    index_file: Path  # not `index`: that would shadow tuple.index
    state: Path
    lock: Path
    gitdir: Path  # the private git dir of a split P


def _paths(ws: Workspace, run_id: str) -> _Paths:
    d = ws.private_dir(run_id)
    # `index.lock` is git's own lock file for the index; ours must not collide with it.
    return _Paths(d / "index", d / "index-state.json", d / "snapshot.flock", d / "gitdir")


# Options for every git command on P: the same on readers and writers, so that no command ever
# rewrites a split P whole (or the other way round).
_WHOLE = ["-c", "core.splitIndex=false"]
_SPLIT = ["-c", "core.splitIndex=true", "-c", "splitIndex.sharedIndexExpire=now"]
# git's untracked cache in P, built for -uall, lives only along ``_snapshot_by_status``; every
# other command that writes P drops it (see there why), whatever the user's core.untrackedCache.
_UNTRACKED_CACHE = ["-c", "core.untrackedCache=true", "-c", "status.showUntrackedFiles=all"]
_NO_UNTRACKED_CACHE = ["-c", "core.untrackedCache=false"]
# What keeps P whole: files git reads from $GIT_DIR itself, not from GIT_COMMON_DIR.
_PER_WORKTREE = ("config.worktree", "info/sparse-checkout")


def _can_split(ws: Workspace) -> bool:
    return not any((ws.gitdir / name).exists() for name in _PER_WORKTREE)


def _git_env(ws: Workspace, paths: _Paths, split: bool) -> dict[str, str]:
    env = {"GIT_INDEX_FILE": str(paths.index_file)}
    if split:
        # An explicit GIT_DIR skips git's safe.directory ownership check; opening the workspace
        # (libgit2, owner validation on) has made it already.
        env.update(GIT_DIR=str(paths.gitdir), GIT_COMMON_DIR=str(ws.commondir), GIT_WORK_TREE=str(ws.workdir))
    return env


def _on_p(args: list[str], split: bool, untracked_cache: bool = False) -> list[str]:
    """``args`` (a git command line, options first) with P's options before the subcommand;
    ``untracked_cache``: keep (and let status use) P's untracked cache, else drop it."""
    i = next(i for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c"))
    cache = _UNTRACKED_CACHE if untracked_cache else _NO_UNTRACKED_CACHE
    return [*args[:i], *(_SPLIT if split else _WHOLE), *cache, *args[i:]]


def _xdg_git(name: str) -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git" / name


def _config_files(ws: Workspace) -> list[Path]:
    """The config files git reads (files they `include` are not followed: a known gap)."""
    return [ws.commondir / "config", ws.gitdir / "config.worktree",
            Path(os.environ.get("GIT_CONFIG_GLOBAL") or Path.home() / ".gitconfig"), _xdg_git("config"),
            Path(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")]


def _config_path(ws: Workspace, key: str, default_name: str) -> Path:
    """A path-valued setting (core.excludesFile, core.attributesFile), or git's XDG default."""
    try:
        value = ws.repo.config[key]
    except KeyError:
        return _xdg_git(default_name)
    if value is None:  # a bare `excludesFile` line with no value: git rejects it itself, so treat as unset
        return _xdg_git(default_name)
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else ws.workdir / p


def _tree_shape(repo: pygit2.Repository, tree: str, old_dirs: dict[str, str],
                old_gitlinks: list[str]) -> tuple[dict[str, str], list[str]]:
    """(every directory of ``tree`` -> its tree id, "" the root: where a .gitignore can rule a
    captured path; every gitlink of it). Subtrees whose id did not change since the last tree
    are taken from ``old_dirs``/``old_gitlinks`` instead of walked again."""
    old_keys = sorted(old_dirs)
    dirs: dict[str, str] = {}
    gitlinks: list[str] = []
    stack: list[tuple[str, pygit2.Oid]] = [("", repo[pygit2.Oid(hex=tree)].peel(pygit2.Tree).id)]
    while stack:
        prefix, oid = stack.pop()
        if old_dirs.get(prefix) == str(oid):
            # The keys under ``prefix`` are contiguous in sorted order (every dir key ends in "/").
            i = bisect.bisect_left(old_keys, prefix)
            while i < len(old_keys) and old_keys[i].startswith(prefix):
                dirs[old_keys[i]] = old_dirs[old_keys[i]]
                i += 1
            gitlinks += [g for g in old_gitlinks if g.startswith(prefix)]
            continue
        dirs[prefix] = str(oid)
        subtree = repo[oid]
        assert isinstance(subtree, pygit2.Tree)  # only tree ids are ever pushed on the stack
        for entry in subtree:
            kind = entry.type  # an int: far cheaper than the filemode enum on big trees
            if kind == pygit2.GIT_OBJECT_TREE:
                stack.append((f"{prefix}{entry.name}/", entry.id))
            elif kind == pygit2.GIT_OBJECT_COMMIT:
                gitlinks.append(f"{prefix}{entry.name}")
    return dirs, sorted(gitlinks)


def _source_paths(ws: Workspace, dirs: Iterable[str]) -> list[str]:
    """Every file whose change could make P and a fresh copy disagree.

    Ignore rules (what a new path's fate is), attributes and config (how a file hashes: P keeps
    blobs hashed under the old rules while their stat data stays clean), and a ``.git`` appearing
    in a captured directory (it becomes an embedded repository).
    """
    out = [str(p) for p in (ws.commondir / "info" / "exclude", ws.commondir / "info" / "attributes",
                            ws.gitdir / "info" / "sparse-checkout",
                            _config_path(ws, "core.excludesFile", "ignore"),
                            _config_path(ws, "core.attributesFile", "attributes"), *_config_files(ws))]
    root = os.path.join(ws.workdir, "")
    for d in dirs:
        base = root + d  # str concatenation: this runs for every directory of big trees
        out += [base + ".gitignore", base + ".gitattributes"] + ([base + ".git"] if d else [])
    return out


def _in_tree(repo: pygit2.Repository, tree: str, path: str) -> bool:
    try:
        repo[pygit2.Oid(hex=tree)].peel(pygit2.Tree)[path]
    except KeyError:
        return False
    return True


def _may_stand_for_a_copy(ws: Workspace, st: PrivateIndexState, private: Path) -> bool:
    """Whether P may still stand for a copy, the quick half: trust, and both indexes unchanged
    (the other half, ``_sources_still_hold``, reads every source)."""
    if not st.trusted or index_sig(ws.user_index) != st.user_index:
        return False
    return index_sig(private) == st.private_index  # else someone else wrote it: start over


def _sources_still_hold(ws: Workspace, st: PrivateIndexState) -> bool:
    """The slow half: every source, gitlink and path tracked although ignored as recorded."""
    return _files_still_hold(ws, st) and _tracked_ignored_still_hold(ws, st)


def _files_still_hold(ws: Workspace, st: PrivateIndexState) -> bool:
    """Every source and gitlink as recorded: the file system only (no pygit2: safe in a thread)."""
    if not all(source_unchanged(p, sig) for p, sig in st.sources.items()):
        return False
    return all(os.path.lexists(os.path.join(ws.workdir, p, ".git")) for p in st.gitlinks)


def _tracked_ignored_still_hold(ws: Workspace, st: PrivateIndexState) -> bool:
    return not any(os.path.lexists(ws.workdir / p) and not _in_tree(ws.repo, st.tree, p)
                   for p in st.tracked_ignored)


# path -> (identity of the file, what it holds): a run's boundaries re-read a state they wrote
# themselves (thousands of sources on a big tree) only when another process rewrote it.
_LOADED: dict[str, tuple[tuple[int, int, int, int], PrivateIndexState]] = {}


def _ident(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _load(path: Path) -> PrivateIndexState | None:
    ident = _ident(path)
    if ident is None:
        _LOADED.pop(str(path), None)
        return None
    hit = _LOADED.get(str(path))
    if hit is not None and hit[0] == ident:
        return hit[1].model_copy()
    try:
        st = read_model(path, PrivateIndexState)
    except (OSError, ValueError):
        return None  # missing or unreadable: the private index is a cache, re-seed
    _LOADED[str(path)] = (ident, st)
    return st.model_copy()


def _save(path: Path, st: PrivateIndexState) -> None:
    # Not fsynced: it is a cache, and the rename keeps it whole; lost, it means a re-seed.
    atomic_write_bytes(path, st.model_dump_json().encode(), durable=False)
    ident = _ident(path)
    if ident is not None:
        _LOADED[str(path)] = (ident, st.model_copy())


def _prepare_gitdir(gitdir: Path) -> None:
    """The private git dir of a split P, without the shared indexes of an earlier P."""
    gitdir.mkdir(parents=True, exist_ok=True)
    for old in gitdir.glob("sharedindex*"):
        old.unlink(missing_ok=True)
    head = gitdir / "HEAD"
    if not head.is_file():
        # git only needs a valid HEAD to take the directory for a git dir; nothing resolves it.
        atomic_write_bytes(head, b"ref: refs/heads/iterion-private-index\n", durable=False)


def _seed(ws: Workspace, paths: _Paths, split: bool) -> list[str]:
    """P := a copy of the user's index. Returns the paths it tracks although ignored."""
    private = paths.index_file
    private.unlink(missing_ok=True)
    if split:
        _prepare_gitdir(paths.gitdir)
    if not ws.user_index.is_file():
        return []
    # copy2 keeps the mtime: git's racy-entry check compares entry times to it, and a newer
    # copy would make racily-clean entries look trustworthy.
    shutil.copy2(ws.user_index, private)
    if split and _maybe_split(private):
        # The user's own split index: its shared part is in the user's git dir. Made whole with
        # that git dir (read only: no shared index is written), then P splits over its own.
        git_out(ws.workdir, ["-c", "core.splitIndex=false", "update-index", "--no-split-index"],
                env={"GIT_INDEX_FILE": str(private)})
    out = git_out(ws.workdir, _on_p(["ls-files", "-z", "-c", "-i", "--exclude-standard"], split),
                  env=_git_env(ws, paths, split))
    return sorted(p for p in out.split("\0") if p)


def _maybe_split(index: Path) -> bool:
    """Whether an index file may be a split index (a "link" extension); False is certain."""
    with open(index, "rb") as f:
        return b"link" in f.read()


class Snapshot(NamedTuple):
    tree: str
    way: str  # "seed" (P re-copied from the user's index), "add" (`git add -A` on P), "status"


def snapshot_with_private_index(ws: Workspace, run_id: str, head: str | None = None) -> str:
    """The tree `git add -A && git write-tree` would record on a copy of the user's index, now.

    ``head``: a commit, ideally of the last tree this gave (the run's chain head): what `git
    status` compares P with on its way (any commit is correct; the closer, the cheaper). Without
    one, a boundary is always `git add -A` on P.
    """
    return snapshot_private(ws, run_id, head).tree


def snapshot_private(ws: Workspace, run_id: str, head: str | None = None) -> Snapshot:
    """``snapshot_with_private_index``, saying which way it went."""
    paths = _paths(ws, run_id)
    # Not the run lock: a revert snapshots while holding it. Banks and boundaries share P.
    with file_lock(paths.lock):
        started = time.time_ns()
        st = _load(paths.state)
        user_sig = index_sig(ws.user_index)  # before the copy: a later change shows up next time
        fresh = st is None or not _may_stand_for_a_copy(ws, st, paths.index_file)
        if not fresh and st is not None and head is not None and st.split and not st.gitlinks:
            outcome = _snapshot_by_status(ws, paths, st, head)
            if isinstance(outcome, str):
                return Snapshot(outcome, "status")
            fresh = outcome is _RESEED
            if not fresh:  # a doubt: the full add, the sources already checked
                fresh = run_git(ws.workdir, _on_p(ADD_ALL, True), env=_git_env(ws, paths, True),
                                check=False).returncode != 0
        elif not fresh and st is not None:
            # `git add -A` on P runs while the sources are read (thousands of files on a big
            # tree). Reading them during the add rather than before it changes nothing: a source
            # changed while the boundary runs is seen now (re-seed, below) or next time, as when
            # it changes right after a check made before the add.
            add = GitProcess(ws.workdir, _on_p(ADD_ALL, st.split), env=_git_env(ws, paths, st.split))
            try:
                holds = _sources_still_hold(ws, st)
            finally:
                added = add.wait(check=False)
            # a failed add: a gitlink P holds whose directory lost its .git, say, or a split P
            # whose shared index is gone. Either way what a copy gives is the rule.
            fresh = not holds or added.returncode != 0
        split = _can_split(ws) if fresh or st is None else st.split
        env = _git_env(ws, paths, split)
        if fresh or st is None:
            tracked_ignored = _seed(ws, paths, split)
            git_out(ws.workdir, _on_p(ADD_ALL, split), env=env)
        else:
            tracked_ignored = st.tracked_ignored
        private_sig = index_sig(paths.index_file)
        if not fresh and st is not None and private_sig == st.private_index:
            # git wrote nothing: same entries, same tree; the sources were just checked unchanged.
            tree, sources, dirs, gitlinks, trusted = st.tree, st.sources, st.dirs, st.gitlinks, True
        else:
            tree = git_out(ws.workdir, _on_p(["write-tree"], split), env=env)
            private_sig = index_sig(paths.index_file)  # write-tree stores the cache-tree
            dirs, gitlinks = _tree_shape(ws.repo, tree, st.dirs if st else {}, st.gitlinks if st else [])
            # Sources checked before `git add -A` keep that reading (a change since shows up next
            # time); the others are read now and must not have changed around the add (racy).
            checked = {} if fresh or st is None else st.sources
            read = {p: (checked[p], False) if p in checked else source_sig(p, started)
                    for p in _source_paths(ws, dirs)}
            sources = {p: sig for p, (sig, _) in read.items()}
            trusted = not any(racy for _, racy in read.values())
        new = PrivateIndexState(user_index=user_sig, private_index=private_sig, tree=tree,
                                sources=sources, tracked_ignored=tracked_ignored, dirs=dirs, gitlinks=gitlinks,
                                trusted=trusted, split=split)
        if new != st:
            _save(paths.state, new)
        return Snapshot(tree, "seed" if fresh or st is None else "add")


class _Outcome:
    """Why ``_snapshot_by_status`` gave no tree."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_RESEED = _Outcome("re-seed")  # P no longer stands for a copy
_DOUBT = _Outcome("doubt")  # P still does; the full `git add -A` on it decides


# status on P: porcelain v2 for exact, NUL-separated paths; no rename detection (quadratic, and a
# rename is just a deletion and an addition here); submodule work trees not examined (P holds no
# gitlink when this runs). Optional locks ON: status then writes back P's refreshed stat data and
# its untracked cache, which is what makes the next one cheap.
_STATUS = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "status", "--porcelain=v2", "-z",
           "--untracked-files=all", "--no-renames", "--ignore-submodules=dirty", "--ignored=no"]


def _status_changes(out: bytes) -> tuple[list[str], set[str]] | None:
    """(every path whose work-tree side differs from P, the untracked ones among them) from
    `git status --porcelain=v2 -z`; None on anything `_stage_locked` should not be trusted with:
    a submodule, an unmerged entry, a rename, an untracked repository ("dir/"), a name git
    reads rules from."""
    changed: list[str] = []
    untracked: set[str] = set()
    for rec in out.split(b"\0"):
        if not rec:
            continue
        kind = rec[:2]
        if kind == b"1 ":
            fields = rec.split(b" ", 8)
            if len(fields) != 9 or not fields[2].startswith(b"N"):
                return None
            if fields[1][1:2] != b".":  # Y: the work tree differs from P's entry
                changed.append(os.fsdecode(fields[8]))
        elif kind == b"? ":
            if rec.endswith(b"/"):
                return None
            path = os.fsdecode(rec[2:])
            changed.append(path)
            untracked.add(path)
        elif kind != b"# ":
            return None
    if any(_DOUBT_NAMES.intersection(p.split("/")) for p in changed):
        return None
    return changed, untracked


def _snapshot_by_status(ws: Workspace, paths: _Paths, st: PrivateIndexState, head: str) -> str | _Outcome:
    """The boundary without a watcher, when P stood for a copy at the last one: `git status`
    on P says what `git add -A` would change, and only that is staged (``_stage_locked``).

    git's untracked cache is what makes this cheaper than `git add -A` (which never uses it):
    status re-reads only the directories whose stat data changed since P was written, not every
    directory of the tree; both lstat every tracked file. What status lists is what `git add -A`
    stages, path for path, under the same rules and the same stat cache: tracked files whose
    content, mode or type changed (ignored or not), deleted ones, intent-to-add entries, and
    untracked files not ignored. What it cannot say so plainly - a submodule (P has none when this
    runs), an unmerged entry, a new embedded repository, a rule file - is a doubt: `git add -A`.
    """
    env = _git_env(ws, paths, True)
    head_file = paths.gitdir / "HEAD"
    try:
        if head_file.read_bytes().strip() != head.encode():
            atomic_write_bytes(head_file, f"{head}\n".encode(), durable=False)
    except OSError:
        return _DOUBT
    started = time.time_ns()
    done = run_git(ws.workdir, _on_p(_STATUS, True, untracked_cache=True),
                   env={**env, "GIT_OPTIONAL_LOCKS": "1"}, check=False)
    if not _tracked_ignored_still_hold(ws, st):
        return _RESEED
    # The sources are read while update-index and write-tree run (one core each; status keeps
    # both busy), and must hold before anything is saved: a change seen then re-seeds, and one
    # made later shows up next time, as with the check made during `git add -A`. The thread
    # touches the file system only: the repository object is this thread's.
    with ThreadPoolExecutor(max_workers=1) as pool:
        holding = pool.submit(_files_still_hold, ws, st)
        listed = _status_changes(done.stdout) if done.returncode == 0 else None
        if listed is None:
            return _DOUBT if holding.result() else _RESEED
        changed, untracked = listed
        # status wrote P (its stat data, its untracked cache): same entries, P's new identity.
        now = st.model_copy(update={"private_index": index_sig(paths.index_file)})
        try:
            if not changed:
                if not holding.result():
                    return _RESEED
                staged: str | None = st.tree
                if now != st:
                    _save(paths.state, now)
            else:
                staged = _stage_locked(ws, paths, now, sorted(changed), listed_untracked=untracked,
                                       confirm=holding.result)
        except GitCommandFailed:
            staged = None
        if staged is None:
            # sources changed: what was staged into P goes with it (re-seed); else the full add
            # decides, and drops the untracked cache: nothing to back-date either way
            return _DOUBT if holding.result() else _RESEED
    _back_date(paths.index_file, started)
    return staged


def _back_date(index: Path, status_started: int) -> None:
    """Give P the time status started (less a margin), not the time git last wrote it.

    The untracked cache keeps a directory's listing while the directory's stat data is what
    status saw - taken BEFORE it read the directory - unless that is "racy": not older than the
    index file. A file created in the directory after status read it, within the same timestamp
    tick as the change before (git compares whole seconds unless built with USE_NSEC), leaves
    the stat data as it was; if P was then written in a later tick - by status itself, or by the
    update-index and write-tree that follow it here - the listing would stand without that file,
    for good. P's time set back to before status looked makes every directory changed since
    racy, so the next status reads it again. An older index time only ever makes git check more
    (file entries alike: a racily clean entry is re-hashed), never less. That is also why every
    other command that writes P drops the cache: they would date P after status looked.
    """
    stamp = status_started - _RACY_NS
    try:
        os.utime(index, ns=(stamp, stamp))
    except OSError:
        index.unlink(missing_ok=True)  # untrustworthy cache: the next boundary re-seeds


# Reported names that change how OTHER paths are staged: the watcher cannot say which.
_DOUBT_NAMES = frozenset({".gitignore", ".gitattributes", ".git"})
# update-index under the same rules as ADD_ALL's `git add` (no hooks or fsmonitor; P's split mode)
_UPDATE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "update-index"]
_UPDATE_INDEX = [*_UPDATE, "--add", "--remove", "--replace", "-z", "--stdin"]
_FORCE_REMOVE = [*_UPDATE, "--force-remove", "-z", "--stdin"]


def _nul(paths: Iterable[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _split_nul(out: bytes) -> list[str]:
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def _expand(ws: Workspace, reported: list[str]) -> tuple[set[str], list[str]] | None:
    """(every file path to re-stage, the directory prefixes whose old index entries may have
    gone); None when a reported directory holds a ``.git`` (it would become a gitlink)."""
    root = os.path.join(ws.workdir, "")
    files: set[str] = set()
    prefixes: list[str] = []
    for rel in reported:
        is_dir = os.path.isdir(root + rel) and not os.path.islink(root + rel)
        if not is_dir:
            files.add(rel)
            if not os.path.exists(root + rel) or os.path.islink(root + rel):
                prefixes.append(rel + "/")  # a directory removed, renamed away or replaced, maybe
            continue
        prefixes.append(rel + "/")  # it may have replaced a file, or lost files staged before
        stack = [rel]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(root + d) as it:
                    for e in it:
                        if e.name == ".git":
                            return None
                        sub = f"{d}/{e.name}"
                        if e.is_dir(follow_symlinks=False):
                            stack.append(sub)
                        else:
                            files.add(sub)
            except OSError:
                continue
    return files, prefixes


def stage_reported_paths(ws: Workspace, run_id: str, reported: Iterable[str]) -> str | None:
    """The tree `snapshot_with_private_index` would give, staging only ``reported`` into P:
    every path the caller's watcher saw change since the last boundary written through P
    (files, and directories created, removed or renamed, whole). None: not trustworthy here
    (see the module doc); the caller must take the full boundary instead."""
    paths = _paths(ws, run_id)
    wanted = sorted(set(reported))
    for rel in wanted:
        parts = rel.split("/")
        if _DOUBT_NAMES.intersection(parts):
            return None
    with file_lock(paths.lock):
        st = _load(paths.state)
        if st is None or not st.trusted:
            return None
        if index_sig(ws.user_index) != st.user_index or index_sig(paths.index_file) != st.private_index:
            return None
        try:
            return _stage_locked(ws, paths, st, wanted)
        except GitCommandFailed:
            return None  # e.g. a split P whose shared index is gone: the full boundary re-seeds


def _stage_locked(ws: Workspace, paths: _Paths, st: PrivateIndexState, wanted: list[str],
                  listed_untracked: set[str] | None = None,
                  confirm: Callable[[], bool] | None = None) -> str | None:
    """``stage_reported_paths`` under P's lock, its first checks passed.

    ``listed_untracked``: ``wanted`` comes from `git status` on P (``_snapshot_by_status``),
    not from a watcher: every path is exact (a file P holds or one to add, never a directory to
    walk), and these are the untracked ones status found not ignored. ``confirm``: asked before
    the new state is saved; False gives None, nothing saved.
    """
    split = st.split
    by_status = listed_untracked is not None
    env = _git_env(ws, paths, split)
    root = os.path.join(str(ws.workdir), "")
    # In-tree sources (.gitignore, .gitattributes) would have been reported; the others not -
    # nor anything in the repository's .git (the watcher skips it): info/exclude, config.
    dot_git = root + ".git/"
    if not all(source_unchanged(p, sig) for p, sig in st.sources.items()
               if not p.startswith(root) or p.startswith(dot_git)):
        return None
    if any(rel == g or rel.startswith(g + "/") for rel in wanted for g in st.gitlinks):
        return None
    if not all(os.path.lexists(os.path.join(ws.workdir, g, ".git")) for g in st.gitlinks):
        return None
    if any(os.path.lexists(ws.workdir / p) and not _in_tree(ws.repo, st.tree, p) for p in st.tracked_ignored):
        return None
    if not wanted:
        return st.tree  # nothing happened: P, its tree and every source are as they were
    if listed_untracked is not None:
        # status names every file: a directory that replaced a file comes as that file (which
        # update-index then removes) and the files in it; nothing of P's hides under a prefix.
        files, prefixes = set(wanted), list[str]()
    else:
        expanded = _expand(ws, wanted)
        if expanded is None:
            return None
        files, prefixes = expanded
    if prefixes:  # what P holds under a changed directory: gone files must be removed too
        out = run_git(ws.workdir, _on_p(["ls-files", "-z", "--cached", "--", *prefixes], split, by_status),
                      env={**env, "GIT_LITERAL_PATHSPECS": "1"}).stdout
        files.update(_split_nul(out))
    # Untracked and ignored: `git add -A` leaves it out. P holds exactly the last tree, so a
    # path in it is tracked (staged whatever the rules say); only the others are asked about.
    last = ws.repo[pygit2.Oid(hex=st.tree)].peel(pygit2.Tree)

    known_tracked: dict[str, bool] = {}

    def tracked(path: str) -> bool:
        if listed_untracked is not None:
            # status listed every path: an entry of P (so of the last tree), or an untracked file
            return path not in listed_untracked
        if path not in known_tracked:
            try:  # a directory: not this path
                known_tracked[path] = bool(last[path].type != pygit2.GIT_OBJECT_TREE)
            except KeyError:
                known_tracked[path] = False
        return known_tracked[path]

    # status applied the ignore rules itself: nothing to ask about
    on_disk = [] if by_status else sorted(p for p in files if os.path.lexists(root + p) and not tracked(p))
    if on_disk:
        proc = run_git(ws.workdir, _on_p(["check-ignore", "-z", "--stdin"], split, by_status), env=env, check=False,
                       input_bytes=_nul(on_disk))
        if proc.returncode not in (0, 1):
            return None
        files.difference_update(_split_nul(proc.stdout))
    # A path below something that is no longer a real directory (a file, a symlink, nothing)
    # can only have gone: git refuses to look "beyond a symbolic link", so drop it outright.
    real_dirs: dict[str, bool] = {"": True}

    def real_dir(d: str) -> bool:
        if d not in real_dirs:
            parent = d.rpartition("/")[0]
            real_dirs[d] = real_dir(parent) and os.path.isdir(root + d) and not os.path.islink(root + d)
        return real_dirs[d]

    gone = sorted(p for p in files if not real_dir(p.rpartition("/")[0]))
    if gone:
        run_git(ws.workdir, _on_p(_FORCE_REMOVE, split, by_status), env=env, input_bytes=_nul(gone))
        files.difference_update(gone)
    # Only files of the last tree rewritten in place (none added, removed or replaced by a
    # directory): the new tree has the same directories and gitlinks, so the same sources.
    same_shape = not prefixes and not gone and all(tracked(p) and os.path.lexists(root + p) for p in files)
    if files:
        run_git(ws.workdir, _on_p(_UPDATE_INDEX, split, by_status), env=env, input_bytes=_nul(sorted(files)))
    # --missing-ok: write-tree would otherwise look up the object of every entry of every changed
    # directory (a stat per loose object: ~10,000 for 100 changed directories of a big tree). Each
    # entry is one of the last tree, whose objects existed when it was written and are reachable
    # from the run's refs since (or the user's index: P holds the user's entries only while the
    # user's index is unchanged, and git's gc keeps what it names), or was just written by the
    # update-index above. The full boundary (add, re-seed) keeps git's check.
    tree = git_out(ws.workdir, _on_p(["write-tree", "--missing-ok"], split, by_status), env=env)
    if same_shape:
        # ``dirs`` keeps the older subtree ids: ``_tree_shape`` only ever skips a subtree
        # whose id equals the recorded one, and equal ids mean the same directories below.
        new = st.model_copy(update={"private_index": index_sig(paths.index_file), "tree": tree})
        if confirm is not None and not confirm():
            return None
        _save(paths.state, new)
        return tree
    dirs, gitlinks = _tree_shape(ws.repo, tree, st.dirs, st.gitlinks)
    started = time.time_ns()
    # The sources of the new tree: unchanged ones as checked (a change in the tree would
    # have been reported, outside it was just checked); a new directory's, read now.
    sources: dict[str, Sig] = {}
    racy = False
    for p in _source_paths(ws, dirs):
        if p in st.sources:
            sources[p] = st.sources[p]
        else:
            sources[p], is_racy = source_sig(p, started)
            racy = racy or is_racy
    new = PrivateIndexState(user_index=st.user_index, private_index=index_sig(paths.index_file), tree=tree,
                            sources=sources, tracked_ignored=st.tracked_ignored, dirs=dirs, gitlinks=gitlinks,
                            trusted=not racy, split=split)
    if confirm is not None and not confirm():
        return None
    _save(paths.state, new)
    return tree
