"""The boundary vocabulary, shared by gitrefs (worktree runs) and workspacetrack (in-place runs).

A boundary is a recorded workspace state labelled ``kind:node:iteration``:

* ``pre``    - the node starts; an ALIAS of the previous boundary's state (nothing touched the
               tree in between), so it costs no walk.
* ``nodes``  - the node finished; holds that node's own output.
* ``pause``  - the node parked on a human gate.
* ``fail``   - the node's execution did not complete (failure, interruption, cancel).
* ``resume`` - the run picked back up into a node that already has a ``pre``.
* ``takeover`` - the run's process died (SIGKILL, power loss: nothing was written on the way
               out) and another process took the run over (``resume`` of a provably dead owner,
               ``--force-stale``, ``reconcile`` / start-up orphan promotion, ``cancel``). It
               records the workspace at that moment; ``node:iteration`` is the checkpoint's
               restart point. What changed between the run's previous boundary and this one is
               UNATTRIBUTABLE: the dead node's writes and a person's edits leave identical
               evidence. A rewind still restores those paths (the node's debris must not survive
               its replay), but names every one it restores in ``files.overwritten`` and keeps
               its content in the bank, instead of guessing.

``pause``/``fail``/``takeover`` open, and ``resume`` closes, the one interval in which nothing
of the run executes; the produced-scope algorithm excludes it (see ``produced_scope``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gitrefs.ids import validate_id


class BoundaryKind(StrEnum):
    PRE = "pre"
    NODES = "nodes"
    PAUSE = "pause"
    FAIL = "fail"
    RESUME = "resume"
    TAKEOVER = "takeover"

    @property
    def is_alias(self) -> bool:
        """A ``pre`` boundary records no new state of its own."""
        return self is BoundaryKind.PRE

    @property
    def opens_idle_interval(self) -> bool:
        """After this boundary nothing of the run executes until the next ``resume``."""
        return self in (BoundaryKind.PAUSE, BoundaryKind.FAIL, BoundaryKind.TAKEOVER)

    @property
    def closes_idle_interval(self) -> bool:
        return self is BoundaryKind.RESUME

    @property
    def ends_unattributable_interval(self) -> bool:
        """What changed since the previous boundary cannot be told apart (see ``takeover``)."""
        return self is BoundaryKind.TAKEOVER


# The kind under which the state at the instant of a rewind is banked. Not a boundary: banks
# are never part of the chain, so they never widen a produced scope.
BANK_KIND = "rewind"


@dataclass(frozen=True, order=True)
class BoundaryLabel:
    kind: BoundaryKind
    node: str
    iteration: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", BoundaryKind(self.kind))
        validate_id(self.node, "node id")
        if not isinstance(self.iteration, int) or self.iteration < 0:
            raise ValueError(f"iteration must be a non-negative integer, got {self.iteration!r}")

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.node}:{self.iteration}"

    @classmethod
    def parse(cls, text: str) -> BoundaryLabel:
        """Parse ``kind:node:iteration`` (node ids cannot contain ':' - see ids.validate_id)."""
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(f"boundary label {text!r} is not of the form kind:node:iteration")
        kind, node, it = parts
        try:
            bkind = BoundaryKind(kind)
        except ValueError:
            known = ", ".join(k.value for k in BoundaryKind)
            raise ValueError(f"boundary label {text!r}: unknown kind {kind!r} (one of {known})") from None
        if not it.isdigit():
            raise ValueError(f"boundary label {text!r}: iteration {it!r} is not a non-negative integer")
        return cls(bkind, node, int(it))

    def with_kind(self, kind: BoundaryKind) -> BoundaryLabel:
        return BoundaryLabel(kind, self.node, self.iteration)
