"""Skip reasons (capture and restore) are one enum: ``workspacetrack.models.SkipReason``.

Read with ``ast`` from every module of the packages: a string literal that is a skip code, or
starts with one as a reason does (``"blocked: ..."``, ``"ignored (...)"``), anywhere but the
enum itself fails here; name the member (``SkipReason.BLOCKED``) instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

from workspacetrack.models import SkipReason
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("gitrefs", "workspacetrack", "iterion", "cli")
HOME = "workspacetrack/models.py"


def spelled_out(tree: ast.AST) -> list[tuple[int, str]]:
    codes = [str(m) for m in SkipReason]
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and any(n.value == c or n.value.startswith((f"{c}:", f"{c} (")) for c in codes)]


def test_no_skip_reason_is_spelled_out_outside_its_enum() -> None:
    bad = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel != HOME:
                bad += [f"{rel}:{line}: {text!r}" for line, text in spelled_out(parsed(path))]
    assert not bad, "use workspacetrack.models.SkipReason:\n" + "\n".join(bad)


def test_the_guard_sees_a_spelled_out_reason() -> None:
    src = 'a = "blocked"\nb = "protected: a workflow source file"\nc = f"{SkipReason.IGNORED} (x)"\nd = "blockedx"\n'
    assert [line for line, _ in spelled_out(ast.parse(src))] == [1, 2]


def test_persisted_codes_keep_their_spelling() -> None:
    """Manifests and stat caches on disk hold these strings: a member's value never changes."""
    assert {m.name: m.value for m in SkipReason if m.value in ("oversized", "special_file", "unencodable_name",
                                                               "unreadable")} == {
        "OVERSIZED": "oversized", "SPECIAL": "special_file", "UNENCODABLE": "unencodable_name",
        "UNREADABLE": "unreadable"}
