"""The tool-permission policy: which tool calls an agent may make, must ask for, or may not make.

A rule is ``TOOL`` or ``TOOL(PATTERN)``:

* ``TOOL`` is a tool name (``bash``, ``write_file``, ``mcp.github.get_issue``) or a glob over
  names (``mcp.github.*``, ``*``);
* ``PATTERN`` is a glob over the call's subject: the command of ``bash``, the canonical
  workspace-relative path of the file tools (``read_file``, ``write_file``, ``edit_file``,
  ``list_dir``, ``grep``; resolved before any rule: symlinks, ``..`` and absolute paths, see
  docs/technical/permissions.md), the pattern of ``glob``, the question of ``ask_user``, and
  for any other tool (MCP) its arguments as canonical JSON. A compound shell command is judged
  per simple command (an allow rule must cover each; a deny/ask rule catches any). In a path
  pattern ``*`` stays inside one directory, ``**`` crosses directories and ``dir/**`` covers
  ``dir`` too; in any other subject ``*`` matches anything (``bash(git *)``). No pattern means
  every call of the tool.

A ``bash`` command is parsed (iterion/shellcommands.py) and judged per part: every simple command
wherever it sits (substitutions, subshells, wrappers such as ``sudo``/``xargs``/``find -exec``),
each part the parser cannot understand, and each redirection writing outside the workspace. Each
part is decided like a call of its own; the strictest part decides the call
(docs/technical/bash-rules.md).

Layers, lowest first: the workflow's ``permission:`` block, the launch's ``--permission*`` flags,
then each resume's. The highest layer with a matching rule decides (so an allow given on a
resume authorizes a call a launch-time ``ask`` rule paused on); within one layer deny beats
ask beats allow. No matching rule: the mode of the highest layer that sets one decides
(``allow`` by default, ``ask``, ``deny``).

A call on a protected path (a git dir, the run store, a hard-linked file for writes: the claw
tools say which) is decided by rules with a pattern only: neither the mode nor a rule without a
pattern (``read_file``, ``*``) lets it through, a matching ``read_file(.git/config)`` does; no
such rule: deny.

Invariant: ``decide`` is a pure function of the policy and the call; the policy is rebuilt from
its layers on every launch and resume, never cached in a checkpoint.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitrefs.persist import UserError

if TYPE_CHECKING:
    from iterion.shellcommands import Analysis

Verdict = Literal["allow", "ask", "deny"]
VERDICTS: tuple[Verdict, ...] = ("allow", "ask", "deny")
MODES: tuple[str, ...] = VERDICTS
PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "grep"})
PROTECTED_SOURCE = "protected_default"  # a Decision's source when the protected defaults refused
_RULE = re.compile(r"^\s*([A-Za-z0-9_.*?\-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


class PermissionError_(UserError):
    """A malformed rule or mode (a launch/resume flag or the workflow's ``permission:`` block)."""


@dataclass(frozen=True)
class Rule:
    tool: str               # a name or a glob over names
    pattern: str | None     # a glob over the call's subject, or None (every call)
    verdict: Verdict
    source: str = ""        # where it came from, for events: "workflow", "launch", "resume"

    def text(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def matches(self, tool: str, args: Mapping[str, Any], *, workspace: Path | str | None = None) -> bool:
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if self.pattern is None:
            return True
        subject = call_subject(tool, args)
        if tool in PATH_TOOLS:
            return path_glob(self.pattern, subject)
        if tool == "bash":
            return _bash_matches(self, subject, workspace)
        return fnmatch.fnmatchcase(subject, self.pattern)


# -- bash: rules on the parsed command (iterion/shellcommands.py) ---------------------------------
# Programs in these directories are judged by their base name by an allow rule too (``/usr/bin/git``
# is ``git``); elsewhere (``./git``, ``/tmp/x/git``) only a deny or ask rule sees the base name.
_SYSTEM_BIN = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"})


@dataclass(frozen=True)
class BashPart:
    """One thing a bash command does that a rule is matched against.

    ``command``: a simple command (``texts``: as written and with the program's base name);
    ``opaque``: something the parser cannot understand (matched by every deny/ask rule of bash,
    by an allow rule only when its pattern is all ``*``); ``write``: a redirection writing outside
    the workspace or into ``.git/`` (``> /abs/path``; refused unless a rule matches it); ``whole``:
    the command's whole text, so a deny/ask pattern spanning commands still works (``bash(*| sh)``);
    it needs no allow."""
    kind: Literal["command", "opaque", "write", "whole"]
    texts: tuple[str, ...]
    allow_texts: tuple[str, ...] = ()
    needs_allow: bool = True   # False: no rule matching it leaves it allowed (a transparent wrapper)
    reason: str | None = None  # why it is opaque or a write, for the decision the model sees

    def matched_by(self, rule: Rule) -> bool:
        if rule.pattern is None:
            return True
        if self.kind == "opaque":
            return rule.verdict != "allow" or rule.pattern.strip("*") == ""
        texts = self.allow_texts if rule.verdict == "allow" else self.texts
        return any(fnmatch.fnmatchcase(t, rule.pattern) for t in texts)


def bash_parts(command: str, workspace: Path | str | None = None) -> tuple[BashPart, ...]:
    """What a ``bash`` call is judged on. ``workspace`` (the directory the command runs in) places
    redirection targets; without it they are not judged."""
    from iterion.shellcommands import realpath_within

    root = os.path.realpath(workspace) if workspace is not None else None
    a = _analysis(command, root, os.path.expanduser("~"))
    whole = (command.strip(),)
    parts: list[BashPart] = [BashPart("whole", whole, whole, needs_allow=False)]
    for inv in a.invocations:
        texts = (inv.text, inv.base_text) if inv.base_text != inv.text else (inv.text,)
        system = os.path.dirname(inv.program) in _SYSTEM_BIN
        allow_texts = texts if (system or "/" not in inv.program) else (inv.text,)
        parts.append(BashPart("command", texts, allow_texts, inv.needs_allow))
    for o in a.opaque:
        parts.append(BashPart("opaque", (o.snippet,), reason=f"{o.reason}: {o.snippet!r}"))
    if root is not None:
        for w in a.writes:
            if w.path is None:
                parts.append(BashPart("write", (f"> {w.target}",), (f"> {w.target}",),
                                      reason=f"writes {w.target}, which may be outside the workspace"))
                continue
            real = os.path.realpath(w.path)
            if not realpath_within(real, root):
                parts.append(BashPart("write", (f"> {real}",), (f"> {real}",),
                                      reason=f"writes {real}, outside the workspace"))
            elif ".git" in os.path.relpath(real, root).split(os.sep):
                parts.append(BashPart("write", (f"> {real}",), (f"> {real}",),
                                      reason=f"writes {real}, inside the repository's .git/"))
    if not any(p.kind == "command" and p.needs_allow for p in parts) and not a.opaque:
        # nothing runs (an assignment, an empty text): an allow rule must still cover the text
        parts.append(BashPart("command", (command.strip(),), (command.strip(),)))
    return tuple(parts)


@lru_cache(maxsize=256)
def _analysis(command: str, root: str | None, home: str) -> Analysis:
    """The parse is cached (a call is judged once per rule); where a write lands is not, since
    symlinks change between calls."""
    from iterion.shellcommands import analyze

    return analyze(command, cwd=root, home=home)


def _bash_matches(rule: Rule, command: str, workspace: Path | str | None) -> bool:
    """One rule against a command: an allow rule must cover every part that needs an allow
    (``bash(git *)`` does not cover ``git x; rm -rf ~`` nor ``git diff <(rm -rf ~)``); a deny or
    ask rule matches when any part does."""
    parts = bash_parts(command, workspace)
    if rule.verdict == "allow":
        return all(p.matched_by(rule) for p in parts if p.needs_allow)
    return any(p.matched_by(rule) for p in parts)


def parse_rule(text: str, verdict: Verdict, source: str = "") -> Rule:
    """``bash(git *)`` -> Rule; a malformed rule is a PermissionError_ naming the fix."""
    m = _RULE.match(text or "")
    if m is None:
        raise PermissionError_(f"permission rule {text!r} is not TOOL or TOOL(PATTERN)",
                               hint='e.g. --permission-allow "bash(git *)" or "write_file(docs/**)" or "mcp.github.*"')
    tool, pattern = m.group(1), m.group(2)
    if pattern is not None and not pattern.strip():
        pattern = None
    return Rule(tool, pattern, verdict, source)


def call_subject(tool: str, args: Mapping[str, Any]) -> str:
    """What a rule's pattern is matched against (see the module docstring)."""
    if tool == "bash":
        return str(args.get("command", ""))
    if tool in PATH_TOOLS:
        raw = str(args.get("path", "") or ".")
        return _norm_path(raw)
    if tool == "glob":
        return str(args.get("pattern", ""))
    if tool == "ask_user":
        return str(args.get("question", ""))
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"), default=str)


def _norm_path(raw: str) -> str:
    parts: list[str] = []
    for p in raw.replace("\\", "/").split("/"):
        if p in ("", "."):
            continue
        if p == ".." and parts:
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts) or "."


# the pieces of a path glob: a literal character, ? and * (inside one directory), ** (anything),
# **/ (nothing, or anything ending in /) and a final /** (nothing, or / and anything)
_LIT, _ONE, _STAR, _ANY, _DIRS, _UNDER = range(6)


def _glob_tokens(pattern: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append((_UNDER, ""))
            i += 3
        elif pattern.startswith("**/", i):
            out.append((_DIRS, ""))
            i += 3
        elif pattern.startswith("**", i):
            out.append((_ANY, ""))
            i += 2
        elif pattern[i] in "*?":
            out.append((_STAR if pattern[i] == "*" else _ONE, ""))
            i += 1
        else:
            out.append((_LIT, pattern[i]))
            i += 1
    return out


def path_glob(pattern: str, path: str) -> bool:
    """Glob with ``**`` crossing directories and ``*``/``?`` staying inside one; ``dir/**`` also
    matches ``dir`` itself (a rule on a directory's contents covers listing or grepping it).

    Matched by a set-of-states automaton, linear in the path's length: a model-chosen pattern
    (``glob``) or path cannot make it backtrack (``*a*a*a*a*a*a*b`` took seconds as a regex), and
    any character, a newline included, is matched like any other."""
    tokens = _glob_tokens(pattern)
    end = len(tokens)

    def closure(states: set[tuple[int, int]]) -> set[tuple[int, int]]:
        todo, seen = list(states), set(states)
        while todo:
            i, inner = todo.pop()
            nxt: list[tuple[int, int]] = []
            if i < end:
                kind = tokens[i][0]
                if kind in (_STAR, _ANY) or (kind in (_DIRS, _UNDER) and inner == 0):
                    nxt.append((i + 1, 0))  # matches nothing (more)
                if kind == _DIRS and inner == 0:
                    nxt.append((i, 1))
                if kind == _UNDER and inner == 1:
                    nxt.append((i + 1, 0))
            for st in nxt:
                if st not in seen:
                    seen.add(st)
                    todo.append(st)
        return seen

    states = closure({(0, 0)})
    for c in path:
        moved: set[tuple[int, int]] = set()
        for i, inner in states:
            if i == end:
                continue
            kind, lit = tokens[i]
            if kind == _LIT and c == lit or kind == _ONE and c != "/":
                moved.add((i + 1, 0))
            elif kind == _STAR and c != "/" or kind == _ANY:
                moved.add((i, 0))
            elif kind == _DIRS and inner == 1:
                moved.add((i, 1))
                if c == "/":
                    moved.add((i + 1, 0))
            elif kind == _UNDER and (inner == 1 or c == "/"):
                moved.add((i, 1))
        if not moved:
            return False
        states = closure(moved)
    return (end, 0) in states


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    rule: str | None      # the rule text that decided, or None (the mode)
    source: str           # the layer: workflow / launch / resume / default
    reason: str | None = None  # bash: the part that decided, when it is not a plain command

    def payload(self) -> dict[str, Any]:
        out = {"decision": self.verdict, "rule": self.rule, "source": self.source}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass
class Layer:
    source: str
    mode: str | None = None
    rules: list[Rule] = field(default_factory=list)


@dataclass
class Policy:
    layers: list[Layer] = field(default_factory=list)

    @property
    def mode(self) -> str:
        for layer in reversed(self.layers):
            if layer.mode:
                return layer.mode
        return "allow"

    @property
    def explicit(self) -> bool:
        """Whether anything was configured at all (the claude_code flags are only added then)."""
        return any(layer.mode or layer.rules for layer in self.layers)

    def decide(self, tool: str, args: Mapping[str, Any], *, workspace: Path | str | None = None,
               protected: str | None = None) -> Decision:
        """``workspace``: the directory the call acts in (bash: where a redirection lands);
        ``protected``: why the call's path is protected by default (see the module docstring)."""
        if tool == "bash":
            return self._decide_bash(str(args.get("command", "")), workspace)
        for layer in reversed(self.layers):
            hits = [r for r in layer.rules if r.matches(tool, args)
                    and (protected is None or r.pattern is not None or r.verdict == "deny")]
            for verdict in ("deny", "ask", "allow"):
                for r in hits:
                    if r.verdict == verdict:
                        return Decision(verdict, r.text(), layer.source)
        if protected is not None:
            return Decision("deny", None, PROTECTED_SOURCE)
        return self._by_mode()

    def _decide_bash(self, command: str, workspace: Path | str | None) -> Decision:
        """Each part of the command decided as a call of its own; the strictest decides."""
        decisions = [self._decide_bash_part(p) for p in bash_parts(command, workspace)]
        for verdict in ("deny", "ask"):
            hit = next((d for d in decisions if d.verdict == verdict), None)
            if hit is not None:
                return hit
        return next((d for d in decisions if d.rule is not None), self._by_mode())

    def _decide_bash_part(self, part: BashPart) -> Decision:
        for layer in reversed(self.layers):
            hits = [r for r in layer.rules if fnmatch.fnmatchcase("bash", r.tool) and part.matched_by(r)]
            for verdict in ("deny", "ask", "allow"):
                for r in hits:
                    if r.verdict == verdict:
                        return Decision(verdict, r.text(), layer.source, part.reason)
        if part.kind == "write":  # outside the box: refused unless a rule allows it
            constrained = self.mode != "allow" or any(fnmatch.fnmatchcase("bash", r.tool)
                                                      for la in self.layers for r in la.rules)
            return Decision("deny" if constrained else "allow", None, "default", part.reason)
        if not part.needs_allow:
            return Decision("allow", None, "default")
        d = self._by_mode()
        return Decision(d.verdict, None, d.source, part.reason)

    def _by_mode(self) -> Decision:
        """The mode's decision (as ``decide`` ends for a call no rule matches)."""
        mode = self.mode
        source = next((la.source for la in reversed(self.layers) if la.mode), "default")
        return Decision(mode if mode in VERDICTS else "allow", None, source)  # type: ignore[arg-type]

    def rules(self, verdict: Verdict) -> list[Rule]:
        return [r for la in self.layers for r in la.rules if r.verdict == verdict]

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "layers": [{"source": la.source, "mode": la.mode,
                                                "rules": [{"rule": r.text(), "verdict": r.verdict} for r in la.rules]}
                                               for la in self.layers]}


def check_mode(mode: str | None, where: str) -> str | None:
    if mode is None or mode == "":
        return None
    m = str(mode).strip().lower()
    if m not in MODES:
        raise PermissionError_(f"{where}: unknown permission mode {mode!r}; one of {', '.join(MODES)}",
                               hint="e.g. --permission ask")
    return m


def flags_layer(source: str, mode: str | None, allow: Iterable[str] = (), ask: Iterable[str] = (),
                deny: Iterable[str] = ()) -> Layer:
    """One layer from ``--permission MODE --permission-allow R ...`` (raises on a bad value)."""
    rules = [parse_rule(t, "allow", source) for t in allow]
    rules += [parse_rule(t, "ask", source) for t in ask]
    rules += [parse_rule(t, "deny", source) for t in deny]
    return Layer(source, check_mode(mode, f"--permission ({source})"), rules)


def workflow_layer(block: Any) -> Layer:
    """The workflow's ``permission:`` value: a mode name, or a block of ``mode``, ``allow``,
    ``ask``, ``deny`` (each a rule or a list of rules)."""
    if block is None:
        return Layer("workflow")
    if isinstance(block, str):
        return Layer("workflow", check_mode(block, "workflow permission:"))
    if not isinstance(block, Mapping):
        raise PermissionError_(f"workflow permission: must be a mode name or a block, got {block!r}",
                               hint='e.g. permission:\\n    mode: ask\\n    allow: ["read_file", "bash(git *)"]')
    unknown = set(block) - {"mode", "allow", "ask", "deny"}
    if unknown:
        raise PermissionError_(f"workflow permission: unknown key {min(unknown)!r}; "
                               "expected mode, allow, ask, deny")

    def items(key: str) -> list[str]:
        v = block.get(key)
        if v is None:
            return []
        return [str(x) for x in v] if isinstance(v, list) else [str(v)]

    return flags_layer("workflow", block.get("mode"), items("allow"), items("ask"), items("deny"))


def layer_to_json(layer: Layer) -> dict[str, Any]:
    return {"source": layer.source, "mode": layer.mode,
            "allow": [r.text() for r in layer.rules if r.verdict == "allow"],
            "ask": [r.text() for r in layer.rules if r.verdict == "ask"],
            "deny": [r.text() for r in layer.rules if r.verdict == "deny"]}


def layer_from_json(data: Mapping[str, Any]) -> Layer:
    return flags_layer(str(data.get("source") or "launch"), data.get("mode"), data.get("allow") or (),
                       data.get("ask") or (), data.get("deny") or ())


def build_policy(workflow_block: Any, stored: Iterable[Mapping[str, Any]] = ()) -> Policy:
    """The effective policy: the workflow's block, then the recorded launch/resume layers in order."""
    return Policy([workflow_layer(workflow_block), *(layer_from_json(d) for d in stored)])


# -- the claude_code backend receives the same policy as its CLI flags ----------------------------
_CLAUDE_NAMES = {"bash": "Bash", "read_file": "Read", "write_file": "Write", "edit_file": "Edit",
                 "list_dir": "LS", "glob": "Glob", "grep": "Grep"}


def claude_tool_names(tools: tuple[str, ...] | list[str]) -> list[str]:
    """A node's ``tools:`` as Claude Code's tool names (``read_file`` -> ``Read``, ``bash`` ->
    ``Bash``, ``mcp.github.get_issue`` -> ``mcp__github__get_issue``; a Claude name passes as
    is; ``ask_user`` is iterion's own and is dropped: the CLI asks through ``{"_ask_user": ...}``).
    Raises ValueError naming the names Claude Code has no counterpart for."""
    out: list[str] = []
    unknown: list[str] = []
    claude = set(_CLAUDE_NAMES.values())
    for tool in tools:
        if tool == "ask_user":
            continue
        if tool.startswith("mcp."):
            name: str | None = "mcp__" + "__".join(p for p in tool.split(".")[1:] if p != "*")
        else:
            name = _CLAUDE_NAMES.get(tool) or (tool if tool in claude else None)
        if name is None:
            unknown.append(tool)
        elif name not in out:
            out.append(name)
    if unknown:
        known = ", ".join(f"{k}->{v}" for k, v in _CLAUDE_NAMES.items())
        raise ValueError(f"tools {', '.join(unknown)} have no Claude Code counterpart; use {known}, "
                         "or mcp.SERVER.TOOL")
    return out


def claude_tool_rule(rule: Rule) -> str | None:
    """A rule in Claude Code's ``--allowedTools`` syntax (``Bash(git *)``, ``mcp__github__*``), or
    None when it has no counterpart (a glob over built-in tool names)."""
    tool = rule.tool
    if tool.startswith("mcp."):
        name = "mcp__" + "__".join(tool.split(".")[1:])
        return name if rule.pattern is None else None
    mapped = _CLAUDE_NAMES.get(tool)
    if mapped is None:
        return None
    if rule.pattern is None:
        return mapped
    if tool == "bash":
        pat = rule.pattern[:-2] + ":*" if rule.pattern.endswith(" *") else rule.pattern
        return f"Bash({pat})"
    return f"{mapped}({rule.pattern})"


def claude_code_flags(policy: Policy) -> list[str]:
    """``--permission-mode``, ``--allowedTools`` and ``--disallowedTools`` for ``claude -p``.

    The CLI cannot stop to ask a person in ``-p`` mode, so an ``ask`` rule is passed as
    disallowed (the call is refused, not silently allowed) and mode ``ask`` as ``default``. A
    ``--permission-mode`` is passed only when a mode was set (rules alone widen nothing)."""
    if not policy.explicit:
        return []
    flags: list[str] = []
    if any(layer.mode for layer in policy.layers):  # rules alone keep the CLI's own mode
        flags.append(f"--permission-mode={ {'allow': 'bypassPermissions', 'ask': 'default', 'deny': 'default'}[policy.mode] }")
    allowed = [t for r in policy.rules("allow") if (t := claude_tool_rule(r))]
    denied = [t for r in policy.rules("deny") + policy.rules("ask") if (t := claude_tool_rule(r))]
    if allowed:
        flags.append("--allowedTools=" + ",".join(allowed))
    if denied:
        flags.append("--disallowedTools=" + ",".join(denied))
    return flags


# -- the codex backend: only the policy's mode has a counterpart, as the CLI's sandbox ---------
_CODEX_SANDBOX = {"allow": "workspace-write", "ask": "read-only", "deny": "read-only"}


def codex_flags(policy: Policy, *, readonly: bool = False) -> list[str]:
    """``--sandbox`` for ``codex exec``: ``read-only`` for a node declared ``readonly`` (so the
    fan-out safety that trusts the declaration holds), else the mode of the highest layer that
    sets one: ``allow`` lets the agent write in the workspace, ``ask`` and ``deny`` keep it
    read-only (the CLI cannot stop to ask a person, so an ask refuses, as for claude_code). No
    mode set: no flag, the CLI's own configuration decides. Rules have no counterpart (the CLI
    takes no per-tool allow or deny list) and are not passed."""
    if readonly:
        return ["--sandbox=read-only"]
    if any(layer.mode for layer in policy.layers):
        return [f"--sandbox={_CODEX_SANDBOX.get(policy.mode, 'read-only')}"]
    return []
