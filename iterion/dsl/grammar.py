"""The vocabulary of the `.bot` language: keywords, types, and which properties each declaration takes.

One table read by the parser (unknown property => P007) and by the compiler (what each
property means), so the two cannot disagree.
"""

from __future__ import annotations

import difflib

NODE_KINDS = ("agent", "judge", "router", "human", "tool", "compute", "fail", "subbot")

# Declarations accepted and kept without being executed (docs/language.md: "may parse and keep").
NAMED_EXTENSIONS = ("mcp_server", "cursor")
BLOCK_EXTENSIONS = ("sandbox", "compaction", "tool_policy", "capabilities", "mcp", "memory")
# Kept like BLOCK_EXTENSIONS, but only as a workflow setting (`permission:` is a workflow-scope
# setting a resume can override). `memory:` is an agent/judge block only
# (docs/language.md §2), so a workflow `memory:` is an unknown property like in the original.
WORKFLOW_EXTENSIONS = (*(b for b in BLOCK_EXTENSIONS if b != "memory"), "permission")

# docs/language.md §2: the top level holds vars/presets/attachments, the named declarations, import and
# the workflow; anything else (a top-level `sandbox:` too) is an unknown keyword (P006).
TOP_LEVEL_KEYWORDS = (
    "vars", "presets", "attachments", "prompt", "schema", *NODE_KINDS, "import", "workflow",
    *NAMED_EXTENSIONS,
)

TYPES = ("string", "bool", "int", "float", "json", "string[]", "file")
VAR_TYPES = ("string", "bool", "int", "float", "json", "string[]")

TERMINAL_NAMES = ("done", "fail")

_LLM = ("model", "backend", "provider", "input", "output", "system", "user", "publish", "session", "tools",
        "tool_max_steps", "max_tokens", "reasoning_effort", "readonly", "interaction", "interaction_prompt",
        "interaction_model", "await", "cursors")

NODE_PROPERTIES: dict[str, tuple[str, ...]] = {
    "agent": _LLM + BLOCK_EXTENSIONS,
    "judge": _LLM + BLOCK_EXTENSIONS,
    # a router takes no await, input or output, a human no backend: unknown properties (docs/language.md §2, §2.6)
    "router": ("mode", "model", "backend", "provider", "system", "user", "multi", "reasoning_effort"),
    "human": ("input", "output", "instructions", "interaction", "interaction_prompt", "interaction_model",
              "min_answers", "model", "system", "publish", "await"),
    # a tool takes no publish (docs/language.md §2) and of the shared blocks only sandbox (2.9); a compute
    # only input/output/await/expr (2.8)
    "tool": ("command", "script", "language", "input", "output", "await", "sandbox"),
    "compute": ("input", "output", "expr", "await"),
    "fail": ("code", "message", "resumable"),
    # extension (docs/language.md 2.14): a child workflow run as one node
    "subbot": ("source", "with", "input", "output", "await"),
}

LLM_ROUTER_ONLY = ("model", "backend", "system", "user", "multi", "reasoning_effort")

WORKFLOW_PROPERTIES = ("entry", "budget", "worktree", "default_backend", "interaction", "attachments",
                       "push_checkpoints", "push_every", *WORKFLOW_EXTENSIONS)
BUDGET_PROPERTIES = ("max_parallel_branches", "max_duration", "max_cost_usd", "max_tokens", "max_iterations")
ATTACHMENT_PROPERTIES = ("description", "accept_mime", "required")
ATTACHMENT_KINDS = ("file", "image")

SESSIONS = ("fresh", "inherit", "inherit_if_available", "fork", "artifacts_only")
REASONING_EFFORTS = ("low", "medium", "high", "xhigh", "max")
INTERACTIONS = ("none", "human", "llm", "llm_or_human")
AWAIT_MODES = ("wait_all", "best_effort")
ROUTER_MODES = ("fan_out_all", "condition", "round_robin", "llm")
# script `language:` -> the interpreter it runs with (docs/language.md §2); absent: sh
LANGUAGES = ("sh", "bash", "js", "node", "py", "python", "python3")
LANGUAGE_INTERPRETERS = {"sh": "sh", "bash": "bash", "js": "node", "node": "node", "py": "python3",
                         "python": "python3", "python3": "python3"}
WORKTREE_MODES = ("auto", "none")


def suggest(word: str, choices: tuple[str, ...] | list[str]) -> str | None:
    """A "did you mean" hint, or a list of the choices when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if len(choices) <= 24:
        return "expected one of: " + ", ".join(choices)
    return None


# Names the original reads as keywords (docs/language.md §1): a prompt named by one is not recognised
# (its body fails to parse), and a node named like a workflow-body keyword cannot start an edge.
WORKFLOW_BODY_KEYWORDS = (*WORKFLOW_PROPERTIES, "vars")
KEYWORDS = frozenset((*TOP_LEVEL_KEYWORDS, *WORKFLOW_BODY_KEYWORDS, *(p for props in NODE_PROPERTIES.values() for p in props),
                      "when", "as", "with", "not")) - set(TERMINAL_NAMES)
