"""The one interface every LLM backend implements: a request in, a response or a typed error out.

Backends know nothing of the store or the engine's loop: the engine renders prompts, builds a
``BackendRequest``, charges the response's tokens/cost to the budget and records
``session_id`` in the checkpoint so an ask_user resume can continue the same conversation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iterion import ir
from iterion.failure_codes import FailureCode

# The key a model replies with (alone) to ask the user a question instead of answering
# (backends without a native ask_user tool use this JSON convention).
ASK_USER_KEY = "_ask_user"
# The key CLI agents (Claude Code, Codex) use for the same request; recognised alike.
NEEDS_INTERACTION_KEY = "_needs_interaction"


@dataclass(frozen=True)
class BackendRequest:
    node_id: str
    iteration: int = 0
    node_kind: ir.NodeKind = ir.NodeKind.AGENT
    model: str | None = None
    system: str = ""
    user: str = ""
    output_schema: ir.Schema | None = None
    tools: tuple[str, ...] = ()
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    session_id: str | None = None  # resume this backend conversation (ask_user)
    prior_question: str | None = None  # ask_user: what the node asked ...
    prior_answer: Any = None  # ... and what the user answered (injected as a fallback)
    allow_ask_user: bool = False  # the node's interaction mode lets it ask
    choices: tuple[str, ...] = ()  # llm router: the targets it may pick
    multi: bool = False  # llm router: may pick several
    workspace_dir: str | None = None  # cwd for CLI-agent backends
    run_id: str | None = None
    timeout_s: float | None = None
    provider: str | None = None  # `provider:` (claw: which wire format; docs/language.md §2)
    tool_max_steps: int | None = None
    # claw: what the engine lends the in-process agent (events, budget, shell, policy, MCP,
    # conversation store, resume answers): an ``iterion.backends.claw.host.AgentHost``
    host: Any = None
    # claude_code / codex: the permission policy's CLI flags (iterion.permissions.claude_code_flags,
    # codex_flags)
    permission_flags: tuple[str, ...] = ()
    # claude_code / codex: the node's sandbox around the CLI's argv (iterion/sandbox), None: as is
    wrap_argv: Callable[[list[str]], list[str]] | None = None
    # claude_code / codex: the run's hold on the CLI's process group (an
    # ``iterion.engine.children.CallProcesses``: ``group(pgid, grace_s=, what=)``, ``stopping``)
    processes: Any = None


@dataclass
class BackendResponse:
    output: dict[str, Any] | None = None  # the structured output (schema requested), else None
    text: str | None = None  # the raw text answer
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    session_id: str | None = None
    ask_user: str | None = None  # set when the node asks the user instead of answering
    selected: tuple[str, ...] = ()  # llm router: the chosen target(s)
    raw: dict[str, Any] = field(default_factory=dict)  # provider metadata, for the timeline

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def as_output(self) -> dict[str, Any]:
        """What becomes the node's output: the structured output, else ``{"text": ...}``."""
        if self.output is not None:
            return self.output
        return {"text": self.text or ""}


class BackendError(Exception):
    """A backend failure typed with an engine failure code (drives retry / auto-resume)."""

    def __init__(self, code: FailureCode | str, message: str, *, retry_after_s: float | None = None) -> None:
        self.code = FailureCode(code)
        self.message = message
        self.retry_after_s = retry_after_s
        # what the failed call still consumed (e.g. an answer that failed its schema): charge it
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0
        super().__init__(f"{self.code.value}: {message}")

    def with_usage(self, tokens_in: int, tokens_out: int, cost_usd: float) -> BackendError:
        self.tokens_in, self.tokens_out, self.cost_usd = tokens_in, tokens_out, cost_usd
        return self


def setting_seconds(name: str, default: float, *, zero_ok: bool = False) -> float:
    """``$name`` in seconds, read through the one reader (gitrefs/persist/envsettings.py); a garbage value
    fails the node the way a missing API key does (BACKEND_UNAVAILABLE: a person fixes the
    setting, then resumes), with the one line naming the variable and the value."""
    from gitrefs.persist.envsettings import EnvSettingError, env_seconds

    try:
        return env_seconds(name, default, zero_ok=zero_ok)
    except EnvSettingError as exc:
        raise BackendError(FailureCode.BACKEND_UNAVAILABLE, f"{exc.message} ({exc.hint})") from None


TIMEOUT_ENV = "ITERION_OPENAI_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0


def call_timeout_s(options: Mapping[str, Any]) -> float:
    """An HTTP model call's time limit: ``options["timeout_s"]``, else ``$ITERION_OPENAI_TIMEOUT``
    (seconds > 0), else 600. Read at use, so a garbage value fails the node, not the import or
    the backend's construction (``iterion backends`` lists it as not configured)."""
    given = options.get("timeout_s")
    return float(given) if given else setting_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


class Backend(ABC):
    name: str = ""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})

    @abstractmethod
    def complete(self, request: BackendRequest) -> BackendResponse:
        """Execute one LLM call. Raises BackendError (never a raw provider exception)."""

    def availability(self) -> tuple[bool, str]:
        """(usable as configured, one line saying what it uses or what is missing). Makes no call."""
        return True, ""

    def close(self) -> None:
        """Release connections/processes. Idempotent."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
