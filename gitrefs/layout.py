"""Where a run's refs live: the one ref layout every writer and reader uses.

    refs/iterion/runs/<run>/base                       the commit the run started from (absent: unborn)
    refs/iterion/runs/<run>/head                       the chain head: the run's latest boundary commit
    refs/iterion/runs/<run>/<kind>/<node>/<iter>       kind in pre|nodes|pause|fail|resume|takeover
    refs/iterion/runs/<run>/rewind/<node>/<seq>        a bank taken when rewinding to <node>
    refs/iterion/runs/<run>/checkpoints/<seq>          a pushed workspace checkpoint (remote side)

Run and node ids are single ref components, validated by ``gitrefs.ids.validate_id``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitrefs.boundary import BANK_KIND, BoundaryKind, BoundaryLabel
from gitrefs.errors import RefLayoutError
from gitrefs.ids import validate_id

RUNS_PREFIX = "refs/iterion/runs/"
BASE = "base"
HEAD = "head"
CHECKPOINTS = "checkpoints"


def run_prefix(run_id: str) -> str:
    return f"{RUNS_PREFIX}{validate_id(run_id, 'run id')}/"


def base_ref(run_id: str) -> str:
    return run_prefix(run_id) + BASE


def head_ref(run_id: str) -> str:
    return run_prefix(run_id) + HEAD


def boundary_ref(run_id: str, label: BoundaryLabel) -> str:
    return f"{run_prefix(run_id)}{label.kind.value}/{label.node}/{label.iteration}"


def bank_ref(run_id: str, node: str, seq: int) -> str:
    return f"{run_prefix(run_id)}{BANK_KIND}/{validate_id(node, 'node id')}/{_nonneg(seq, 'bank sequence')}"


def checkpoint_ref(run_id: str, seq: int) -> str:
    return f"{run_prefix(run_id)}{CHECKPOINTS}/{_nonneg(seq, 'checkpoint sequence')}"


def _nonneg(value: int, what: str) -> int:
    if not isinstance(value, int) or value < 0:
        raise RefLayoutError(f"{what} must be a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True)
class ParsedRef:
    """A run ref decoded: ``kind`` is a BoundaryKind value, ``rewind``, ``checkpoints``, ``base`` or ``head``.

    ``number`` is the iteration (boundaries), the bank sequence (rewind) or the checkpoint
    sequence; ``node`` is None where the kind has no node.
    """

    run_id: str
    kind: str
    node: str | None = None
    number: int | None = None

    @property
    def label(self) -> BoundaryLabel | None:
        if self.kind in {k.value for k in BoundaryKind} and self.node is not None and self.number is not None:
            return BoundaryLabel(BoundaryKind(self.kind), self.node, self.number)
        return None


def parse_ref(name: str) -> ParsedRef:
    """Inverse of the builders above; raises RefLayoutError for anything else."""
    if not name.startswith(RUNS_PREFIX):
        raise RefLayoutError(f"{name!r} is not an iterion run ref (expected {RUNS_PREFIX}<run>/...)")
    parts = name[len(RUNS_PREFIX):].split("/")
    try:
        run_id = validate_id(parts[0], "run id")
        if len(parts) == 2 and parts[1] in (BASE, HEAD):
            return ParsedRef(run_id, parts[1])
        if len(parts) == 3 and parts[1] == CHECKPOINTS and parts[2].isdigit():
            return ParsedRef(run_id, CHECKPOINTS, None, int(parts[2]))
        kinds = {k.value for k in BoundaryKind} | {BANK_KIND}
        if len(parts) == 4 and parts[1] in kinds and parts[3].isdigit():
            return ParsedRef(run_id, parts[1], validate_id(parts[2], "node id"), int(parts[3]))
    except ValueError as exc:
        raise RefLayoutError(f"{name!r} is not a valid iterion run ref: {exc}") from None
    raise RefLayoutError(f"{name!r} is not a valid iterion run ref")
