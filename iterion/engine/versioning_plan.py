"""What a rewind's restore decided before it wrote anything, per mechanism (recorded in its
intent, iterion/rewind/intent.py, so a killed restore is finished from the same decision).

* in-place runs: the workspacetrack plan (every write and removal, with its content object) and
  the bank snapshot holding the disk state before the first write;
* worktree runs: the prepared git revert (bank ref, revert commit, HEAD before it), the paths in
  scope, and the bytes of the protected workflow sources to put back after git rewrote them.
"""

from __future__ import annotations

import base64

from pydantic import BaseModel, ConfigDict, Field

from gitrefs.records import RevertPlan
from workspacetrack.restore import PlannedRestore


class FilesPlan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tracked: PlannedRestore | None = None       # in-place runs
    revert: RevertPlan | None = None            # worktree runs
    in_scope: list[str] = Field(default_factory=list)   # worktree: the paths the revert changes
    guarded: list[str] = Field(default_factory=list)    # worktree: protected paths it changes
    saved: dict[str, str] = Field(default_factory=dict)  # worktree: protected path -> base64 bytes
    last: str | None = None                     # worktree: the chain head before the revert

    @staticmethod
    def encode(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    def saved_bytes(self) -> dict[str, bytes]:
        return {rel: base64.b64decode(text) for rel, text in self.saved.items()}
