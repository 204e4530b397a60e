"""One typed request per verb: launch, resume, cancel/pause, rewind, undo of a rewind.

The same model travels end to end: ``iterion run``/``resume`` build it from their flags, the HTTP
service parses its body into it (``parse``), ``iterion remote`` posts it (``wire``), the worker
process reads it on stdin, a queue delivery is built from it and gives it back to the runner, and
every executor turns it into the engine's options with ``launch_options``/``resume_options``. The
HTTP API's schema (``GET /openapi.json``, iterion/server/openapi.py) is generated from these models.

Rules that live here, once:
- the budget override (``Budget.ask``): 0 or absent inherits; the messages name the CLI's flags;
- the answers shapes: node-keyed ``{"node": {"field": value}}`` or flat ``{"field": value}``, both
  accepted by every verb and every surface (``node_answers`` for a launch, ``answers_for_run`` for a
  resume);
- which fields only a queued or only a direct (in-process) execution takes: validators reading the
  ``executor`` of the validation context (``"queue"`` or ``"local"``; none given means local);
- strict types: ``"auto_merge": "false"`` is refused (422), never read as true.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gitrefs.persist import UserError
from iterion.budget import BudgetAsk, DurationError, parse_duration

if TYPE_CHECKING:
    from iterion.engine.launch import LaunchOptions
    from iterion.engine.resume import ResumeOptions
    from iterion.store import Store

LOCAL, QUEUE = "local", "queue"
M = TypeVar("M", bound="Request")


class RequestError(UserError):
    """A request refused before anything is written (HTTP 422, CLI exit 2)."""


class Request(BaseModel):
    """A request body: unknown fields refused, no type coercion (a string is not a bool)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    what: ClassVar[str] = "request body"

    @classmethod
    def parse(cls: type[M], body: Any, *, executor: str = LOCAL) -> M:
        """``body`` (a decoded JSON object) as this request, or RequestError with one line."""
        if not isinstance(body, dict):
            raise RequestError(f"{cls.what} must be a JSON object")
        try:
            return cls.model_validate(body, context={"executor": executor})
        except ValidationError as exc:
            raise request_error(cls, exc) from None

    @classmethod
    def build(cls: type[M], *, executor: str = LOCAL, **fields: Any) -> M:
        """The request from a command's flags: the same checks and one-line refusals as a body."""
        return cls.parse(fields, executor=executor)

    def wire(self) -> dict[str, Any]:
        """The JSON body ``iterion remote`` posts (absent fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def _executor(info: ValidationInfo) -> str:
    return str((info.context or {}).get("executor") or LOCAL)


_EXPECTED = {"bool_type": "true or false", "int_type": "an integer", "string_type": "a string",
             "dict_type": "an object", "float_type": "a number", "finite_number": "a finite number",
             "list_type": "a list", "model_type": "an object"}
_HINTS = {"give exactly one of --node NODE or --auto": "--auto finds the node your edit affects; --node names it"}
_REQUIRED = {"file": ("file is required: the workflow to run", 'e.g. {"file": "flows/main.bot"}')}


def request_error(model: type[BaseModel], exc: ValidationError) -> RequestError:
    """The first problem of a ValidationError as the one line the CLI and the API print."""
    first = exc.errors()[0]
    loc = [str(p) for p in first.get("loc", ())]
    name = ".".join(loc) or "request"
    kind = first.get("type", "")
    if kind == "extra_forbidden":
        fields = ", ".join(sorted(_fields_of(model, loc[:-1])))
        owner = "budget field" if loc[:1] == ["budget"] or model is Budget else "field"
        return RequestError(f"unknown {owner} {loc[-1]!r} (fields: {fields})")
    if kind == "missing":
        message, hint = _REQUIRED.get(name, (f"{name} is required", None))
        return RequestError(message, hint=hint)
    if kind in ("value_error", "assertion_error"):
        text = str(first.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return RequestError(text, hint=_HINTS.get(text))
    if kind == "literal_error":
        return RequestError(f"{name} must be {first['ctx']['expected']}, got {first.get('input')!r}")
    expected = _EXPECTED.get(kind)
    if expected:
        return RequestError(f"{name} must be {expected}, got {first.get('input')!r}")
    return RequestError(f"{name}: {first.get('msg')}")


def _fields_of(model: type[BaseModel], path: list[str]) -> list[str]:
    for part in path:
        field = model.model_fields.get(part)
        nested = field.annotation if field is not None else None
        for arg in getattr(nested, "__args__", (nested,)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                model = arg
                break
    return list(model.model_fields)


# -- the budget override ---------------------------------------------------------------------------
class Budget(Request):
    """Caps asked for (launch) or raised (resume); 0 or absent inherits. Merged per field over the
    launch's ask by the engine (``iterion.budget.merge_ask``)."""

    what: ClassVar[str] = "budget"

    max_cost_usd: float | None = Field(default=None, description="USD; a finite number", examples=[10])
    max_tokens: int | None = Field(default=None, description="tokens", examples=[200000])
    max_duration: str | float | None = Field(default=None, description='active time: "30m", "4h", or seconds',
                                             examples=["4h"])
    max_iterations: int | None = Field(default=None, description="node executions")
    max_parallel_branches: int | None = Field(default=None, description="concurrent fan-out branches")

    @field_validator("max_cost_usd", mode="before")
    @classmethod
    def _cost(cls, v: Any) -> Any:
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise ValueError(f"--max-cost-usd {v!r} is not a finite number")
        return None if v is None else float(v)

    @field_validator("max_tokens", "max_iterations", "max_parallel_branches", mode="before")
    @classmethod
    def _count(cls, v: Any, info: ValidationInfo) -> Any:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            flag = "--" + str(info.field_name).replace("_", "-")
            raise ValueError(f"{flag} must be an integer, got {v!r}")
        return v

    @field_validator("max_duration", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        if v in (None, ""):
            return None
        try:
            parse_duration(v)
        except DurationError as exc:
            raise ValueError(str(exc)) from None
        return float(v) if isinstance(v, int) else v

    def ask(self) -> BudgetAsk | None:
        """The engine's override, or None when every field inherits."""
        if all(getattr(self, k) in (None, 0, "", "0") for k in type(self).model_fields):
            return None
        try:
            return BudgetAsk(max_cost_usd=self.max_cost_usd or 0.0, max_tokens=self.max_tokens or 0,
                             max_duration_s=parse_duration(self.max_duration) if self.max_duration else 0.0,
                             max_iterations=self.max_iterations or 0,
                             max_parallel_branches=self.max_parallel_branches or 0)
        except (ValueError, DurationError) as exc:
            text = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise RequestError(f"invalid budget override: {' '.join(text.removeprefix('Value error, ').split())}") \
                from None

    @classmethod
    def from_ask(cls, ask: BudgetAsk | dict[str, Any] | None) -> Budget | None:
        """The wire form of an engine ask (a queue delivery stores the ask)."""
        if ask is None:
            return None
        a = ask if isinstance(ask, BudgetAsk) else BudgetAsk.model_validate(ask)
        return cls(max_cost_usd=a.max_cost_usd or None, max_tokens=a.max_tokens or None,
                   max_duration=a.max_duration_s or None, max_iterations=a.max_iterations or None,
                   max_parallel_branches=a.max_parallel_branches or None)

    @classmethod
    def from_flags(cls, cost: float | None, tokens: int | None, duration: str | None, iterations: int | None,
                   parallel: int | None) -> Budget | None:
        """The ``--max-*`` flags of run/resume (local and remote); None when none was given."""
        if all(v is None for v in (cost, tokens, duration, iterations, parallel)):
            return None
        return cls.parse({"max_cost_usd": cost, "max_tokens": tokens, "max_duration": duration,
                          "max_iterations": iterations, "max_parallel_branches": parallel})


# -- the answers shapes ----------------------------------------------------------------------------
def node_answers(raw: dict[str, Any], human_nodes: list[str], source: str) -> dict[str, dict[str, Any]]:
    """Launch answers: node-keyed (``{"approve": {"approved": true}}``), or flat
    (``{"approved": true}``) when the workflow has exactly one human node to give it to."""
    if not raw:
        return {}
    if all(isinstance(v, dict) for v in raw.values()):
        return {str(k): dict(v) for k, v in raw.items()}
    if not any(isinstance(v, dict) for v in raw.values()) and len(human_nodes) == 1:
        return {human_nodes[0]: dict(raw)}
    bad = next((str(k) for k, v in raw.items() if not isinstance(v, dict)), "?")
    where = (f"the workflow has {len(human_nodes)} human nodes ({', '.join(human_nodes)})" if human_nodes
             else "the workflow has no human node")
    raise RequestError(f"{source}: {bad} must map fields to values ({where})",
                       hint='key the answers by node, e.g. {"approve": {"approved": true}}')


def pending_answers(raw: dict[str, Any], pending_node: str | None, field_names: set[str],
                    source: str) -> dict[str, Any]:
    """Resume answers for the paused node, whichever shape they have: node-keyed (that node's
    entry; other nodes' entries are for later gates of a launch) or flat (as is). Answers keyed by
    nodes that do not name the paused node are refused, naming both."""
    if pending_node is None:
        return raw
    looks_keyed = bool(raw) and all(isinstance(v, dict) for v in raw.values()) and not (set(raw) & field_names)
    if pending_node in raw and isinstance(raw[pending_node], dict) and pending_node not in field_names:
        return dict(raw[pending_node])
    if looks_keyed and field_names:
        raise RequestError(f"{source} answers node(s) {', '.join(sorted(map(str, raw)))}, "
                           f"but the run waits on {pending_node} ({', '.join(sorted(field_names))})",
                           hint=f'give {{"{pending_node}": {{...}}}} or the fields of {pending_node} as one flat object')
    return raw


def human_nodes(compiled: Any) -> list[str]:
    """The human nodes of a compiled workflow (``iterion.engine.source.CompiledSource``): whom flat
    launch answers can go to."""
    from iterion.ir import NodeKind

    return [n.id for n in compiled.workflow.nodes.values() if n.kind is NodeKind.HUMAN]


def _check_answers(v: Any) -> Any:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError('answers must be an object: {"field": value} or {"node": {"field": value}}')
    return v


def _check_backend(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, str):
        raise ValueError("backend must be a string")
    from iterion.backends.base import BackendError  # the backends import the IR: only when one is named
    from iterion.backends.registry import canonical_name

    try:
        canonical_name(v)
    except BackendError as exc:
        raise ValueError(f"--backend: {exc.message}") from None
    return v


def _check_model(v: Any) -> Any:
    from iterion.backends.choice import check_model_override

    try:
        return check_model_override(v)
    except ValueError as exc:
        raise ValueError(f"--model: {exc}") from None


def _one_line_string(v: Any, name: str) -> Any:
    if v is not None and (not isinstance(v, str) or not v or "\0" in v or "\n" in v):
        raise ValueError(f"{name} must be a non-empty one-line string")
    return v


def _request_id(v: Any) -> Any:
    if v is not None and (not isinstance(v, str) or not 1 <= len(v) <= 200):
        raise ValueError("request_id must be a string of 1-200 characters (an idempotency key)")
    return v


def _refuse(fields: dict[str, Any], executor: str) -> None:
    """Fields another executor takes: refused with what they need."""
    for name, value in fields.items():
        if value is None:
            continue
        if executor == QUEUE:
            raise ValueError(f"{name} is not supported by a server with a queue (a runner executes the run)")
        raise ValueError(f"{name} needs a server with a queue (start it with `iterion server --nats URL`)")


class _RunRequest(Request):
    """What a launch and a resume share: answers, backend, model, the idempotency key."""

    @field_validator("answers", mode="before", check_fields=False)
    @classmethod
    def _answers(cls, v: Any) -> Any:
        return _check_answers(v)

    @field_validator("backend", mode="before", check_fields=False)
    @classmethod
    def _backend(cls, v: Any) -> Any:
        return _check_backend(v)

    @field_validator("model", mode="before", check_fields=False)
    @classmethod
    def _model(cls, v: Any) -> Any:
        return _check_model(v)

    @field_validator("request_id", mode="before", check_fields=False)
    @classmethod
    def _rid(cls, v: Any) -> Any:
        return _request_id(v)


# -- launch ----------------------------------------------------------------------------------------
class LaunchRequest(_RunRequest):
    """``iterion run``, ``POST /api/runs``, ``iterion remote runs launch``."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"file": "demo/demo.bot", "vars": {"topic": "rivers"}},
        {"file": "demo/demo.bot", "backend": "script", "answers": {"approve": {"approved": True, "note": "ship it"}},
         "budget": {"max_duration": "4h", "max_cost_usd": 10}, "on_budget": "pause", "auto_merge": False},
        {"file": "demo/demo.bot", "answers": {"approved": True, "note": "ship it"}},
    ]})

    file: str = Field(..., description="the workflow (a path inside the project; inside the repository "
                                       "with repo_url)")
    workspace: str | None = Field(default=None, description="where the run executes in place (default: the project)")
    vars: dict[str, str | int | float | bool] = Field(default_factory=dict, description="workflow vars")
    preset: str | None = None
    backend: str | None = Field(default=None, description="every LLM node's backend (script, openai, claw, ...)")
    model: str | None = Field(default=None, description="every LLM call's model")
    script: str | None = Field(default=None, description="the script backend's answers file")
    answers: dict[str, Any] = Field(default_factory=dict, description=(
        'human answers known up front: {"node": {"field": value}}, or {"field": value} when the '
        "workflow has one human node"))
    attachments: dict[str, str] | None = Field(default=None, description="declared attachments: name -> path (direct)")
    budget: Budget | None = None
    on_budget: Literal["fail", "pause"] = "fail"
    branch_name: str | None = Field(default=None, description="worktree runs: the persistent branch (direct)")
    merge_into: str | None = Field(default=None, description="worktree runs: the branch fast-forwarded on success (direct)")
    auto_merge: bool | None = Field(default=None, description="worktree runs: fast-forward on success (direct; "
                                                      "default true)")
    repo_url: str | None = Field(default=None, description="a repository the runner clones (queued)")
    ref: str | None = Field(default=None, description="the ref of repo_url to clone (queued)")
    request_id: str | None = Field(default=None, description="an idempotency key: the same key queues the run once "
                                                     "(queued)")

    @field_validator("vars", mode="before")
    @classmethod
    def _vars(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError("vars must be an object")
        if any(not isinstance(x, (str, int, float, bool)) for x in v.values()):
            raise ValueError("vars values must be strings, numbers or booleans")
        return v


    @field_validator("repo_url", "ref", mode="before")
    @classmethod
    def _one_line(cls, v: Any, info: ValidationInfo) -> Any:
        return _one_line_string(v, str(info.field_name))

    @field_validator("file", mode="before")
    @classmethod
    def _file(cls, v: Any) -> Any:
        if not isinstance(v, str) or not v or "\0" in v:
            raise ValueError("file must be a non-empty path string")
        return v

    @model_validator(mode="after")
    def _executor_fields(self, info: ValidationInfo) -> LaunchRequest:
        executor = _executor(info)
        if executor == QUEUE:
            _refuse({"attachments": self.attachments, "branch_name": self.branch_name,
                     "merge_into": self.merge_into, "auto_merge": self.auto_merge}, executor)
        else:
            _refuse({"repo_url": self.repo_url, "ref": self.ref, "request_id": self.request_id}, executor)
        if self.ref is not None and self.repo_url is None:
            raise ValueError("ref needs repo_url: the ref of which repository?")
        if self.repo_url is not None:
            if self.file.startswith("/") or ".." in self.file.split("/"):
                raise ValueError(f"file {self.file!r} must be a relative path inside the repository "
                                 "(e.g. flows/main.bot)")
            if self.workspace is not None:
                raise ValueError("workspace does not apply to a repository run: it executes in a fresh clone")
        return self

    def var_strings(self) -> dict[str, str]:
        """Vars as the engine takes them (strings coerced to each var's type; JSON for others)."""
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in self.vars.items()}

    def node_answers(self, human_nodes: list[str], source: str = "answers") -> dict[str, dict[str, Any]]:
        return node_answers(self.answers, human_nodes, source)

    def launch_options(self, human_nodes: list[str], *, source: str = "answers", **local: Any) -> LaunchOptions:
        """The engine's options; ``local`` adds what only this process decides (waiting, listeners,
        the CLI's permission/sandbox/push flags, a queue runner's run id)."""
        from iterion.engine.launch import LaunchOptions

        fields: dict[str, Any] = {
            "vars": self.var_strings(), "preset": self.preset, "backend": self.backend, "model": self.model,
            "script_file": self.script, "answers": self.node_answers(human_nodes, source),
            "workspace": Path(self.workspace) if self.workspace else None,
            "budget": self.budget.ask() if self.budget else None, "branch_name": self.branch_name,
            "merge_into": self.merge_into, "auto_merge": True if self.auto_merge is None else self.auto_merge,
            "on_budget": self.on_budget,
            "attachments": {k: Path(v) for k, v in (self.attachments or {}).items()}}
        return LaunchOptions(**{**fields, **local})


# -- resume ----------------------------------------------------------------------------------------
class ResumeRequest(_RunRequest):
    """``iterion resume``, ``POST /api/runs/{run}/resume``, ``iterion remote runs resume``."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"answers": {"approved": True, "note": "ship it"}},
        {"answers": {"approve": {"approved": True, "note": "ship it"}}, "budget": {"max_duration": "4h"},
         "force": True},
    ]})

    answers: dict[str, Any] = Field(default_factory=dict, description=(
        'answers for the paused gate: {"field": value}, or node-keyed {"node": {"field": value}}'))
    budget: Budget | None = None
    force: bool = Field(default=False, description="resume although the workflow source changed")
    backend: str | None = None
    model: str | None = Field(default=None, description="every LLM call's model from now on")
    expected_version: int | None = Field(default=None, description="the run document's version last read (409 if "
                                                           "it moved on)")
    file: str | None = Field(default=None, description="the workflow source (default: the recorded path; direct)")
    force_stale: bool | None = Field(default=None, description="take over a running run whose owner cannot be "
                                                       "proven gone (direct)")
    request_id: str | None = Field(default=None, description="an idempotency key (queued)")
    max_daily_cost_usd: float | None = Field(default=None, description="the store's daily spend cap in USD for this "
                                                              "resume (0: no cap; default: the setting)")


    @model_validator(mode="after")
    def _executor_fields(self, info: ValidationInfo) -> ResumeRequest:
        executor = _executor(info)
        if executor == QUEUE:
            _refuse({"file": self.file, "force_stale": self.force_stale}, executor)
        else:
            _refuse({"request_id": self.request_id}, executor)
        return self

    def answers_for(self, pending_node: str | None, field_names: set[str], source: str = "answers") -> dict[str, Any]:
        return pending_answers(self.answers, pending_node, field_names, source)

    def answers_for_run(self, store: Store, run_ref: str, source: str = "answers") -> dict[str, Any]:
        """The answers for the node the run waits on (as given when it waits on none, or when the
        run cannot be read: the resume itself reports that)."""
        if not self.answers:
            return {}
        try:
            cp = store.load_checkpoint(store.resolve_run(run_ref))
        except Exception:  # noqa: BLE001 - an unknown or damaged run is reported by the resume itself
            return dict(self.answers)
        pending = cp.pending_interaction if cp is not None else None
        if pending is None:
            return dict(self.answers)
        names = {str(f.get("name")) for f in (pending.questions or {}).get("fields") or []}
        return self.answers_for(pending.node, names, source)

    def resume_options(self, answers: dict[str, Any], **local: Any) -> ResumeOptions:
        """The engine's options with ``answers`` (already fitted to the paused node)."""
        from iterion.engine.resume import ResumeOptions

        fields: dict[str, Any] = {
            "answers": answers, "file": Path(self.file) if self.file else None, "force": self.force,
            "backend": self.backend, "model": self.model, "force_stale": bool(self.force_stale),
            "budget": self.budget.ask() if self.budget else None,
            "max_daily_cost_usd": self.max_daily_cost_usd}
        return ResumeOptions(**{**fields, **local})


# -- operator verbs --------------------------------------------------------------------------------
class ControlRequest(Request):
    """``POST /api/runs/{run}/cancel`` and ``/pause`` (``iterion remote runs cancel|pause``)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"wait": 5, "reason": "deploy freeze"}]})

    wait: float = Field(default=10, description="seconds to wait for the run to stop (0-60)")
    reason: str | None = None
    expected_version: int | None = None

    @field_validator("wait", mode="before")
    @classmethod
    def _wait(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 60:
            raise ValueError(f"wait must be a number of seconds between 0 and 60, got {v!r}")
        return float(v)


class RewindRunRequest(Request):
    """``POST /api/runs/{run}/rewind`` (``iterion rewind``, ``iterion remote runs rewind``)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"node": "save_draft", "dry_run": True},
                                                              {"node": "write", "restore_scope": "none",
                                                               "dry_run": True}]})

    node: str | None = Field(default=None, description="the node to rewind to")
    auto: bool = Field(default=False, description="find the node the workflow edit affects")
    restore_scope: Literal["produced", "full", "none"] | None = None
    dry_run: bool = False
    file: str | None = Field(default=None, description="the edited workflow source (default: the recorded one)")
    expected_version: int | None = None

    @model_validator(mode="after")
    def _one_target(self) -> RewindRunRequest:
        if self.node is not None and not self.node:
            raise ValueError("node must be a node name")
        if bool(self.node) == bool(self.auto):
            raise ValueError("give exactly one of --node NODE or --auto")
        return self


class UndoRewindRequest(Request):
    """``POST /api/runs/{run}/rewind/undo`` (``iterion rewind --undo``)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{}]})

    expected_version: int | None = None
