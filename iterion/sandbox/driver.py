"""The driver seam: what a sandbox must provide, independent of how (bubblewrap today; a container
driver can be added beside it).

A ``Plan`` says what one process may see: the host read-only, a private ``/tmp``, a list of
``Op`` (binds, tmpfs, read-only remounts) and whether it keeps the host network. A driver turns a
plan and an argv into the argv that runs it inside the sandbox (``wrap``), says whether it can work
here (``unavailable``) and proves it by starting one (``trial``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

OpKind = Literal["bind", "ro-bind", "tmpfs", "remount-ro"]


@dataclass(frozen=True)
class Op:
    kind: OpKind
    path: Path          # the destination (binds use the same path as source)

    @property
    def depth(self) -> int:
        return len(self.path.parts)


@dataclass(frozen=True)
class Plan:
    workspace: Path
    ops: tuple[Op, ...] = ()
    network: bool = False
    env: tuple[tuple[str, str], ...] = ()
    ro_files: tuple[Path, ...] = field(default=())  # a script file outside the workspace, bound read-only

    def ordered(self) -> list[Op]:
        """Mounts parent-first (a bind on a directory covers what was mounted under it before),
        ties in plan order; read-only remounts last (mount points under them are made first)."""
        mounts = [o for o in self.ops if o.kind != "remount-ro"]
        mounts += [Op("ro-bind", f) for f in self.ro_files]
        ordered = sorted(enumerate(mounts), key=lambda t: (t[1].depth, t[0]))
        return [o for _, o in ordered] + [o for o in self.ops if o.kind == "remount-ro"]


class Driver(Protocol):
    name: str

    def unavailable(self) -> str | None:
        """Why this driver cannot run here (a one-line reason), or None."""

    def trial(self, plan: Plan) -> str | None:
        """Start one sandbox as ``plan`` says, running ``true``; why it failed, or None."""

    def wrap(self, argv: list[str], plan: Plan) -> list[str]:
        """``argv`` run inside a sandbox as ``plan`` says."""

    def setup_failed(self, exit_code: int, stderr: str) -> str | None:
        """The driver's own start-up error when a wrapped process ended with this status and
        stderr (the command never ran), else None."""


class NoSandbox:
    """``sandbox: none``: the argv as it is."""

    name = "none"

    def unavailable(self) -> str | None:
        return None

    def trial(self, plan: Plan) -> str | None:
        return None

    def wrap(self, argv: list[str], plan: Plan) -> list[str]:
        return list(argv)

    def setup_failed(self, exit_code: int, stderr: str) -> str | None:
        return None
