"""Which backend an LLM node runs on: the one home of the resolution order (docs/language.md §2.4).

``resolve_backend`` walks, first match wins:

1. ``--backend NAME`` (run / resume override);
2. the node's ``backend:``;
3. the workflow's ``default_backend:``;
4. ``$ITERION_DEFAULT_BACKEND``;
5. ``$ITERION_BACKEND`` (this implementation's older variable, kept for existing users);
6. ``script`` when a script file is given (``--script``, ``<workflow>.script.yaml`` beside the
   file, or ``$ITERION_SCRIPT_FILE``);
7. a detected backend (``detect_backend``);
8. ``claw``.

Steps 1-5 are skipped when their value is empty or ``auto`` (any case) once ``${...}`` is
expanded (node-run-time expansion, §1.7), so ``backend: "${B}"`` with B unset, or
``backend: "auto"``, falls through to the next step.

Detection (``detect_backend``) reads only the environment it is given, never the disk beyond
PATH look-ups: ``claw`` when a credential or endpoint it can use is set (``$ANTHROPIC_API_KEY``,
``$ANTHROPIC_BASE_URL``, ``$OPENAI_API_KEY``, ``$OPENAI_BASE_URL``), else ``claude_code`` when
its CLI is found (``$ITERION_CLAUDE_BIN``, else ``claude`` on that environment's PATH), else
``codex`` when its CLI is found (``$ITERION_CODEX_BIN``, else ``codex`` on that PATH), else
nothing (codex comes last: a host that detected a backend before codex was added still does).
The same detection decides the compile-time C018 exception ("the host has a detectable backend
credential"), so ``iterion validate`` and ``iterion run`` agree on a given machine.

Pure functions of their arguments and the mapping passed as ``env``: nothing here reads
``os.environ`` by itself, which keeps the verdicts testable.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from iterion.envsubst import expand_node

AUTO = "auto"
CLAW = "claw"
SCRIPT = "script"
CLAUDE_CODE = "claude_code"
CODEX = "codex"
DEFAULT_ENV = "ITERION_DEFAULT_BACKEND"
LEGACY_ENV = "ITERION_BACKEND"
SCRIPT_ENV = "ITERION_SCRIPT_FILE"
CLAUDE_BIN_ENV = "ITERION_CLAUDE_BIN"
CODEX_BIN_ENV = "ITERION_CODEX_BIN"
# what the claw backend can talk to (iterion/backends/claw/wire.py), in the order detection names them
CLAW_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")

ORDER_TEXT = ("a node's backend: --backend NAME, else the node's backend:, else the workflow's default_backend: "
              f"(each skipped when empty or \"auto\"), else ${DEFAULT_ENV}, else ${LEGACY_ENV}, "
              f"else script when a script file is given (--script, <workflow>.script.yaml beside the file, "
              f"${SCRIPT_ENV}), else a detected backend (claw when "
              f"{'/'.join('$' + v for v in CLAW_CREDENTIALS)} is set, else claude_code when its CLI is on PATH, "
              "else codex when its CLI is on PATH), else claw")


@dataclass(frozen=True)
class Choice:
    """A backend name and the step of the order that chose it (``source``, for messages)."""

    name: str
    source: str

    def describe(self) -> str:
        return f"{self.name} ({self.source})"


def is_auto(value: str | None) -> bool:
    """Empty or ``auto``: the value leaves the choice to the next step of the order."""
    v = (value or "").strip()
    return not v or v.lower() == AUTO


def declared_backend(node_backend: str | None, workflow_backend: str | None) -> str | None:
    """The backend the source names for a node, as written (no expansion): its own unless empty or
    ``auto``, else the workflow's unless empty or ``auto``; None when the choice is left to the
    run (--backend, the environment, detection). For static checks (C047)."""
    for value in (node_backend, workflow_backend):
        if not is_auto(value):
            return str(value).strip()
    return None


def detect_backend(env: Mapping[str, str]) -> Choice | None:
    """The backend this host can use without being told (see the module docstring), or None."""
    for var in CLAW_CREDENTIALS:
        if env.get(var, "").strip():
            return Choice(CLAW, f"detected: ${var} is set")
    for name, var, command in ((CLAUDE_CODE, CLAUDE_BIN_ENV, "claude"), (CODEX, CODEX_BIN_ENV, "codex")):
        binary = env.get(var, "").strip()
        # the PATH of ``env``, not of this process: "" finds a bare name nowhere, an explicit path directly
        found = shutil.which(binary or command, path=env.get("PATH", ""))
        if found:
            how = f"${var}" if binary else f"the {command} CLI on PATH"
            return Choice(name, f"detected: {how} ({found})")
    return None


def resolve_backend(env: Mapping[str, str], *, override: str | None = None, node_backend: str | None = None,
                    workflow_backend: str | None = None, node_id: str | None = None,
                    script_file: str | None = None) -> Choice:
    """The backend a node runs on (see the module docstring for the order). The name is returned
    as written (the registry resolves aliases and refuses unknown names)."""
    if not is_auto(override):
        return Choice(str(override).strip(), "--backend")
    own = expand_node(node_backend or "", env)
    if not is_auto(own):
        return Choice(own.strip(), f"node {node_id}'s backend:" if node_id else "the node's backend:")
    default = expand_node(workflow_backend or "", env)
    if not is_auto(default):
        return Choice(default.strip(), "the workflow's default_backend:")
    for var in (DEFAULT_ENV, LEGACY_ENV):
        if not is_auto(env.get(var)):
            return Choice(env[var].strip(), f"${var}")
    if script_file:
        return Choice(SCRIPT, "a script file is given")
    if env.get(SCRIPT_ENV, "").strip():
        return Choice(SCRIPT, f"${SCRIPT_ENV} is set")
    return detect_backend(env) or Choice(CLAW, "nothing chose or detected one: the default")


def check_model_override(value: object) -> str | None:
    """A ``--model`` override (run, resume, HTTP, queue) as given, or None when absent; raises
    ValueError naming the problem for anything that cannot be a model name (the one home of the
    rule, so the CLI and the server refuse the same values)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("model must be a string, e.g. openai/gpt-4o")
    if not value.strip() or value != value.strip() or any(c in value for c in "\n\r\t\0"):
        raise ValueError(f"model {value!r} is not a model name: give one word such as openai/gpt-4o")
    return value
