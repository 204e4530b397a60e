"""The run document (``runs/<run>/run.json``): what a run is, recorded at launch and kept current.

``version`` is the compare-and-swap counter: ``Store.save_run(doc, expected_version)`` refuses
a writer whose read is stale. The execution state lives in the checkpoint, not here.
"""

from __future__ import annotations

import os
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gitrefs.persist import VersionedModel
from iterion.budget import BudgetAsk
from iterion.store.liveness import process_start, this_host
from iterion.store.status import RunStatus, check_transition
from iterion.store.summary import RUN_DOC_FORMAT_VERSION
from iterion.store.timeutil import as_utc, utcnow

# Above this many UTF-8 bytes the unit's files are not all recorded (the main file alone is).
SOURCES_CAP_BYTES = 1024 * 1024


class WorkspaceMode(StrEnum):
    IN_PLACE = "in_place"
    WORKTREE = "worktree"


class WorktreeInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str
    branch: str
    base_commit: str
    released: bool = False  # a deliberate reclamation after an early terminal refusal
    # Lazy creation (iterion/engine/worktree.py): False until `git worktree add` completed and was
    # recorded, i.e. before the first node that needs the workspace. Documents written before
    # lazy creation made the checkout at launch: absent means True.
    created: bool = True

    @property
    def absent(self) -> bool:
        """The checkout does not exist by design (released, or not created yet)."""
        return self.released or not self.created


class OwnerInfo(BaseModel):
    """The process executing the run (the live proof is the per-run flock, not this record)."""

    model_config = ConfigDict(extra="ignore")

    pid: int
    host: str
    started: datetime
    # ``<boot id>/<pid namespace>/<start ticks>`` (iterion.store.liveness): tells the owner from a
    # later process that reused its pid. Absent in documents written before it was recorded.
    proc_start: str | None = None

    @classmethod
    def this_process(cls) -> OwnerInfo:
        return cls(pid=os.getpid(), host=this_host(), started=utcnow(), proc_start=process_start())


class ChildGroup(BaseModel):
    """A process group the run started and that may still be alive (a tool, an agent CLI, an MCP
    server): recorded when it starts, removed when it ends (``iterion.engine.children``). A
    takeover ends the groups still listed, once their leader's start time proves the pid was not
    reused (docs/technical/processes.md)."""

    model_config = ConfigDict(extra="ignore")

    pgid: int
    # ``<boot id>/<pid namespace>/<start ticks>`` of the group's leader (iterion.store.liveness)
    proc_start: str | None = None
    host: str
    what: str = ""  # e.g. "tool build", "claude_code", "mcp github": for messages
    started: datetime = Field(default_factory=utcnow)

    @field_validator("started")
    @classmethod
    def _aware_started(cls, stamp: datetime) -> datetime:
        return as_utc(stamp)


class RunDoc(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    FORMAT_VERSION: ClassVar[int] = RUN_DOC_FORMAT_VERSION  # the run list reads it too (summary.py)

    id: str
    name: str
    status: RunStatus = RunStatus.QUEUED
    workflow_name: str
    file_path: str | None = None
    bundle_path: str | None = None
    preset: str | None = None
    workflow_digest: str = ""
    workflow_source: str | None = None  # the main file's text
    workflow_sources: dict[str, str] = Field(default_factory=dict)  # every file of the unit, by path
    workflow_sources_truncated: bool = False  # over SOURCES_CAP_BYTES: workflow_sources left empty
    vars: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, Any] = Field(default_factory=dict)
    budget: BudgetAsk = Field(default_factory=BudgetAsk)
    backend: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # backend/run options (e.g. script_file)
    workspace_dir: str = ""
    workspace_mode: WorkspaceMode = WorkspaceMode.IN_PLACE
    worktree: WorktreeInfo | None = None
    # where the run's last state was banked when it ended (finished, failed, cancelled, found dead):
    # a worktree run's branch and the commit on it; an in-place run that pushes checkpoints records
    # the exported commit alone (iterion/engine/checkpoint_push.py). Absent in older documents.
    final_branch: str | None = None
    final_commit: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    failure_code: str | None = None
    error: str | None = None
    explicit_resume_required: bool = False
    subbot_children: dict[str, str] = Field(default_factory=dict)  # node id -> child run id
    # a subbot's child run: the parent run and its subbot node (absent in older documents)
    parent_run: str | None = None
    parent_node: str | None = None
    # the parent node's iteration that launched it: a loop's next pass launches a new child
    # instead of reusing this one's outputs (absent in older documents: not compared)
    parent_iteration: int | None = None
    owner: OwnerInfo | None = None
    # the run's live process groups (format 2; absent before: none recorded)
    children: list[ChildGroup] = Field(default_factory=list)
    last_resume_digest: str | None = None
    version: int = 0  # CAS counter: 1 once created, +1 per save

    @field_validator("created_at", "updated_at", "finished_at")
    @classmethod
    def _aware(cls, stamp: datetime | None) -> datetime | None:
        return None if stamp is None else as_utc(stamp)

    def set_status(self, status: RunStatus | str, *, failure_code: str | None = None,
                   error: str | None = None) -> None:
        """Move to ``status`` if the transition table allows it; stamps finished_at on terminals."""
        new = RunStatus(status)
        check_transition(self.id, self.status, new)
        self.status = new
        if new in (RunStatus.FINISHED, RunStatus.FAILED):
            self.finished_at = utcnow()
        elif new is RunStatus.RUNNING:
            self.finished_at = None
        if failure_code is not None or error is not None or new is RunStatus.RUNNING or new is RunStatus.FINISHED:
            # a new verdict (or a fresh attempt) replaces the previous one
            self.failure_code = failure_code
            self.error = error

    def record_sources(self, main_path: str, sources: dict[str, str]) -> None:
        """Record the unit's files; over the cap, keep the main alone and flag it."""
        set_sources(self, main_path, sources)


def set_sources(doc: RunDoc, main_path: str, sources: dict[str, str], *, cap: int = SOURCES_CAP_BYTES) -> None:
    if main_path not in sources:
        raise ValueError(f"sources do not contain the main file {main_path!r}")
    doc.workflow_source = sources[main_path]
    total = sum(len(text.encode("utf-8")) for text in sources.values())
    if total > cap:
        doc.workflow_sources = {}
        doc.workflow_sources_truncated = True
    else:
        doc.workflow_sources = dict(sources)
        doc.workflow_sources_truncated = False
