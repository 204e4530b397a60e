"""A delivery: one message of the work queue asking a runner to launch or resume one run.

Published by the HTTP service (``POST /api/runs``, ``POST /api/runs/{id}/resume``) with a queue
configured, and by ``iterion remote runs launch --repo`` through it; claimed by ``iterion runner``.

Invariants:
- ``msg_id`` (the JetStream ``Nats-Msg-Id`` header) is derived from the run and the request
  (``request_id``: the client's idempotency key, else a fresh id per HTTP request), so a request
  retried within the stream's duplicate window is stored once;
- a delivery never carries a run's state: the run document and its checkpoint in the shared store
  are authoritative, the delivery only says which run and which request (a redelivery of a stale
  message is judged against the run's CURRENT status, ``iterion.queue.policy``);
- ``format_version`` is checked on decode: a message from a newer iterion is terminated (never
  half-understood), like any undecodable one.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, ValidationError

from gitrefs.persist import FormatVersionError, VersionedModel
from iterion.store.timeutil import utcnow

if TYPE_CHECKING:
    from iterion.requests import LaunchRequest, ResumeRequest


class Kind(StrEnum):
    LAUNCH = "launch"
    RESUME = "resume"


class Delivery(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    kind: Kind
    run_id: str
    request_id: str
    requested_at: datetime = Field(default_factory=utcnow)
    # a run bound to a repository: the runner clones URL at REF into a per-run directory and runs
    # FILE (a path inside the repository) there
    repo_url: str | None = None
    ref: str | None = None
    file: str | None = None
    # a run NOT bound to a repository: the workflow file and workspace are paths every runner can
    # see (one machine, or a shared filesystem)
    workspace: str | None = None
    # launch: vars (strings, coerced to the var's type), preset, backend, the script backend's
    # answers file (a path in the repository), answers known up front, budget overrides
    vars: dict[str, str] = Field(default_factory=dict)
    preset: str | None = None
    backend: str | None = None
    model: str | None = None  # --model: every LLM call's model (launch, and a resume from then on)
    script_file: str | None = None
    answers: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] | None = None
    on_budget: str = "fail"
    # resume: a changed source is accepted (the CLI's --force); the run document's version when
    # the request was made (a first delivery finding another version is a stale request: dropped)
    force: bool = False
    expected_version: int | None = None

    # -- the request it carries (iterion.requests): built from it, given back to the runner; the
    # wire format stays these flat fields (format_version unchanged, old messages read alike)
    @staticmethod
    def launch_fields(req: LaunchRequest) -> dict[str, Any]:
        """The fields of a launch delivery for ``req`` (its paths already placed by the server)."""
        ask = req.budget.ask() if req.budget else None
        return {"file": req.file, "repo_url": req.repo_url, "ref": req.ref, "workspace": req.workspace,
                "vars": req.var_strings(), "preset": req.preset, "backend": req.backend, "model": req.model,
                "script_file": req.script, "answers": dict(req.answers), "on_budget": req.on_budget,
                "budget": ask.model_dump(mode="json") if ask else None}

    @staticmethod
    def resume_fields(req: ResumeRequest) -> dict[str, Any]:
        """The fields of a resume delivery for ``req``."""
        ask = req.budget.ask() if req.budget else None
        return {"answers": dict(req.answers), "force": req.force, "backend": req.backend, "model": req.model,
                "budget": ask.model_dump(mode="json") if ask else None}

    def launch_request(self) -> LaunchRequest:
        """The launch this delivery asks for, as every other executor receives it."""
        from iterion.requests import Budget, LaunchRequest

        return LaunchRequest.model_construct(
            file=self.file or "", workspace=self.workspace, vars=dict(self.vars), preset=self.preset,
            backend=self.backend, model=self.model, script=self.script_file, answers=dict(self.answers),
            budget=Budget.from_ask(self.budget), on_budget=self.on_budget, repo_url=self.repo_url, ref=self.ref,
            request_id=self.request_id, attachments=None, branch_name=None, merge_into=None, auto_merge=None)

    def resume_request(self) -> ResumeRequest:
        """The resume this delivery asks for."""
        from iterion.requests import Budget, ResumeRequest

        return ResumeRequest.model_construct(
            answers=dict(self.answers), budget=Budget.from_ask(self.budget), force=self.force, backend=self.backend,
            model=self.model, expected_version=self.expected_version, file=None, force_stale=None,
            request_id=self.request_id, max_daily_cost_usd=None)

    @property
    def msg_id(self) -> str:
        return msg_id(self.run_id, self.kind.value, self.request_id)

    def encode(self) -> bytes:
        return self.model_dump_json().encode("utf-8")


class UndecodableDelivery(ValueError):
    """The message is not a delivery this iterion understands (terminated, never retried)."""


def msg_id(run_id: str, kind: str, request_id: str) -> str:
    digest = hashlib.blake2b(f"{run_id}\0{kind}\0{request_id}".encode(), digest_size=12).hexdigest()
    return f"{kind}-{digest}"


def decode(data: bytes) -> Delivery:
    try:
        return Delivery.model_validate_json(data)
    except FormatVersionError as exc:
        raise UndecodableDelivery(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "message"
        raise UndecodableDelivery(f"not a delivery ({where}: {first.get('msg')})") from None
    except ValueError as exc:
        raise UndecodableDelivery(f"not a delivery ({exc})") from None
