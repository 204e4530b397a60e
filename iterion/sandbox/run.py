"""One run's sandboxes: which node runs in one, and the argv that puts a process inside it.

Roles, because whose commands they are decides what they may write:

- ``TOOL``: a tool node's command or script, written by the workflow's author. The workspace and
  its git directories are writable (``git commit`` in a tool keeps working, worktree runs too:
  the gitdir under the main repository's ``.git/worktrees/`` and the common dir are bound).
- ``AGENT_BASH``: the claw agent's ``bash`` tool; ``AGENT_CLI``: an agent CLI backend (claude,
  codex). The model's commands, not the author's: the git directories are bound read-only unless
  the sandbox block mounts ``.git`` writable or a permission rule explicitly allows
  ``write_file(.git/...)``. An agent CLI keeps the host network (it talks to its provider) and
  its own state directory (``~/.claude``, ``~/.codex``) writable.

Everywhere: the run store is hidden (an empty read-only tmpfs over it) wherever it would be
visible, so nothing inside a sandbox reads the store's tokens or writes its records.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from iterion.sandbox.bubblewrap import BubblewrapDriver
from iterion.sandbox.config import NodeSandbox, check_flag, node_sandboxes
from iterion.sandbox.driver import Driver, NoSandbox, Op, Plan
from iterion.sandbox.errors import INSTALL_HINT, SandboxSetupError, SandboxUnavailable

# an agent CLI's own state, written on every call (sessions, config): kept writable when present
CLI_STATE: dict[str, tuple[str, ...]] = {
    "claude_code": ("~/.claude", "~/.claude.json", "~/.config/claude"),
    "codex": ("~/.codex",),
}


class Role(StrEnum):
    TOOL = "tool"
    AGENT_BASH = "agent_bash"
    AGENT_CLI = "agent_cli"


def default_driver() -> Driver:
    return BubblewrapDriver()


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def git_dirs(workspace: Path) -> tuple[Path, ...]:
    """The workspace's git directory and common directory (a worktree's gitdir lives under the main
    repository's ``.git/worktrees/``; its objects and refs in the common dir); () outside git."""
    try:
        p = subprocess.run(["git", "-C", str(workspace), "rev-parse", "--absolute-git-dir", "--git-common-dir"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if p.returncode != 0:
        return ()
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    dirs = [Path(os.path.realpath(workspace / ln)) for ln in lines]
    return tuple(dict.fromkeys(dirs))


@dataclass
class RunSandbox:
    """The sandboxes of one run (built at launch and at every resume: a resume starts fresh ones)."""

    workspace: Path
    store_root: Path
    flag: str | None = None
    nodes: dict[str, NodeSandbox] = field(default_factory=dict)
    workflow_scope: NodeSandbox = field(default_factory=NodeSandbox)
    driver: Driver = field(default_factory=default_driver)
    # a permission policy granting the agent writes under .git (``write_file(.git/**)`` allowed)
    agent_git_grant: Callable[[], bool] = field(default=lambda: False)
    _git: tuple[Path, ...] | None = field(default=None, init=False, repr=False)  # found once, on first use

    @classmethod
    def for_workflow(cls, workspace: Path, store_root: Path, flag: str | None, workflow_extra: Mapping[str, Any],
                     node_extras: Mapping[str, Mapping[str, Any]], driver: Driver | None = None) -> RunSandbox:
        from iterion.sandbox.config import resolve

        check_flag(flag)
        return cls(workspace=Path(os.path.realpath(workspace)), store_root=Path(os.path.realpath(store_root)),
                   flag=flag, nodes=node_sandboxes(flag, workflow_extra, node_extras),
                   workflow_scope=resolve(flag, workflow_extra.get("sandbox")),
                   driver=driver or default_driver())

    @property
    def active(self) -> bool:
        """Whether any node runs sandboxed."""
        return self.workflow_scope.active or any(s.active for s in self.nodes.values())

    def of(self, node: str | None) -> NodeSandbox:
        return self.nodes.get(node or "", self.workflow_scope) if node else self.workflow_scope

    def summary(self) -> dict[str, Any]:
        """What a run records (run document, run_started/run_resumed events)."""
        on = sorted(n for n, s in self.nodes.items() if s.active)
        return {"flag": self.flag, "mode": "auto" if self.active else "none",
                "driver": self.driver.name if self.active else "none", "nodes": on}

    # -- start-up --------------------------------------------------------------------------------
    def preflight(self) -> None:
        """Refuse, before anything runs, a sandboxed run that could not start its sandbox here."""
        if not self.active:
            return
        why = self.driver.unavailable()
        if why is not None:
            raise SandboxUnavailable(f"this workflow runs sandboxed (sandbox: auto) and {why}", hint=INSTALL_HINT)
        failed = self.driver.trial(self.plan(None, Role.TOOL))
        if failed is not None:
            raise SandboxSetupError(failed, hint="`iterion doctor` shows what is missing; or run with --sandbox none")

    # -- one process -----------------------------------------------------------------------------
    def git(self) -> tuple[Path, ...]:
        if self._git is None:
            self._git = git_dirs(self.workspace)
        return self._git

    def _is_git(self, raw: str) -> bool:
        """A ``mounts:`` entry naming the workspace's ``.git`` (a file in a worktree) or a git dir."""
        p = Path(os.path.expanduser(raw))
        full = p if p.is_absolute() else self.workspace / p
        return full == self.workspace / ".git" or Path(os.path.realpath(full)) in self.git()

    def plan(self, node: str | None, role: Role, *, backend: str | None = None,
             ro_files: Sequence[Path] = ()) -> Plan:
        box = self.of(node)
        ops: list[Op] = [Op("bind", self.workspace)]
        agent = role is not Role.TOOL
        git_rw = not agent or any(m.writable and self._is_git(m.path) for m in box.mounts) or self.agent_git_grant()
        ops += [Op("bind" if git_rw else "ro-bind", g) for g in self.git() if g.exists()]
        network = box.network
        if role is Role.AGENT_CLI:
            network = True
            for raw in CLI_STATE.get(backend or "", ()):
                p = Path(os.path.expanduser(raw))
                if p.exists():
                    ops.append(Op("bind", Path(os.path.realpath(p))))
        for m in box.mounts:
            p = Path(os.path.realpath(m.resolve(self.workspace)))
            if p.exists():
                ops.append(Op("bind" if m.writable else "ro-bind", p))
        bound = [o.path for o in ops if o.kind in ("bind", "ro-bind")]
        store = self.store_root
        if not _under(store, Path("/tmp")) or any(_under(store, b) for b in bound):
            ops += [Op("tmpfs", store), Op("remount-ro", store)]
        return Plan(workspace=self.workspace, ops=tuple(ops), network=network, env=box.env,
                    ro_files=tuple(Path(os.path.realpath(f)) for f in ro_files))

    def wrap(self, argv: list[str], node: str | None, role: Role, *, backend: str | None = None,
             ro_files: Sequence[Path] = ()) -> list[str]:
        """``argv`` as the node's sandbox runs it (unchanged when the node is not sandboxed)."""
        if not self.of(node).active:
            return list(argv)
        return self.driver.wrap(argv, self.plan(node, role, backend=backend, ro_files=ro_files))

    def setup_failed(self, node: str | None, exit_code: int, stderr: str) -> str | None:
        if not self.of(node).active:
            return None
        return self.driver.setup_failed(exit_code, stderr)


def unsandboxed(workspace: Path, store_root: Path) -> RunSandbox:
    return RunSandbox(workspace=workspace, store_root=store_root, driver=NoSandbox())
