"""What may have changed on disk since a run's last boundary, asked of git instead of a walk.

A restore must know the disk state of the paths it writes (to bank them and to tell a person's
edit from the run's output) and, for its report's ``left_in_place``, every path of the whole
tree that changed since the last boundary. In the process that captured that boundary with the
journal running, the journal knows; a new process (``iterion rewind`` is one) used to re-walk
the whole tree for it, which at 100,000 files cost several times ``git checkout`` of the files
restored (issue 13 point 3). For a workspace at the root of a git work tree, git's own
(C, index-driven) status gives the same answer:

``candidates`` returns a set X of paths such that every path outside X has, on disk, exactly
the state the last boundary recorded; the caller examines X (plus the paths it restores) one by
one, as a capture would (``walk.Scan.rescan``), and takes everything else from the recorded
manifest. Why every path P outside X is unchanged:

* The run's stat cache (saved by the capture of the last boundary, ``StatCacheDoc``) describes
  exactly that boundary's manifest L, and persists only the rows B that git's index I did not
  vouch for (``Capturer._beyond_index``); every other path of L had, then, the stat and the blob
  id of its index entry. The index must be byte-identical to the one that vouched (its checksum
  trailer, read before and after everything below), so those entries still hold.
* X = B + what ``git status`` reports (D: paths whose disk content or mode differs from I, and
  untracked files). P in I, not in D: git verified its disk content equals its index blob (git
  handles racily clean entries itself); and since |I| = |vouched| + |I n B| + |I n D, not in L|
  (counted below), every index entry outside D is a path of L, so P is a vouched path: its
  recorded id is that blob.
* P not in I, not in D: if P were in L it would be in B (only index entries vouch). So P is not
  recorded, and on disk it is absent or excluded by git's ignore rules. git's rules equal the
  run's frozen ones (checked: every rule file the run froze reads the same, no rule file was
  recorded or reported since that the run did not freeze, no global excludes file: status runs
  with ``core.excludesFile`` set to the null device), so the capture would exclude it too.

* git compares a file with its blob through its filters (autocrlf, attributes); the run's ids are
  of the bytes on disk. Checked as the capture checks it (``GitSource.config_is_safe``), and no
  ``.gitattributes`` may be among the changed or unvouched paths.

Any check that fails returns None and the caller falls back to the full stat walk. Nothing
here writes: ``git status`` runs with optional locks off (it never refreshes the user's index)
and with the environment scrubbed of variables that would point it at another index.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from gitrefs.gitcli import git_env
from workspacetrack.gitsource import GitSource
from workspacetrack.ignore import RULE_FILES, IgnoreRules
from workspacetrack.models import Manifest, StatCacheDoc

# Set to 0 (or false/no/off): a restore in a new process walks the whole tree, as it did before
# git's status was asked (a kill switch, and what the tests compare the two against).
STATUS_ENV = "ITERION_TRACK_GIT_STATUS"


def status_enabled() -> bool:
    return os.environ.get(STATUS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _trailer(git: GitSource) -> str | None:
    """Hex of the index's checksum trailer (its identity), None when it cannot be read."""
    try:
        with open(git.git_dir / "index", "rb") as f:
            f.seek(-20, os.SEEK_END)
            return f.read(20).hex()
    except OSError:
        return None


class GitDrift:
    """One question to git, started early (``git status`` runs while the caller reads manifests)."""

    def __init__(self, git: GitSource, doc: StatCacheDoc) -> None:
        self.git = git
        self.doc = doc
        self._proc: subprocess.Popen[bytes] | None = None
        self.refused: str | None = None  # why the walk is needed after all (for diagnostics and tests)
        self._asked = False  # git status ran and was waited for (``reported``)
        self._reported: set[str] | None = None
        self._index = _trailer(git)
        if self._index is None or self._index != doc.index or git.prefix:
            # not the index that vouched, or a workspace below the work tree's root
            self.refused = "index changed" if not git.prefix else "workspace below the work tree's root"
            return
        args = ["git", "-c", "core.fileMode=true", "-c", f"core.excludesFile={os.devnull}",
                "-c", "core.quotePath=false", "status", "--porcelain=v1", "-z", "--untracked-files=all",
                "--no-renames", "--ignore-submodules=none"]
        try:
            self._proc = subprocess.Popen(args, cwd=git.workdir, env=git_env(), stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        except OSError:
            self._proc = None
            self.refused = "git did not start"

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def reported(self) -> set[str] | None:
        """What ``git status`` reported (waiting for it), None when it failed or never ran; a
        caller reads the last boundary's entries of these paths (and of the stat cache's rows)
        for ``candidates``."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._asked = True
            try:
                out, _ = proc.communicate()
            except OSError:
                self._reported = None
            else:
                self._reported = _parse_status(out) if proc.returncode == 0 else None
        return self._reported

    def candidates(self, last_digest: str, last: Manifest, rules: IgnoreRules, workspace: Path,
                   total: int | None = None) -> set[str] | None:
        """Every path whose disk state may differ from ``last`` (None: ask a walk instead).

        ``last`` may hold only some entries (``TrackStore.read_manifest_paths``): those of every
        path ``reported`` names, of every row of the stat cache and of every ignore-rule file;
        ``total`` then says how many entries its full state has."""
        if self._proc is None and not self._asked:
            return None  # git status never ran
        doc = self.doc
        reported = self.reported()
        beyond = set(doc.rows)
        n_entries = len(last.entries) if total is None else total
        exclude = self.git.common / "info" / "exclude"
        if reported is None:
            self.refused = "git status failed"
        elif doc.manifest != last_digest or doc.total != n_entries + len(last.skipped):
            self.refused = "stat cache of another boundary"
        elif str(exclude) not in rules.recorded() and exclude.exists():
            self.refused = "git reads an exclude file the run's rules never had"
        elif not self._index_within_recorded(beyond, reported, last):
            self.refused = "the index holds a path the last boundary did not record"
        elif not _rules_unchanged(rules, workspace, last, reported):
            self.refused = "ignore rules changed"
        elif not self.git.config_is_safe() or any(p.rsplit("/", 1)[-1] == ".gitattributes" for p in reported | beyond):
            # git compares content through its filters; the run's ids are of the bytes on disk
            self.refused = "git may convert content (attributes or autocrlf)"
        elif _trailer(self.git) != self._index:
            self.refused = "the index moved while git looked"
        return None if self.refused is not None or reported is None else reported | beyond

    def _index_within_recorded(self, beyond: set[str], reported: set[str], last: Manifest) -> bool:
        """Whether every index entry is a path the last boundary recorded or one git reports
        (a tracked file the run deleted, say): |I| = vouched + |I n B| + |I n D, not in L|."""
        import pygit2

        entries, skipped = last.entries, last.skipped
        try:
            index = self.git.repo.index
            n = len(index)
            in_index = sum(1 for p in beyond if p in index)
            unrecorded = sum(1 for p in reported if p not in entries and p not in skipped and p in index)
        except (pygit2.GitError, OSError, ValueError, UnicodeError):
            return False
        return n == (self.doc.total - len(beyond)) + in_index + unrecorded


def _parse_status(out: bytes) -> set[str] | None:
    paths: set[str] = set()
    for rec in out.split(b"\0"):
        if not rec:
            continue
        if len(rec) < 4 or rec[2:3] != b" ":
            return None  # not the format asked for: trust nothing
        path = os.fsdecode(rec[3:].rstrip(b"/"))  # "dir/": an untracked nested repository
        if path:
            paths.add(path)
    return paths


def _rules_unchanged(rules: IgnoreRules, workspace: Path, last: Manifest, reported: Iterable[str]) -> bool:
    """Whether git's ignore rules are the run's frozen ones (see the module docstring)."""
    if not rules.frozen:
        return False
    frozen = rules.recorded()
    for key, text in frozen.items():
        try:
            now = Path(key).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
        except OSError:
            return False
        if now != text.splitlines():
            return False
    for p in reported:
        if p.rsplit("/", 1)[-1] in RULE_FILES:
            return False  # a rule file added, edited or removed since the last boundary
    ws = str(workspace)
    for p in last.entries:
        if p.endswith(RULE_FILES) and p.rsplit("/", 1)[-1] in RULE_FILES and f"{ws}/{p}" not in frozen:
            return False  # recorded by a boundary after the rules were frozen
    return True
