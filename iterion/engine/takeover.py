"""The takeover boundary: what a process records when it takes over a run whose process died.

A run killed mid-node (SIGKILL, OOM, power loss) writes nothing on its way out: no ``fail:``
boundary, no status. Whoever takes it over - ``iterion resume`` of a provably dead owner,
``--force-stale``, ``iterion reconcile`` and the start-up orphan sweep, ``iterion cancel`` - first
records the workspace as it stands under ``takeover:<restart node>:<iteration>`` (the vocabulary
is in ``gitrefs.boundary``). Everything that changed between the run's previous boundary and
that one is unattributable: the dead node's writes and a person's edits made since look the
same. A later rewind restores those paths like any other (the node's debris must not survive
its replay) but lists each one it writes or removes in ``files.overwritten`` and keeps its
content in the bank (``iterion.rewind.files``). The boundary also opens an idle interval that
the next ``resume:`` closes, so edits made after the takeover are the person's, as after a
``fail:``.

``run_taken_over`` lands on the timeline with the boundary, how the run was taken over, the proof
that its owner was gone, and the unattributable paths.

Before the boundary, the groups of processes the dead run left recorded in its document
(``RunDoc.children``) and that are still alive are ended (``iterion.engine.children``): the
takeover's boundary, and the person's interval it opens, come after the run's last process.

Crash safety: the boundary is written before the taker changes the run's status. A taker that
dies in between leaves the run ``running`` with one more boundary; the next takeover writes
another, and the interval between the two is idle (person-owned), which is what it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from iterion.engine.children import end_recorded_children
from iterion.engine.versioning import Versioning, open_run_versioning
from iterion.store import Checkpoint, RunDoc, Store
from iterion.store import events as ev

# how a run was taken over (the ``how`` of run_taken_over)
BY_RESUME = "resume"            # `iterion resume` of a run whose owner is provably dead
BY_FORCE_STALE = "force_stale"  # `iterion resume --force-stale` past the staleness guard
BY_PROMOTION = "promotion"      # `iterion reconcile` / the start-up sweep of run, resume, inspect, rewind
BY_CANCEL = "cancel"            # `iterion cancel` of a run no process executes


@dataclass
class Takeover:
    how: str
    label: str | None                 # None: nothing recorded (see ``warning``)
    state: str | None = None          # the commit / snapshot id recorded
    mechanism: str | None = None
    unattributable: list[str] = field(default_factory=list)
    warning: str | None = None
    ended: list[dict[str, Any]] = field(default_factory=list)  # the run's process groups it ended

    def payload(self, proof: str) -> dict[str, Any]:
        return {"how": self.how, "label": self.label, "state": self.state, "mechanism": self.mechanism,
                "unattributable": self.unattributable, "proof": proof,
                **({"ended_processes": self.ended} if self.ended else {}),
                **({"warning": self.warning} if self.warning else {})}


def takeover_label(cp: Checkpoint | None) -> BoundaryLabel | None:
    """``takeover:<restart node>:<restart iteration>``, or None without a usable checkpoint."""
    if cp is None or not cp.restart_node:
        return None
    try:
        return BoundaryLabel(BoundaryKind.TAKEOVER, cp.restart_node, cp.restart_iteration)
    except ValueError:
        return None


def mark_takeover(versioning: Versioning, label: BoundaryLabel, how: str) -> Takeover:
    """Write the boundary through ``versioning``; the paths changed since the previous boundary
    are the unattributable ones."""
    chain = versioning.chain()
    mark = versioning.mark(label)
    paths = versioning.changed_paths(chain[-1].state, mark.state) if chain else set()
    return Takeover(how, str(label), mark.state, versioning.mechanism, sorted(paths))


def record_takeover(store: Store, doc: RunDoc, cp: Checkpoint | None, *, how: str, proof: str,
                    versioning: Versioning | None = None) -> Takeover:
    """Mark the takeover boundary (through ``versioning`` when the caller has it open) and append
    ``run_taken_over``.

    Given ``versioning``, a failure to write the boundary propagates (the caller is about to
    execute through it anyway). Without it, this is best effort: a takeover is never blocked by
    a workspace that cannot be versioned any more, but the event says what was not recorded.
    """
    ended = end_recorded_children(store, doc)  # first: nothing of the run runs past the boundary
    label = takeover_label(cp)
    if label is None:
        result = Takeover(how, None, warning="no checkpoint to anchor a takeover boundary on: "
                                              "nothing of this run can be rewound")
    elif versioning is not None:
        result = mark_takeover(versioning, label, how)
    else:
        result = _mark_best_effort(store, doc, label, how)
    result.ended = ended
    store.events(doc.id).append(ev.RUN_TAKEN_OVER, node=label.node if label else None,
                                iteration=label.iteration if label else None, payload=result.payload(proof))
    return result


def _mark_best_effort(store: Store, doc: RunDoc, label: BoundaryLabel, how: str) -> Takeover:
    if not doc.workspace_dir:
        return Takeover(how, None, warning="the run records no workspace: nothing to record")
    if doc.worktree is not None and doc.worktree.released:
        return Takeover(how, None, warning="the run's worktree was released: no workspace to record")
    # a worktree not created yet: the boundary records the base tree (GitVersioning, lazy creation)
    try:
        versioning = open_run_versioning(store, doc, start=False, watch=False)
    except Exception as exc:  # noqa: BLE001 - reported on the timeline, never blocks the takeover
        return Takeover(how, None, warning=f"the takeover boundary {label} could not be written: {exc}")
    try:
        return mark_takeover(versioning, label, how)
    except Exception as exc:  # noqa: BLE001 - same
        return Takeover(how, None, warning=f"the takeover boundary {label} could not be written: {exc}")
    finally:
        versioning.close()
