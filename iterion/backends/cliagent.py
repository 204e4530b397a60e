"""What the backends that delegate a node to an agent CLI (claude_code, codex) share: finding the
binary, running it in the run's workspace with the prompt on stdin, stopping its whole process
group on a timeout (the agent runs commands of its own), and naming a failure by its message.

Each backend keeps only what is its own: the argv, the prompt's layout and how to read the
CLI's output.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from typing import Any, ClassVar

from iterion.backends.base import Backend, BackendError, BackendRequest
from iterion.failure_codes import FailureCode

# (words found in a failure's message, the code it gets): first match wins
Markers = tuple[tuple[tuple[str, ...], FailureCode], ...]


def classify(text: str, markers: Markers) -> FailureCode:
    """The failure code of a CLI's failure message: the first marker found, else EXECUTION_FAILED."""
    lowered = text.lower()
    for words, code in markers:
        if any(w in lowered for w in words):
            return code
    return FailureCode.EXECUTION_FAILED


def strip_provider(model: str, provider: str) -> str:
    """``anthropic/claude-sonnet-4-6`` -> ``claude-sonnet-4-6`` for the CLI of that provider
    (the README's ``provider/model`` form is iterion's, not the CLI's)."""
    prefix, sep, rest = model.partition("/")
    return rest if sep and rest and prefix.lower() == provider else model


def resumed(request: BackendRequest) -> bool:
    """An ask_user resume continuing the CLI's own session (the answer is all it needs)."""
    return bool(request.session_id) and request.prior_answer is not None


def answer_text(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(answer, sort_keys=True, default=str)


def iterion_sandbox_active(request: BackendRequest) -> bool:
    """Does iterion's own (bubblewrap) sandbox wrap this CLI? (``wrap_argv`` is set exactly for a
    sandboxed node: iterion/sandbox.)"""
    return request.wrap_argv is not None


class CliAgentBackend(Backend):
    """A backend whose node runs as one invocation of an agent CLI."""

    command: ClassVar[str]      # the CLI's name on PATH ("claude", "codex")
    option: ClassVar[str]       # the backend option naming its binary ("claude_bin")
    env: ClassVar[str]          # the environment variable naming it ("ITERION_CLAUDE_BIN")
    install_hint: ClassVar[str]

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self.binary = str(self.options.get(self.option) or os.environ.get(self.env) or self.command)
        self.timeout_s = float(self.options.get("timeout_s") or 3600)

    def executable(self) -> str:
        found = shutil.which(self.binary)
        if found is None:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"the {self.name} backend needs the `{self.command}` CLI, and {self.binary!r} is "
                               f"not installed (not found on PATH); {self.install_hint}")
        return found

    def availability(self) -> tuple[bool, str]:
        found = shutil.which(self.binary)
        return ((True, f"{self.command} CLI at {found}") if found
                else (False, f"`{self.binary}` not found; {self.install_hint}"))

    def run_cli(self, argv: list[str], prompt: str, request: BackendRequest) -> tuple[str, str, int]:
        """(stdout, stderr, exit status) of ``argv`` run in the run's workspace, ``prompt`` on its
        stdin; BACKEND_UNAVAILABLE when it cannot start, TIMEOUT (its process group killed) when
        it outlives the node's timeout."""
        timeout = request.timeout_s or self.timeout_s
        try:
            proc = subprocess.Popen(request.wrap_argv(argv) if request.wrap_argv else argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, cwd=request.workspace_dir or None, start_new_session=True)
        except OSError as exc:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"cannot start {argv[0]}: {exc}; {self.install_hint}") from None
        try:
            out, err = proc.communicate(prompt, timeout=timeout)
        except subprocess.TimeoutExpired:
            # the CLI may have spawned tools: stop its whole process group
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise BackendError(FailureCode.TIMEOUT,
                               f"{self.command} did not finish node {request.node_id} within {timeout:g}s") from None
        return out, err, proc.returncode
