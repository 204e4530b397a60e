"""Which remotes a push or a fetch may name: a configured remote, a URL, or a local repository path."""

from __future__ import annotations

from pathlib import Path

from gitrefs.errors import MissingRemote
from gitrefs.workspace import Workspace


def check_remote(ws: Workspace, remote: str) -> None:
    if remote in ws.repo.remotes.names():
        return
    # git resolves a relative path against the workspace (we run `git -C <workdir>`), so do we.
    if "://" in remote or (ws.workdir / Path(remote).expanduser()).is_dir():
        return
    names = [n for n in ws.repo.remotes.names() if n is not None]  # pygit2 types names Optional
    raise MissingRemote(f"no remote {remote!r} in {ws.workdir}",
                        hint=(f"configured remotes: {', '.join(names)}" if names else
                              "add one: git remote add origin URL"))
