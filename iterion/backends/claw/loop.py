"""The claw agent's tool loop: model -> tool calls -> results, until the model answers.

Bounded by ``tool_max_steps`` (model turns that call tools; ``DEFAULT_TOOL_MAX_STEPS`` when the
node sets none; exhausted: EXECUTION_FAILED), ``max_tokens`` (per model turn) and
``RESULT_CAP`` (bytes of one tool result the model sees; the rest is cut with a note).

A file tool's path is resolved to its canonical workspace-relative path before the policy
decides (``iterion.backends.claw.paths``): the rules match that path, a path outside the
workspace is refused before any rule, and the ``permission_decided`` event records the
requested and the resolved path. The final answer is checked against the output schema; a miss
gets one repair turn (the problems are sent back), then SCHEMA_VALIDATION. Every turn's tokens
and cost are charged through the host as they happen, so the response itself carries none.

Pauses (``ask_user``, a permission ``ask``) save the conversation with the pending tool-use id
and return a response with ``ask_user`` set; the resume appends the answer (or the approved
call's result) as that id's tool result and the loop continues the same conversation.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from iterion.backends.base import BackendError, BackendRequest, BackendResponse, setting_seconds
from iterion.backends.claw import conversation as convstore
from iterion.backends.claw.conversation import Conversation, PendingCall
from iterion.backends.claw.host import AgentHost
from iterion.backends.claw.paths import Resolved
from iterion.backends.claw.tools import (
    BUILTIN_SPECS,
    READ_CAP,
    WALK_TIMEOUT_ENV,
    WALK_TIMEOUT_S,
    WORKSPACE_TOOLS,
    ToolError,
    Workspace,
)
from iterion.backends.claw.wire import Output, ToolCall, ToolSpec, Wire, resolve_provider
from iterion.backends.schema import (
    effective_schema,
    finish_structured,
    json_schema,
    output_instructions,
    prior_exchange,
)
from iterion.backends.sse import Progress
from iterion.failure_codes import FailureCode
from iterion.permissions import PATH_TOOLS, PROTECTED_SOURCE, call_subject

# a tool the first model turn of a conversation must call (the provider's tool_choice): small
# local models answer with prose unless made to call one (README "Local models")
FIRST_TOOL_ENV = "ITERION_CLAW_FIRST_TOOL"
# answers that approve a permission pause (`--answer approve=yes`)
_YES = {"true", "yes", "y", "1", "allow", "approve", "approved", "ok"}
RESULT_EVENT_CAP = 200
DEFAULT_TOOL_MAX_STEPS = 200  # a node without tool_max_steps: a model looping on tools stops here
RESULT_CAP = READ_CAP + 4096  # bytes of one tool result sent to the model (read_file's cap fits)
PATH_EVENT_CAP = 1000  # characters of a requested or resolved path a permission event keeps
SUBJECT_CAP = 120  # what the timeline shows of a call (its path, command, ...); the digest covers all


def digest(args: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:16]


def approved(answers: dict[str, Any]) -> bool:
    for key in ("approve", "approved", "allow", "answer"):
        if key in answers:
            v = answers[key]
            return v is True or (isinstance(v, str) and v.strip().lower() in _YES)
    return False


class AgentLoop:
    def __init__(self, request: BackendRequest, host: AgentHost, wire: Wire, model: str) -> None:
        self.req, self.host, self.wire, self.model = request, host, wire, model
        self.ws = Workspace(host.workspace, host.run_shell, protected_dirs=host.protected_dirs,
                            may_read=self._may_read, timeout_s=setting_seconds(WALK_TIMEOUT_ENV, WALK_TIMEOUT_S))
        self.mcp: Any = None  # iterion.backends.claw.mcp.McpPool, started lazily
        self.specs: dict[str, ToolSpec] = {}
        self.tokens_in = self.tokens_out = 0
        self.cost = 0.0

    # -- set-up -----------------------------------------------------------------------------------
    def _may_read(self, tool: str, rel: str) -> bool:
        """A walk (grep over a directory) skips a file an explicit deny or ask rule covers (a
        file a person must approve reading is not read in passing)."""
        d = self.host.policy.decide(tool, {"path": rel})
        return not (d.verdict in ("deny", "ask") and d.rule is not None)

    def _allowed(self, name: str) -> bool:
        from fnmatch import fnmatchcase

        if not self.req.tools:
            return True
        return any(fnmatchcase(name, pat) for pat in self.req.tools)

    def tool_specs(self) -> dict[str, ToolSpec]:
        specs = {n: BUILTIN_SPECS[n] for n in WORKSPACE_TOOLS if self._allowed(n)}
        if self.req.allow_ask_user:
            specs["ask_user"] = BUILTIN_SPECS["ask_user"]
        if self.host.mcp_servers:
            from iterion.backends.claw.mcp import McpPool

            self.mcp = McpPool(self.host)
            for spec in self.mcp.start(self.host.mcp_servers):
                if not self.req.tools or self._allowed(spec.name):
                    specs[spec.name] = spec
        return specs

    def system_text(self) -> str:
        base = ("You are an agent working in a workspace directory through tools. Paths are relative to the "
                "workspace. When you are done, answer without calling a tool.")
        return "\n\n".join(p for p in (self.req.system or base, output_instructions(self.req)) if p)

    def open_conversation(self) -> Conversation:
        h = self.host
        if h.resuming and self.req.session_id:
            conv = convstore.load(h.conversations_dir, self.req.session_id)
            if conv is not None and conv.pending is not None:
                return conv
        # a resumed ask whose conversation is gone (not ours to rehydrate): the question and
        # answer still reach the model, as for backends without sessions
        user = "\n\n".join(p for p in (self.req.user or "Begin.", prior_exchange(self.req)) if p)
        source = None
        if h.session_mode in ("inherit", "fork") and not h.inherit_session:
            raise BackendError(FailureCode.TEMPLATE_FAILED,
                               f"node {self.req.node_id}: session {h.session_mode} needs `_session_id` in its input; "
                               'map it on the edge (with { _session_id: "{{outputs.EARLIER._session_id}}" }) '
                               "or use session: inherit_if_available")
        if h.session_mode in ("inherit", "inherit_if_available", "fork") and h.inherit_session:
            source = convstore.load(h.conversations_dir, h.inherit_session)
            if source is None and h.session_mode in ("inherit", "fork"):
                raise BackendError(FailureCode.TEMPLATE_FAILED,
                                   f"node {self.req.node_id}: session {h.session_mode}: no claw conversation "
                                   f"{h.inherit_session!r} in this run to continue")
        if source is not None:
            # inherit and fork both continue in a new file: an earlier node's conversation never
            # changes after it, so rewinding either node replays against what it really saw
            history = list(source.messages)
            if source.pending is not None:  # every tool call needs a result before the next turn
                for c in [source.pending.model_dump(), *source.queued]:
                    history.append({"role": "tool", "tool_call_id": c["id"], "name": c["name"], "is_error": True,
                                    "content": "error: not answered (the conversation moved to another node)"})
            return Conversation(session_id=convstore.new_session_id(), node=self.req.node_id,
                                provider=self.wire.provider, model=self.model, system=source.system,
                                messages=[*history, {"role": "user", "content": user}])
        return Conversation(session_id=convstore.new_session_id(), node=self.req.node_id,
                            provider=self.wire.provider, model=self.model, system=self.system_text(),
                            messages=[{"role": "user", "content": user}])

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> BackendResponse:
        try:
            self.specs = self.tool_specs()
            conv = self.open_conversation()
            if conv.pending is not None:
                paused = self.resolve_pending(conv)
                if paused is not None:
                    return paused
            return self.loop(conv)
        finally:
            if self.mcp is not None:
                self.mcp.stop()

    def loop(self, conv: Conversation) -> BackendResponse:
        max_steps = self.req.tool_max_steps or DEFAULT_TOOL_MAX_STEPS
        schema = effective_schema(self.req)
        while True:
            self.host.check()
            # the final-answer turn (no tools offered, or the one repair turn after an answer that
            # missed the schema) asks for the schema in the request, not only in the prompt:
            # a small local model answers a tool turn with prose, but a constrained one with JSON
            final = conv.repaired
            wanted = Output(schema.name, json_schema(schema)) if schema is not None and (
                final or not self.specs) else None
            # the first turn of a conversation may be made to call a tool (small local models do
            # not choose tools by themselves)
            first = not any(m["role"] == "assistant" for m in conv.messages)
            turn = self.wire.turn(model=self.model, system=conv.system, messages=conv.messages,
                                  tools=list(self.specs.values()), max_tokens=self.req.max_tokens,
                                  reasoning_effort=self.req.reasoning_effort, output=wanted, final=final,
                                  force_tool=(os.environ.get(FIRST_TOOL_ENV) or None) if first else None,
                                  progress=Progress(self.host.emit, self.host.check))
            self.tokens_in += turn.tokens_in
            self.tokens_out += turn.tokens_out
            self.cost += turn.cost_usd
            self.host.charge(self.req.model, turn.tokens_in, turn.tokens_out, turn.cost_usd)
            msg: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if turn.calls:
                msg["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls]
            conv.messages.append(msg)
            if turn.calls:
                if conv.steps >= max_steps:
                    convstore.save(self.host.conversations_dir, conv)
                    # not EXECUTION_FAILED: a retry would spend max_steps model calls again
                    raise BackendError(FailureCode.TOOL_STEPS_EXHAUSTED,
                                       f"node {self.req.node_id}: the agent reached tool_max_steps ({max_steps}) "
                                       "without a final answer; raise tool_max_steps or narrow the task")
                conv.steps += 1
                paused = self.run_calls(conv, turn.calls)
                if paused is not None:
                    return paused
                continue
            if turn.truncated and schema is not None:
                raise BackendError(FailureCode.SCHEMA_VALIDATION, f"node {self.req.node_id}: the answer was cut at "
                                   "max_tokens before the JSON closed")
            try:
                output, ask, selected = finish_structured(self.req, turn.text)
            except BackendError as exc:
                if exc.code is not FailureCode.SCHEMA_VALIDATION or conv.repaired:
                    convstore.save(self.host.conversations_dir, conv)
                    raise
                conv.repaired = True  # one repair turn: tell the model what was wrong
                conv.messages.append({"role": "user", "content": f"Your answer was not accepted: {exc.message}. "
                                      "Answer again with only the JSON object the instructions ask for."})
                continue
            if ask is not None:  # the `{"_ask_user": ...}` text convention: no tool-use id to answer
                conv.pending = PendingCall(id="", name="ask_user", arguments={"question": ask})
                convstore.save(self.host.conversations_dir, conv)
                return self.response(conv, ask_user=ask, pause_kind="ask_user")
            convstore.save(self.host.conversations_dir, conv)
            return self.response(conv, output=output, text=turn.text, selected=selected)

    def response(self, conv: Conversation, **kw: Any) -> BackendResponse:
        pause_kind = kw.pop("pause_kind", None)
        extra = kw.pop("extra", {})
        return BackendResponse(session_id=conv.session_id, tokens_in=0, tokens_out=0, cost_usd=0.0,
                               raw={"charged": True, "provider": self.wire.provider, "steps": conv.steps,
                                    "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                                    "cost_usd": self.cost, "pause_kind": pause_kind, **extra}, **kw)

    # -- tool calls -------------------------------------------------------------------------------
    def run_calls(self, conv: Conversation, calls: list[ToolCall] | list[dict[str, Any]]) -> BackendResponse | None:
        pending = [c if isinstance(c, dict) else {"id": c.id, "name": c.name, "arguments": c.arguments,
                                                   "bad_arguments": c.bad_arguments} for c in calls]
        while pending:
            self.host.check()  # a cancel (or the duration cap) stops before the next tool runs
            call = pending.pop(0)
            paused = self.one_call(conv, call, pending)
            if paused is not None:
                return paused
        return None

    def one_call(self, conv: Conversation, call: dict[str, Any], rest: list[dict[str, Any]],
                 *, preapproved: str | None = None) -> BackendResponse | None:
        name, args, cid = call["name"], call.get("arguments") or {}, call["id"]
        if call.get("bad_arguments") is not None:
            return self.result(conv, cid, name, args, None, f"the arguments were not a JSON object: "
                               f"{call['bad_arguments']!r}", 0.0)
        if name not in self.specs:
            return self.result(conv, cid, name, args, None, f"unknown or unavailable tool {name!r}; available: "
                               f"{', '.join(sorted(self.specs))}", 0.0)
        if name == "ask_user":
            question = str(args.get("question") or "").strip()
            if not question:
                return self.result(conv, cid, name, args, None, "ask_user needs a question", 0.0)
            conv.pending = PendingCall(id=cid, name=name, arguments=args, kind="ask_user")
            conv.queued = rest
            convstore.save(self.host.conversations_dir, conv)
            return self.response(conv, ask_user=question, pause_kind="ask_user", extra={"tool_use_id": cid})
        base = {"tool": name, "args_digest": digest(args), "tool_use_id": cid}
        target: Resolved | None = None
        if name in PATH_TOOLS:
            try:  # before any rule: the rules match the canonical path, outside is refused
                target = self.ws.target(name, args)
            except ToolError as exc:
                self.host.emit("permission_decided", {**base, "decision": "deny", "rule": None, "source": "workspace",
                                                      "path": str(args.get("path"))[:PATH_EVENT_CAP], "resolved": None,
                                                      "reason": str(exc)[:RESULT_EVENT_CAP]})
                return self.result(conv, cid, name, args, None, str(exc), 0.0)
        decided = {**args, "path": target.rel} if target is not None else args
        where_path: dict[str, Any] = {}
        if target is not None:
            where_path = {"path": target.requested[:PATH_EVENT_CAP], "resolved": target.rel[:PATH_EVENT_CAP],
                          "protected_by": target.protected}
        protected = target.protected if target is not None else None
        decision = self.host.policy.decide(name, decided, workspace=self.host.workspace, protected=protected)
        # an approval answers an ask, never a deny (a deny rule added on resume, a symlink that now
        # leads to a denied or protected path): the policy is asked again either way
        if preapproved is None or decision.verdict == "deny":
            self.host.emit("permission_decided", {**base, **decision.payload(), **where_path})
            if decision.verdict == "deny":
                if decision.source == PROTECTED_SOURCE:
                    return self.result(conv, cid, name, args, None,
                                       f"{_shown(args.get('path'))} is protected by default ({protected}); only a "
                                       "permission rule naming the path can allow it", 0.0)
                where = f"rule {decision.rule}" if decision.rule else f"mode {self.host.policy.mode}"
                why = f": {decision.reason}" if decision.reason else ""
                return self.result(conv, cid, name, args, None,
                                   f"denied by the permission policy ({where}, {decision.source}){why}", 0.0)
            if decision.verdict == "ask":
                conv.pending = PendingCall(id=cid, name=name, arguments=args, kind="permission")
                conv.queued = rest
                convstore.save(self.host.conversations_dir, conv)
                shown = json.dumps(args, sort_keys=True)
                why = f" ({decision.reason})" if decision.reason else ""
                resolved = f" (the path resolves to {target.rel!r})" \
                    if target is not None and target.rel != args.get("path") else ""
                return self.response(conv, ask_user=f"Allow the agent's call {name}({shown[:500]}){resolved}?{why} "
                                     "Answer approve=yes or approve=no.", pause_kind="permission",
                                     extra={"permission": {"tool": name, "arguments": args, "tool_use_id": cid,
                                                           "rule": decision.rule, **where_path}})
        started = time.monotonic()
        try:
            if name.startswith("mcp."):
                out = self.mcp.call(name, args)
            else:  # the resolved path, unlocked only when a rule (or a person) allowed a protected one
                out = self.ws.call(name, decided, unlocked=target is not None and target.protected is not None,
                                   decided=target.rel if target is not None else None)
            err = None
        except ToolError as exc:
            out, err = None, str(exc)
        except OSError as exc:
            out, err = None, f"{type(exc).__name__}: {exc.strerror or exc}"
        return self.result(conv, cid, name, args, out, err, time.monotonic() - started)

    def result(self, conv: Conversation, cid: str, name: str, args: dict[str, Any], out: str | None,
               err: str | None, seconds: float) -> BackendResponse | None:
        """Append the call's tool result and record it; never pauses (returns None, so callers
        can ``return self.result(...)`` from a step that may pause)."""
        content = _capped(out if err is None else f"error: {err}")
        conv.messages.append({"role": "tool", "tool_call_id": cid, "name": name, "content": content or "",
                              "is_error": err is not None})
        self.host.emit("tool_called", {"tool": name, "args_digest": digest(args), "tool_use_id": cid,
                                       "subject": call_subject(name, args)[:SUBJECT_CAP],
                                       "duration_ms": round(seconds * 1000, 1),
                                       "result_bytes": len((content or "").encode("utf-8", "replace")),
                                       "error": err[:RESULT_EVENT_CAP] if err else None})
        no_pause: BackendResponse | None = None
        return no_pause

    def resolve_pending(self, conv: Conversation) -> BackendResponse | None:
        """Turn the resume's answer into the pending call's tool result, then run the calls that
        were queued behind it. Returns a pause when one of them must pause again."""
        p = conv.pending
        assert p is not None
        answers = self.host.answers
        rest, conv.pending, conv.queued = list(conv.queued), None, []
        if p.kind == "ask_user":
            value = (answers or {}).get("answer", answers)
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            if not p.id:  # the text convention: the answer is the next user message
                conv.messages.append({"role": "user", "content": f"The user answered: {text}"})
            else:
                conv.messages.append({"role": "tool", "tool_call_id": p.id, "name": p.name, "content": text,
                                      "is_error": False})
                self.host.emit("tool_called", {"tool": p.name, "args_digest": digest(p.arguments),
                                               "tool_use_id": p.id, "duration_ms": None,
                                               "result_bytes": len(text.encode()), "error": None})
        else:
            call = {"id": p.id, "name": p.name, "arguments": p.arguments}
            if answers:
                ok = approved(answers)
                self.host.emit("permission_decided", {"tool": p.name, "args_digest": digest(p.arguments),
                                                      "tool_use_id": p.id, "decision": "allow" if ok else "deny",
                                                      "rule": None, "source": "answer"})
                if ok:  # this call only: a later identical call is decided by the policy again
                    paused = self.one_call(conv, call, rest, preapproved="answer")
                else:
                    note = answers.get("reason") or answers.get("note")
                    paused = self.result(conv, p.id, p.name, p.arguments, None,
                                         "the user declined this call" + (f": {note}" if note else ""), 0.0)
            else:  # resumed without answers: the rebuilt policy decides (an allow rule added on resume)
                paused = self.one_call(conv, call, rest)
            if paused is not None:
                return paused
        return self.run_calls(conv, rest)


def _shown(raw: Any) -> str:
    return repr(str(raw))[:SUBJECT_CAP] if raw is not None else "(none)"


def _capped(text: str | None) -> str | None:
    """At most RESULT_CAP bytes of a result, with a note the model can act on."""
    if text is None:
        return None
    data = text.encode("utf-8", "replace")
    if len(data) <= RESULT_CAP:
        return text
    return (data[:RESULT_CAP].decode("utf-8", "ignore")
            + f"\n[... truncated: the result was {len(data)} bytes, only the first {RESULT_CAP} are shown; "
            "ask for less (a narrower path or pattern)]")


def run_agent(request: BackendRequest, host: AgentHost, wires: dict[str, Wire]) -> BackendResponse:
    provider, model = resolve_provider(request.model, request.provider)
    if not model:
        raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                           f"node {request.node_id}: the claw backend needs a model (set `model:` on the node)")
    return AgentLoop(request, host, wires[provider], model).run()
