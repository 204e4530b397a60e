"""The engine's exceptions: a node failure carries a failure code, a cancel carries its reason."""

from __future__ import annotations

from typing import Any

from iterion.failure_codes import FailureCode
from persist import UserError


class EngineError(UserError):
    """A user-facing engine refusal (bad --var, unknown preset, ...): one line, optional hint."""


class NodeFailure(Exception):
    """A node's execution did not complete: ``code`` is a failure code (engine or bot-defined)."""

    def __init__(self, code: FailureCode | str, message: str, *, node: str | None = None,
                 details: dict[str, Any] | None = None, origin: str | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = str(code)
        self.message = message
        self.node = node
        self.details = dict(details or {})
        # for the recovery dispatcher: "backend" when an LLM backend call raised it (an
        # ``failure_codes.Origin``), and how long the provider asked us to wait before a retry
        self.origin = origin
        self.retry_after_s = retry_after_s

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Cancelled(Exception):
    """The operator cancelled the run (SIGINT/SIGTERM or an explicit cancel)."""

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason
