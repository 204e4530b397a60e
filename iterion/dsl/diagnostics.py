"""Diagnostics of the `.bot` front end: one table of codes, and the record every check emits.

Codes: ``P...`` are lexing/parsing errors, ``L...`` loading (imports, includes, bundles),
``C...`` compile/validate checks. C001..C248 carry the original's numbers; C1xx are ours for the
checks it makes unnumbered (docs/language.md section 7). ``BOT_REQUIRES_NEWER_ENGINE`` is the engine's
failure code, reused as is so the refusal reads the same at load and at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gitrefs.persist.text import one_line
from iterion.failure_codes import FailureCode
from iterion.ir import Span


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


# code -> (severity, one-line meaning). The meaning documents the code; messages are specific.
CODES: dict[str, tuple[Severity, str]] = {
    # lexing / parsing
    "P001": (Severity.ERROR, "bad indentation"),
    "P002": (Severity.ERROR, "tab character in indentation"),
    "P003": (Severity.ERROR, "unexpected character"),
    "P004": (Severity.ERROR, "unterminated string"),
    "P005": (Severity.ERROR, "unclosed bracket"),
    "P006": (Severity.ERROR, "unknown keyword (top-level or workflow declaration)"),
    "P007": (Severity.ERROR, "unknown property"),
    "P008": (Severity.ERROR, "syntax error"),
    "P009": (Severity.ERROR, "bad escape sequence in string"),
    "P010": (Severity.ERROR, "file is not valid UTF-8 text"),
    # loading
    "L001": (Severity.ERROR, "file not found or unreadable"),
    "L002": (Severity.ERROR, "import cycle"),
    "L003": (Severity.ERROR, "include failed (missing, unreadable, outside the project, or a cycle)"),
    "L004": (Severity.ERROR, "bad bundle (manifest, layout or archive)"),
    "L005": (Severity.ERROR, "unsafe path (a .botz member, or an import outside the project)"),
    FailureCode.BOT_REQUIRES_NEWER_ENGINE.value: (Severity.ERROR, "the bundle needs a newer iterion"),
    # compile / validate: the table of docs/language.md section 7 (C045 reserved; C107, C108, C109 retired)
    "C001": (Severity.ERROR, 'edge names an undeclared node'),
    "C002": (Severity.ERROR, 'unknown schema'),
    "C003": (Severity.ERROR, 'unknown prompt'),
    "C004": (Severity.ERROR, 'malformed template; tool command/script/language fault'),
    "C005": (Severity.ERROR, 'one loop name with two different bounds'),
    "C006": (Severity.ERROR, 'no workflow'),
    "C007": (Severity.ERROR, 'several workflows'),
    "C008": (Severity.ERROR, 'missing or unknown entry'),
    "C009": (Severity.ERROR, 'node with await uses session inherit, inherit_if_available or fork'),
    "C010": (Severity.ERROR, 'more than one plain edge'),
    "C011": (Severity.ERROR, 'the same condition twice from one source'),
    "C012": (Severity.ERROR, 'conditions neither exhaustive nor with a fallback'),
    "C013": (Severity.ERROR, 'when field is not bool'),
    "C014": (Severity.ERROR, 'when field not in the output schema'),
    "C016": (Severity.ERROR, 'node unreachable from the entry'),
    "C017": (Severity.ERROR, '.history of a node outside any loop'),
    "C018": (Severity.ERROR, 'agent/judge without model or backend (llm router: warning; llm-answered human without model or output)'),
    "C019": (Severity.ERROR, 'cycle with no loop'),
    "C020": (Severity.ERROR, 'round_robin router with fewer than 2 non-conditional edges'),
    "C021": (Severity.ERROR, 'llm router with fewer than 2 edges'),
    "C022": (Severity.ERROR, "simple when on an llm router's edge"),
    "C023": (Severity.ERROR, 'llm-only property on another router mode'),
    "C024": (Severity.ERROR, 'duplicate mcp_server'),
    "C025": (Severity.ERROR, 'mcp_server transport/command/url mismatch or no transport'),
    "C026": (Severity.ERROR, 'literal loop bound below 1'),
    "C027": (Severity.ERROR, 'invalid reasoning_effort'),
    "C028": (Severity.ERROR, 'duplicate with key into one target'),
    "C029": (Severity.ERROR, 'outputs. of an undeclared node'),
    "C030": (Severity.WARNING, 'backend codex is discouraged'),
    "C031": (Severity.ERROR, 'outputs.node.field not in its schema'),
    "C032": (Severity.WARNING, 'field reference on a node without output schema'),
    "C033": (Severity.ERROR, 'undeclared var'),
    "C034": (Severity.ERROR, 'input.field not in the input schema'),
    "C035": (Severity.ERROR, 'artifact not published by any node'),
    "C036": (Severity.ERROR, 'referenced node cannot run before the consumer'),
    "C037": (Severity.WARNING, 'node max_tokens above budget.max_tokens'),
    "C038": (Severity.ERROR, 'bad mcp_server auth'),
    "C039": (Severity.ERROR, 'compute without expressions'),
    "C040": (Severity.ERROR, 'expression does not parse'),
    "C041": (Severity.ERROR, 'duplicate node, prompt or schema name'),
    "C042": (Severity.ERROR, 'node named done or fail'),
    "C043": (Severity.ERROR, 'compaction threshold outside (0, 1] or preserve_recent below 0'),
    "C044": (Severity.ERROR, 'invalid sandbox mode or host_state; inline without or with both image/build'),
    "C046": (Severity.ERROR, 'negative or non-finite budget cost'),
    "C047": (Severity.WARNING, 'memory on a backend other than claw'),
    "C048": (Severity.ERROR, 'memory enabled without scope'),
    "C050": (Severity.ERROR, 'duplicate attachment'),
    "C051": (Severity.ERROR, 'attachment named like a var'),
    "C052": (Severity.ERROR, 'accept_mime entry not type/subtype'),
    "C053": (Severity.ERROR, 'unknown attachment'),
    "C054": (Severity.ERROR, 'unknown attachment sub-field'),
    "C060": (Severity.ERROR, 'Playwright MCP server under a sandbox image without a browser'),
    "C070": (Severity.ERROR, 'preset key not a var'),
    "C071": (Severity.ERROR, 'preset value of the wrong kind'),
    "C072": (Severity.ERROR, 'duplicate preset'),
    "C080": (Severity.WARNING, 'unknown capability'),
    "C081": (Severity.ERROR, 'malformed capability'),
    "C082": (Severity.WARNING, 'board capability under a sandbox'),
    "C083": (Severity.WARNING, 'unknown cursor'),
    "C084": (Severity.ERROR, 'invalid cursor value'),
    "C085": (Severity.ERROR, 'malformed cursor (no/both forms, bad or overlapping range)'),
    "C086": (Severity.ERROR, 'duplicate cursor'),
    "C248": (Severity.ERROR, 'fail node code collides with a reserved engine failure code'),
    # this project's own checks (C1xx): a fault the original accepts is only a warning
    "C100": (Severity.ERROR, 'property value of the wrong kind (a var default of the wrong type: warning)'),
    "C101": (Severity.WARNING, 'enum on a non-string field or with a repeated value'),
    "C102": (Severity.ERROR, 'unknown type'),
    "C103": (Severity.ERROR, 'invalid value of an enumerated property; fail code not UPPER_SNAKE'),
    "C104": (Severity.ERROR, 'missing required property (fail without code)'),
    "C105": (Severity.WARNING, 'property or compute field given twice (last wins)'),
    "C106": (Severity.WARNING, 'loop.NAME of an undeclared loop'),
    "C110": (Severity.WARNING, '${NAME} without default, variable unset at validation time'),
    "C111": (Severity.WARNING, 'compute expression for a field not in the output schema'),
    "C112": (Severity.WARNING, 'edge out of a terminal'),
    "C113": (Severity.WARNING, 'var declared twice in one block'),
    "C114": (Severity.WARNING, 'input.field no with map passes, on a node without an input schema'),
    "C115": (Severity.ERROR, "a tool the node's agent-CLI backend has no counterpart for"),
    "C116": (Severity.ERROR, "subbot without a usable source: (a relative .bot or .botz path)"),
    "C117": (Severity.ERROR, "subbot child workflow missing or invalid"),
    "C118": (Severity.ERROR, "subbot with: names a var the child does not declare, or omits one without default"),
}


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    span: Span
    message: str
    hint: str | None = None

    def format(self) -> str:
        """``file:line:col: CODE severity: message`` then, if any, an indented ``hint:`` line."""
        # one line each, whatever names or text the message quotes (a file name with a newline)
        head = f"{self.span}: {self.code} {self.severity.value}: {one_line(self.message)}"
        return head if not self.hint else f"{head}\n  hint: {one_line(self.hint)}"

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code, "severity": self.severity.value, "file": self.span.file,
            "line": self.span.line, "column": self.span.column, "message": self.message,
            "hint": self.hint,
        }


def make(code: str, span: Span, message: str, hint: str | None = None,
         severity: Severity | None = None) -> Diagnostic:
    return Diagnostic(code, severity or CODES[code][0], span, message, hint)


class Sink:
    """Collects diagnostics, dropping exact duplicates (one template checked for two consumers)."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []
        self._seen: set[tuple[str, Span, str]] = set()

    def add(self, code: str, span: Span, message: str, hint: str | None = None,
            severity: Severity | None = None) -> None:
        key = (code, span, message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.items.append(make(code, span, message, hint, severity))

    def extend(self, diags: list[Diagnostic]) -> None:
        for d in diags:
            self.add(d.code, d.span, d.message, d.hint, d.severity)

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.items)


def has_errors(diags: list[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diags)


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.span.file, d.span.line, d.span.column, d.code)
