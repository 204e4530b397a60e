"""Snapshot: the working tree as `git add -A` would record it, as a tree, touching nothing.

The rule "what `git add -A` records" has one authority - git - so this module asks git itself,
against a throw-away COPY of the user's index (GIT_INDEX_FILE). Consequences, all by design:

* ignore rules at every level, .git/info/exclude, core.excludesFile, exec bits, symlinks,
  deletions, untracked files, submodules recorded as gitlinks (never descended), clean filters:
  exactly git's semantics, no re-implementation to drift;
* the copy carries git's stat cache, so files unchanged since the user's last index write are
  not re-hashed (the speed of a warm `git add -A`);
* the copy starts from the user's index every time, so a later .gitignore or `git rm --cached`
  applies exactly as it would for the user;
* `.git/index`, HEAD, branches and the stash are never written.

This module is that rule, done from scratch (``snapshot_workspace``, no run attached). A run's
boundaries give the same tree faster through ``gitrefs.private_index``, which keeps its copy
between boundaries and knows when it must start again from the user's index.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from gitrefs.gitcli import git_out
from gitrefs.workspace import Workspace

# No hooks (post-index-change would fire on the scratch index), no fsmonitor daemon start-up, and
# never a split index (a copy must stand alone; gitrefs.private_index splits its own). No pathspec:
# run at the top of the worktree, `add -A` is the whole tree, and "." would only add a pathspec
# match per entry.
ADD_ALL = ["-c", "advice.addEmbeddedRepo=false", "-c", "core.fsmonitor=false",
           "-c", "core.hooksPath=/dev/null", "-c", "core.splitIndex=false", "add", "-A"]


def snapshot_tree(ws: Workspace, scratch_dir: Path) -> str:
    """Return the hex id of the tree `git add -A && git write-tree` would produce right now.

    ``scratch_dir`` holds the temporary index copy (same filesystem as the git dir, private to
    iterion); it is removed again before returning.
    """
    scratch_dir.mkdir(parents=True, exist_ok=True)
    tmp_index = scratch_dir / f"index.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        if ws.user_index.is_file():
            # copy2 keeps the mtime: git's racy-entry check compares entry times to it, and a
            # newer copy would make racily-clean entries look trustworthy.
            shutil.copy2(ws.user_index, tmp_index)
        env = {"GIT_INDEX_FILE": str(tmp_index)}
        git_out(ws.workdir, ADD_ALL, env=env)
        return git_out(ws.workdir, ["write-tree"], env=env)
    finally:
        tmp_index.unlink(missing_ok=True)
        Path(f"{tmp_index}.lock").unlink(missing_ok=True)


def snapshot_workspace(ws: Workspace) -> str:
    """Snapshot with no run attached (the scratch index lives under ``<gitdir>/iterion/tmp``).

    A run's boundaries use ``gitrefs.private_index`` instead: same tree, kept stat cache.
    """
    return snapshot_tree(ws, ws.gitdir / "iterion" / "tmp")
