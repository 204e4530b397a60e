"""The rewind's intent record: a killed rewind can always be finished.

``runs/<run>/rewind-intent.json`` (a versioned document, written atomically and durably) holds
everything a rewind decided before it changed anything: the pivot and its files anchor, the
rewound checkpoint, the report fields, and the restore's plan (``FilesPlan``: every write and
removal with its content object and the bank holding the pre-rewind disk state, or the prepared
git revert). Its EXISTENCE is the mark: resume refuses the run while it exists, inspect shows
it, and the next ``iterion rewind`` finishes it before anything else.

A rewind's steps (``iterion.rewind.rewind``):

0. check, reading only: status, checkpoint, pivot, event log, run directory, workspace, and that
   every object the restore may read is present (done once before taking the lock, so a refusal
   writes nothing, and again under it);
1. claim the run document (``explicit_resume_required``, a compare-and-swap);
2. plan and bank: the disk state the restore will change is recorded (a bank snapshot / ref),
   the objects every planned write reads are verified readable;
3. write the intent record - THE COMMIT POINT;
4. apply the plan to the workspace (per path an atomic rename or an unlink; one sync at the end);
5. write the rewound checkpoint (atomic);
6. park the run document (compare-and-swap);
7. append ``run_rewound`` carrying the intent's id (fsynced);
8. delete the intent record (unlink, directory fsynced).

What holds after a SIGKILL between any two steps (or inside 4, between two file operations):

* killed before 3 (no intent): the workspace, the checkpoint and the run's status are exactly
  as before the rewind (only step 4 writes the workspace; 5 and 6 come later). Left behind at
  most: a bank nobody references and the explicit-resume marker (both harmless). The rewind did
  not happen; run it again.
* killed from 3 to 8 (intent present): each planned path holds either its pre-rewind content
  (kept in the bank) or its target content (verified present in step 2), possibly next to the
  temp file of a killed write; the checkpoint is the old or the rewound one; the document is
  the claimed or the parked one; the event is there at most once. ``iterion rewind --run-id R``
  runs steps 4-8 again from the record, and each is idempotent: a write replaces the path with
  the recorded content and a removal of an absent path is a no-op (temp leftovers are removed
  first), the checkpoint written is the recorded one, parking a parked run changes nothing, the
  event is appended only if none carries the intent's id. So it converges on the tree, the
  checkpoint and the document an uninterrupted rewind produces.
* killed after 8: the rewind is complete.

Why it holds: nothing is changed before the decision is durable, and every step after it is a
function of the record alone, never of the state the killed attempt left.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from pydantic import Field, ValidationError

from gitrefs.persist import FormatVersionError, VersionedModel, atomic_write_bytes, fsync_dir
from gitrefs.persist.errors import ErrorKind
from iterion.rewind.errors import RewindError
from iterion.rewind.files_plan import FilesPlan
from iterion.rewind.marker import has_intent as has_intent  # its home; importers here keep working
from iterion.store import Store
from iterion.store.timeutil import utcnow


class RewindIntent(VersionedModel):
    """A committed, unfinished rewind (see the module docstring)."""

    FORMAT_VERSION = 1
    id: str = Field(default_factory=lambda: secrets.token_hex(8))
    run_id: str
    started_at: datetime = Field(default_factory=utcnow)
    asked: str | None = None           # the node named with --node (None: --auto)
    auto: bool = False
    pivot: str                         # after promotion out of a fan-out body
    iteration: int                     # the pivot's execution undone: anchor pre:<pivot>:<iteration>
    anchor: str
    scope: str                         # produced | full | none
    mechanism: str                     # workspacetrack | gitrefs
    workspace: str | None = None
    protected: list[str] = Field(default_factory=list)
    from_node: str | None = None
    replay_iteration: int = 0
    promoted_from: str | None = None
    dropped_nodes: list[str] = Field(default_factory=list)
    dropped_set: list[str] = Field(default_factory=list)
    tombstoned_artifacts: dict[str, list[int]] = Field(default_factory=dict)
    orphaned_child_runs: dict[str, str] = Field(default_factory=dict)
    auto_report: dict[str, Any] | None = None
    checkpoint: dict[str, Any]          # the rewound checkpoint, written as is in step 5
    files: FilesPlan | None = None      # None: the restore changes no file (scope none, nothing to do)
    # the checkpoint and run-document fields before the rewind, which `rewind --undo` puts back
    # (iterion/rewind/undo.py); None in a record written before --undo existed (read as is)
    before: dict[str, Any] | None = None

    def planned_operations(self) -> int:
        if self.files is None:
            return 0
        if self.files.tracked is not None:
            return len(self.files.tracked.actions)
        return len(self.files.in_scope)

    def describe(self) -> str:
        """One line for inspect."""
        ops = self.planned_operations()
        bank = ""
        if self.files is not None and self.files.tracked is not None and self.files.tracked.bank:
            bank = f", pre-rewind state banked as {self.files.tracked.bank}"
        elif self.files is not None and self.files.revert is not None:
            bank = f", pre-rewind state banked as {self.files.revert.bank.get('ref')}"
        return (f"rewind to {self.anchor} (scope {self.scope}, {ops} file operation(s) planned{bank}) "
                f"started {self.started_at:%Y-%m-%d %H:%M:%S} UTC and did not finish; "
                f"finish it with `iterion rewind --run-id {self.run_id}`")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "anchor": self.anchor, "pivot": self.pivot, "scope": self.scope,
                "mechanism": self.mechanism, "started_at": self.started_at.isoformat(),
                "planned_operations": self.planned_operations(),
                "finish_with": f"iterion rewind --run-id {self.run_id}"}


def load_intent(store: Store, run_id: str) -> RewindIntent | None:
    """The run's unfinished rewind, None if there is none; one-line error if it cannot be read."""
    path = store.paths(run_id).rewind_intent
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RewindError(f"the intent record {path} of an interrupted rewind cannot be read "
                          f"({exc.strerror or exc})", hint="repair the run store, then retry", exit_code=ErrorKind.BAD_INPUT) from None
    try:
        return RewindIntent.model_validate_json(data)
    except (ValidationError, FormatVersionError, ValueError) as exc:
        detail = str(exc).splitlines()[0]
        raise RewindError(f"the intent record {path} of an interrupted rewind is unreadable ({detail})",
                          hint="upgrade iterion if it was written by a newer one; otherwise the rewind "
                               "cannot be finished automatically", exit_code=ErrorKind.BAD_INPUT) from None


def write_intent(store: Store, intent: RewindIntent) -> None:
    """Step 3, the commit point: atomic and durable before any file is touched."""
    atomic_write_bytes(store.paths(intent.run_id).rewind_intent, intent.model_dump_json().encode("utf-8") + b"\n")


def clear_intent(store: Store, run_id: str) -> None:
    """Step 8: the rewind is complete."""
    path = store.paths(run_id).rewind_intent
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


def inspect_view(store: Store, run_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """(JSON, one text line) describing the run's interrupted rewind for ``inspect``; never raises."""
    if not has_intent(store, run_id):
        return None, None
    try:
        intent = load_intent(store, run_id)
    except RewindError as exc:
        line = (f"interrupted rewind: its record cannot be read ({exc.message}); "
                f"resume is refused until it is repaired")
        return {"readable": False, "error": exc.message}, line
    if intent is None:
        return None, None
    return intent.to_json(), f"interrupted rewind: {intent.describe()}"
