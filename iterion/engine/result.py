"""What running or resuming a workflow returns to its caller (the CLI, tests, a server)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iterion.store import RunStatus


@dataclass
class RunResult:
    run_id: str
    name: str
    status: RunStatus
    failure_code: str | None = None
    error: str | None = None
    checkpoint_node: str | None = None
    pending: dict[str, Any] | None = None  # questions of a human pause
    outputs: dict[str, Any] = field(default_factory=dict)
    workspace: str = ""
    final_branch: str | None = None
    final_commit: str | None = None  # where the run's last state was banked (see RunDoc.final_commit)
    merged_into: str | None = None
    # the run failed on purpose (a fail node, named or built-in): the sentinel the queue runner
    # matches to ack instead of redelivering, whatever the (bot-defined) code is
    deliberate: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "name": self.name, "status": self.status.value,
            "failure_code": self.failure_code, "error": self.error, "checkpoint_node": self.checkpoint_node,
            "pending": self.pending, "outputs": self.outputs, "workspace": self.workspace,
            "final_branch": self.final_branch, "final_commit": self.final_commit, "merged_into": self.merged_into,
        }
