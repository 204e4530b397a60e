"""What every node executor receives: the run-wide context and one call's particulars."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iterion.budget import Budget, BudgetExceeded
from iterion.engine.cancel import CancelToken
from iterion.engine.errors import NodeFailure
from iterion.engine.state import Pending, RunState
from iterion.engine.versioning import Versioning
from iterion.failure_codes import FailureCode
from iterion.ir import Edge, Node, Workflow
from iterion.shellquote import RenderMode
from iterion.store import Store
from iterion.store.checkpoint import InteractionKind

if TYPE_CHECKING:
    from iterion.sandbox import Role, RunSandbox

# (event type, node, iteration, payload) -> None
Emit = Callable[[str, str | None, int | None, dict[str, Any]], None]


@dataclass
class RunOptions:
    backend: str | None = None        # --backend: overrides every node's backend
    model: str | None = None          # --model: overrides every LLM call's model (node model:, interaction_model:)
    script_file: str | None = None    # the script backend's answers
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # human answers known up front, per node
    watch: bool = True                # start the workspacetrack journal
    on_budget: str = "fail"           # BUDGET_EXCEEDED: "fail" (failed_resumable) or "pause" (recovery pause)
    # --permission* layers of the launch and each resume, in order (iterion/permissions.py)
    permission_layers: list[dict[str, Any]] = field(default_factory=list)
    # --sandbox auto|none of the launch, or of the resume that replaced it (None: the workflow decides)
    sandbox: str | None = None
    # --max-daily-cost-usd of a resume (None: $ITERION_DAILY_COST_CAP_USD), iterion/engine/dailycap.py
    daily_cap_usd: float | None = None


@dataclass
class ExecContext:
    workflow: Workflow
    store: Store
    run_id: str
    run_name: str
    state: RunState
    workspace: Path
    versioning: Versioning
    budget: Budget
    token: CancelToken
    options: RunOptions
    emit: Emit
    in_cycles: frozenset[str]
    attachments: dict[str, Any] = field(default_factory=dict)
    backend_cache: dict[str, Any] = field(default_factory=dict)
    checkpoints: Any = None  # a CheckpointPusher when the run pushes workspace checkpoints
    # a line for the person watching that the timeline cannot carry (iterion/engine/notice.py)
    notify: Callable[[str], None] = field(default=lambda _message: None)
    # the run's sandboxes (iterion/sandbox): every process a node starts goes through its wrap
    sandbox: RunSandbox | None = None

    def wrap(self, argv: list[str], node: str, role: Role, *, backend: str | None = None,
             ro_files: tuple[Path, ...] = ()) -> list[str]:
        """``argv`` as the node's sandbox runs it (unchanged when the node runs unsandboxed)."""
        if self.sandbox is None:
            return list(argv)
        return self.sandbox.wrap(argv, node, role, backend=backend, ro_files=ro_files)

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir(self.run_id)

    def duration_guard(self, node: str) -> Callable[[], None] | None:
        """Called while a tool or backend call runs: the run's active-duration cap still applies
        (the call is stopped and the node fails BUDGET_EXCEEDED). None without that cap."""
        if not self.budget.ask.max_duration_s:
            return None

        def check() -> None:
            try:
                self.budget.check()
            except BudgetExceeded as exc:
                raise NodeFailure(FailureCode.BUDGET_EXCEEDED, exc.message, node=node,
                                  details={"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed}) from None

        return check

    def tool_env(self, node: str, iteration: int) -> dict[str, str]:
        usage = self.budget.usage()
        ask = self.budget.ask
        env = dict(os.environ)
        env.update({
            "ITERION_RUN_ID": self.run_id,
            "ITERION_RUN_NAME": self.run_name,
            "ITERION_NODE": node,
            "ITERION_ITERATION": str(iteration),
            "ITERION_WORKSPACE": str(self.workspace),
            # a guard tool can compare consumption with the caps (a resume may raise them)
            "ITERION_BUDGET_TOKENS": str(usage.tokens),
            "ITERION_BUDGET_COST_USD": f"{usage.cost_usd:.6f}",
            "ITERION_BUDGET_ITERATIONS": str(usage.iterations),
            "ITERION_BUDGET_MAX_TOKENS": str(ask.max_tokens),
            "ITERION_BUDGET_MAX_COST_USD": f"{ask.max_cost_usd:g}",
            "ITERION_BUDGET_MAX_ITERATIONS": str(ask.max_iterations),
        })
        return env


@dataclass
class NodeCall:
    node: Node
    iteration: int
    input: dict[str, Any]
    scope: dict[str, Any]
    # for a resumed human/ask_user node: the answers given on resume
    answers: dict[str, Any] | None = None
    pending: Pending | None = None


@dataclass
class NodeResult:
    output: dict[str, Any]
    # the node parks: questions for a person (human gate or an agent's ask_user)
    pause: dict[str, Any] | None = None
    pause_kind: InteractionKind = "human"
    # routers that choose their own edges (fan_out_all, round_robin, llm)
    selected: list[Edge] | None = None
    session_id: str | None = None


def render_text(text: str | None, scope: dict[str, Any], node: str, what: str,
                mode: RenderMode = "text") -> str:
    """A template rendered against the scope, values written as ``mode`` says (a tool command
    quotes them: ``iterion.shellquote``); an unresolvable reference is TEMPLATE_FAILED."""
    if not text:
        return ""
    from iterion.templates import TemplateRenderError, render

    try:
        return render(text, scope, mode)
    except TemplateRenderError as exc:
        raise NodeFailure(FailureCode.TEMPLATE_FAILED, f"node {node}: {what}: {exc.message}", node=node) from None
