"""Produced scope: which paths a run is recorded to have changed from a pivot onwards.

Written once, backend-agnostic: it takes a chain of labelled states (commit ids for gitrefs,
snapshot ids for workspacetrack) and a function giving the paths changed between two states.

The scope is the UNION of the changes between each pair of consecutive boundaries from the
pivot (``pre:<node>:<iter>``) to the run's last boundary - not a diff of the two endpoints: a
file one node rewrote and a later node put back is identical at both ends yet is demonstrably
a file this run writes to.

Excluded: every interval that a ``pause:``, ``fail:`` or ``takeover:`` boundary opens and the next
``resume:`` closes. Nothing of the run executes there, so whatever changed came from a person.
Included, but reported by a rewind that restores its paths: the interval a ``takeover:`` boundary
ENDS (``iterion.rewind.files.unattributable_paths``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from gitrefs.boundary import BoundaryLabel


@dataclass(frozen=True)
class ChainEntry:
    """One boundary of a run's chain: its label and the opaque id of the state it recorded."""

    label: BoundaryLabel
    state: str


@dataclass(frozen=True)
class ScopeInterval:
    start: ChainEntry
    end: ChainEntry
    excluded: bool
    paths: frozenset[str]


@dataclass(frozen=True)
class ProducedScope:
    pivot: BoundaryLabel
    paths: frozenset[str]
    intervals: tuple[ScopeInterval, ...] = field(default=())

    @property
    def empty(self) -> bool:
        return not self.paths

    @property
    def last_state(self) -> str | None:
        """State id of the run's last boundary (the end of the recorded range)."""
        return self.intervals[-1].end.state if self.intervals else None

    @property
    def idle_paths(self) -> frozenset[str]:
        """Paths changed only inside excluded (person-owned) intervals."""
        idle: set[str] = set()
        for iv in self.intervals:
            if iv.excluded:
                idle |= iv.paths
        return frozenset(idle - self.paths)


class PivotNotRecorded(LookupError):
    """The chain holds no boundary with the pivot's label."""


ChangedPaths = Callable[[str, str], Iterable[str]]


def _idle_before(chain: Sequence[ChainEntry], stop: int) -> bool:
    """Whether an idle interval is open just after ``chain[stop]``."""
    idle = False
    for entry in chain[: stop + 1]:
        if entry.label.kind.opens_idle_interval:
            idle = True
        elif entry.label.kind.closes_idle_interval:
            idle = False
    return idle


def produced_scope(chain: Sequence[ChainEntry], pivot: BoundaryLabel, changed_paths: ChangedPaths) -> ProducedScope:
    """Union of changed paths between consecutive boundaries from ``pivot`` to the chain's end.

    ``chain`` is in chain order (oldest first). When the pivot label occurs more than once (a
    node replayed after an earlier rewind), the latest occurrence is the one that counts.
    ``changed_paths(a, b)`` returns the paths that differ between states ``a`` and ``b``; it is
    not called for consecutive entries recording the same state (aliases).
    """
    start = None
    for i in range(len(chain) - 1, -1, -1):
        if chain[i].label == pivot:
            start = i
            break
    if start is None:
        raise PivotNotRecorded(f"no boundary {pivot} was recorded for this run")

    cache: dict[tuple[str, str], frozenset[str]] = {}
    idle = _idle_before(chain, start)
    scope: set[str] = set()
    intervals: list[ScopeInterval] = []
    for j in range(start, len(chain) - 1):
        a, b = chain[j], chain[j + 1]
        # The interval (a, b) is person-owned when an idle interval is open after `a`; a
        # `resume` at `b` closes it only from `b` onwards.
        excluded = idle
        if a.state == b.state:
            paths: frozenset[str] = frozenset()
        else:
            key = (a.state, b.state)
            if key not in cache:
                cache[key] = frozenset(changed_paths(a.state, b.state))
            paths = cache[key]
        intervals.append(ScopeInterval(a, b, excluded, paths))
        if not excluded:
            scope |= paths
        if b.label.kind.opens_idle_interval:
            idle = True
        elif b.label.kind.closes_idle_interval:
            idle = False
    return ProducedScope(pivot=pivot, paths=frozenset(scope), intervals=tuple(intervals))
