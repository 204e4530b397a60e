"""What the backends that delegate a node to an agent CLI (claude_code, codex) share: finding the
binary, running it in the run's workspace with the prompt on stdin, stopping its whole process
group on a timeout (the agent runs commands of its own), and naming a failure by its message.

The CLI runs under the launcher (``iterion.engine.tether``: it dies with iterion, SIGKILL
included) in its own process group, registered with the run (``request.processes``, an
``iterion.engine.children.CallProcesses``: a cancel, SIGTERM/SIGINT of iterion or the run's
duration cap end it, and the run document records it while it lives). Every ending is the same:
SIGTERM to the group, ``$ITERION_AGENT_CLI_GRACE_S`` (default 3 s) to exit, then SIGKILL.

Time limit: the backend option ``timeout_s``, else ``$ITERION_AGENT_CLI_TIMEOUT`` (seconds,
default 3600), per invocation (docs/user-guide.md "Backends").

Each backend keeps only what is its own: the argv, the prompt's layout and how to read the
CLI's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import IO, Any, ClassVar

from iterion.backends.base import Backend, BackendError, BackendRequest, setting_seconds
from iterion.engine.procgroup import end_group
from iterion.engine.tether import tethered
from iterion.failure_codes import FailureCode

TIMEOUT_ENV, DEFAULT_TIMEOUT_S = "ITERION_AGENT_CLI_TIMEOUT", 3600.0
GRACE_ENV, DEFAULT_GRACE_S = "ITERION_AGENT_CLI_GRACE_S", 3.0
_POLL_S = 0.1

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
        given = self.options.get("timeout_s")
        self.timeout_s: float | None = float(given) if given else None  # else the setting, read at use

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
        stdin; BACKEND_UNAVAILABLE when it cannot start, TIMEOUT (its process group ended) when
        it outlives the time limit, CANCELLED when the run stops it."""
        timeout = request.timeout_s or self.timeout_s or setting_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)
        grace = setting_seconds(GRACE_ENV, DEFAULT_GRACE_S, zero_ok=True)
        with ExitStack() as files:
            # files, not pipes: nothing to pump while waiting, and a child left holding them
            # cannot hold the node
            stdin, out_f, err_f = (files.enter_context(tempfile.TemporaryFile()) for _ in range(3))
            stdin.write(prompt.encode("utf-8", "surrogateescape"))
            stdin.seek(0)
            try:
                proc = subprocess.Popen(tethered(request.wrap_argv(argv) if request.wrap_argv else argv), stdin=stdin, stdout=out_f, stderr=err_f,
                                        cwd=request.workspace_dir or None, start_new_session=True)
            except OSError as exc:
                raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                                   f"cannot start {argv[0]}: {exc}; {self.install_hint}") from None
            with _registered(request, proc.pid, grace, f"{self.name} {request.node_id}"):
                deadline = time.monotonic() + timeout
                while True:
                    try:
                        proc.wait(timeout=_POLL_S)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if time.monotonic() >= deadline:
                        # the CLI may have spawned tools: end its whole process group
                        end_group(proc.pid, grace)
                        proc.wait()
                        raise BackendError(FailureCode.TIMEOUT, f"{self.command} did not finish node "
                                           f"{request.node_id} within {timeout:g}s (${TIMEOUT_ENV})")
                # the run stopping it (``request.processes.stop``, which ends the group) is not the
                # CLI's own failure
                if request.processes is not None and request.processes.stopping:
                    raise BackendError(FailureCode.CANCELLED, f"{self.command} was stopped on node {request.node_id}")
            return _text(out_f), _text(err_f), proc.returncode


@contextmanager
def _registered(request: BackendRequest, pgid: int, grace: float, what: str) -> Iterator[None]:
    """The CLI's group, known to the run while it lives (nothing when run outside a run)."""
    if request.processes is None:
        yield
        return
    with request.processes.group(pgid, grace_s=grace, what=what):
        yield


def _text(fh: IO[bytes]) -> str:
    fh.seek(0)
    return fh.read().decode("utf-8", "replace")
