"""The deterministic ``script`` backend: answers come from a JSON or YAML file.

File shape (keys are node ids; per node, a mapping keyed by iteration with ``"*"`` as the
fallback, or a list indexed by iteration whose last entry repeats; a top-level ``"*"`` answers
any node not listed)::

    review:
      "0": {output: {approved: false, summary: "needs work"}, tokens_in: 120, tokens_out: 30, cost_usd: 0.01}
      "1": {approved: true, summary: "ok"}          # a bare mapping is the output itself
      "*": {output: {approved: true, summary: "ok"}}
    plan: [{text: "step 1"}, {text: "step 2"}]
    flaky:
      "0": {attempts: [{error: {code: RATE_LIMITED, message: "slow down"}}, {output: {ok: true}}]}
    ask:
      "0": {ask_user: "Which branch?", after_answer: {output: {branch: "main"}}}
    route: {"*": {select: implement}}

Entry keys: ``output``, ``text``, ``tokens_in``, ``tokens_out``, ``cost_usd``, ``session_id``,
``ask_user`` (ask instead of answering unless the request carries an answer, which then uses
``after_answer`` when given), ``select`` (llm router target or list), ``error`` (a code, or
``{code, message, retry_after_s}``), ``echo`` (true: the output is the prompts the node sent,
``{system, user}``, so a test sees what reached the model), ``sleep_s`` (simulate a slow call), ``attempts`` (a list used in order
across calls, the count kept in a state file so it survives a process restart; the last one
repeats). The file is re-read on every call so a test can edit it between a failure and a resume.
Path: ``options["script_file"]`` or ``$ITERION_SCRIPT_FILE``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitrefs.persist import file_lock
from gitrefs.persist.inputs import SOURCE_LIMIT
from iterion.backends.base import Backend, BackendError, BackendRequest, BackendResponse
from iterion.backends.schema import check_output, selected_targets
from iterion.datafile import DataFileError, read_mapping
from iterion.failure_codes import FailureCode

SCRIPT_ENV = "ITERION_SCRIPT_FILE"
_ENTRY_KEYS = frozenset({"output", "text", "tokens_in", "tokens_out", "cost_usd", "session_id", "ask_user",
                         "after_answer", "select", "error", "sleep_s", "attempts", "echo"})


def _unavailable(message: str) -> BackendError:
    return BackendError(FailureCode.BACKEND_UNAVAILABLE, message)


SCRIPT_SUFFIXES = (".script.yaml", ".script.yml", ".script.json")


def find_script_file(source: Path) -> str | None:
    """``demo.bot`` -> ``demo.script.yaml`` beside it (the script backend's answers), if present.
    (Here, not in the engine: `iterion validate` asks it without loading the engine.)"""
    base = source / "main" if source.is_dir() else source.with_suffix("")
    for suffix in SCRIPT_SUFFIXES:
        cand = base.parent / (base.name + suffix)
        if cand.is_file():
            return str(cand.resolve())
    return None


class ScriptBackend(Backend):
    name = "script"

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        raw = self.options.get("script_file") or os.environ.get(SCRIPT_ENV)
        self.path: Path | None = Path(raw) if raw else None
        state = self.options.get("script_state_file")
        self.state_path: Path | None = Path(state) if state else (
            self.path.with_name(f".{self.path.name}.state.json") if self.path else None)

    def availability(self) -> tuple[bool, str]:
        if self.path is None:
            return False, f"no script file (set ${SCRIPT_ENV} or pass --script FILE)"
        if not self.path.is_file():
            return False, f"script file {self.path} does not exist"
        return True, f"answers from {self.path}"

    # -- file -------------------------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        if self.path is None:
            raise _unavailable(f"the script backend needs a script file: set ${SCRIPT_ENV} or the run's "
                               "script_file option")
        try:
            return read_mapping(self.path, "script file", shape="must map node ids to answers", limit=SOURCE_LIMIT,
                                fmt="yaml")
        except DataFileError as exc:
            raise _unavailable(str(exc)) from None

    def _entry(self, request: BackendRequest) -> dict[str, Any]:
        data = self._load()
        per_node = data.get(request.node_id, data.get("*"))
        if per_node is None:
            raise _unavailable(f"script file {self.path} has no answer for node {request.node_id}")
        entry: Any
        if isinstance(per_node, dict):
            per_node = {str(k): v for k, v in per_node.items()}  # YAML reads `0:` as an int key
        if isinstance(per_node, list):
            if not per_node:
                raise _unavailable(f"script file {self.path}: node {request.node_id} has an empty list")
            entry = per_node[min(request.iteration, len(per_node) - 1)]
        elif isinstance(per_node, dict) and (str(request.iteration) in per_node or "*" in per_node):
            entry = per_node.get(str(request.iteration), per_node.get("*"))
        elif isinstance(per_node, dict) and per_node and all(isinstance(k, str) and k.isdigit() for k in per_node):
            raise _unavailable(f"script file {self.path} has no answer for node {request.node_id} "
                               f"iteration {request.iteration} (and no \"*\" fallback)")
        else:
            entry = per_node  # one answer for every iteration
        if not isinstance(entry, dict):
            entry = {"text": entry} if isinstance(entry, str) else {"output": entry}
        if "attempts" in entry:
            entry = self._next_attempt(request, entry["attempts"])
        return entry

    def _next_attempt(self, request: BackendRequest, attempts: Any) -> dict[str, Any]:
        if not isinstance(attempts, list) or not attempts:
            raise _unavailable(f"script file {self.path}: node {request.node_id} attempts must be a non-empty list")
        key = f"{request.run_id or ''}/{request.node_id}/{request.iteration}"
        n = 0
        if self.state_path is not None:
            # fan-out branches count their attempts concurrently: one read-modify-write at a time
            with file_lock(self.state_path.with_name(self.state_path.name + ".lock")):
                state: dict[str, int] = {}
                if self.state_path.is_file():
                    state = json.loads(self.state_path.read_text() or "{}")
                n = state.get(key, 0)
                state[key] = n + 1
                self.state_path.write_text(json.dumps(state))
        chosen = attempts[min(n, len(attempts) - 1)]
        return chosen if isinstance(chosen, dict) else {"output": chosen}

    # -- call -------------------------------------------------------------------------------------
    def complete(self, request: BackendRequest) -> BackendResponse:
        entry = self._entry(request)
        if entry.get("sleep_s"):
            time.sleep(float(entry["sleep_s"]))
        if "error" in entry:
            err = entry["error"]
            code, message = (err.get("code"), err.get("message")) if isinstance(err, dict) else (err, None)
            retry_after = err.get("retry_after_s") if isinstance(err, dict) else None
            try:
                fc = FailureCode(str(code))
            except ValueError:
                raise _unavailable(f"script file {self.path}: unknown failure code {code!r}") from None
            raise BackendError(fc, message or f"scripted {fc.value} for node {request.node_id}",
                               retry_after_s=None if retry_after is None else float(retry_after))
        if entry.get("ask_user") and request.prior_answer is None:
            # a session id so the resume can say "continue this conversation"
            entry = {"session_id": f"script-{request.node_id}-{request.iteration}", **entry}
            return self._response(entry, ask_user=str(entry["ask_user"]))
        if entry.get("ask_user") and isinstance(entry.get("after_answer"), dict):
            entry = {**entry, **entry["after_answer"]}
        output = entry.get("output")
        if entry.get("echo") is True:
            output = {"system": request.system, "user": request.user}
        if output is None and not any(k in entry for k in _ENTRY_KEYS):
            output = entry  # a bare mapping is the output itself
        selected: tuple[str, ...] = ()
        if request.choices:
            pick = entry.get("select", request.choices[0])
            picks = pick if isinstance(pick, list) else [pick]
            key = "targets" if request.multi else "target"
            selected = selected_targets(request, {key: picks if request.multi else picks[0]})
            output = output if output is not None else {key: list(selected) if request.multi else selected[0]}
        elif request.output_schema is not None:
            if output is None:
                raise BackendError(FailureCode.SCHEMA_VALIDATION,
                                   f"script answer for node {request.node_id} has no output for schema "
                                   f"{request.output_schema.name}")
            check_output(request.output_schema, output, node_id=request.node_id)
        return self._response(entry, output=output, selected=selected)

    def _response(self, entry: dict[str, Any], *, output: Any = None, ask_user: str | None = None,
                  selected: tuple[str, ...] = ()) -> BackendResponse:
        text = entry.get("text")
        if text is None and output is not None:
            text = json.dumps(output, sort_keys=True)
        return BackendResponse(output=output if isinstance(output, dict) else None,
                               text=None if text is None else str(text),
                               tokens_in=int(entry.get("tokens_in", 0)), tokens_out=int(entry.get("tokens_out", 0)),
                               cost_usd=float(entry.get("cost_usd", 0.0)), session_id=entry.get("session_id"),
                               ask_user=ask_user, selected=selected)
