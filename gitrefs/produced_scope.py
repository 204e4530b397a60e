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
from itertools import pairwise

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

    intervals = _intervals(chain, start, changed_paths)
    scope: set[str] = set()
    for iv in intervals:
        if not iv.excluded:
            scope |= iv.paths
    return ProducedScope(pivot=pivot, paths=frozenset(scope), intervals=intervals)


def _intervals(chain: Sequence[ChainEntry], start: int, changed_paths: ChangedPaths) -> tuple[ScopeInterval, ...]:
    """The intervals between consecutive boundaries from ``chain[start]`` on, idle ones marked."""
    cache: dict[tuple[str, str], frozenset[str]] = {}
    idle = _idle_before(chain, start)
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
        if b.label.kind.opens_idle_interval:
            idle = True
        elif b.label.kind.closes_idle_interval:
            idle = False
    return tuple(intervals)


def recorded_paths(chain: Sequence[ChainEntry], changed_paths: ChangedPaths, *,
                   counts: Callable[[ChainEntry, ChainEntry], bool] | None = None) -> frozenset[str]:
    """Every path a run changed in its OWN recorded intervals, over its whole chain.

    The same intervals ``produced_scope`` counts (idle ``pause:``/``fail:`` -> ``resume:``
    intervals excluded: nothing of the run executed there), from the first boundary on, however
    often a label repeats; ``counts(start, end)`` narrows them further (e.g. to intervals ending
    after some moment) and is asked before ``changed_paths``, so an interval it rejects costs
    no diff.
    """
    out: set[str] = set()
    idle = False
    for a, b in pairwise(chain):
        if a.label.kind.opens_idle_interval:
            idle = True
        elif a.label.kind.closes_idle_interval:
            idle = False
        if not idle and a.state != b.state and (counts is None or counts(a, b)):
            out |= set(changed_paths(a.state, b.state))
    return frozenset(out)


def other_runs_paths(scope: Iterable[str], others: Iterable[tuple[str, frozenset[str]]]) -> dict[str, str]:
    """The paths of ``scope`` that another run of the same workspace produced in its own recorded
    intervals: path -> that run's id (the last of ``others`` that produced it; pass them oldest
    first). A rewind's produced scope leaves these in place: restoring them would undo another
    run's work."""
    wanted = set(scope)
    out: dict[str, str] = {}
    for run_id, paths in others:
        for p in paths & wanted:
            out[p] = run_id
    return out
