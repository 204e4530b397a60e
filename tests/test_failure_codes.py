"""Conformance of the one failure-code table: every declared code has exactly one row."""

from __future__ import annotations

import ast
from pathlib import Path

from iterion import failure_codes as fc

ROOT = Path(__file__).resolve().parent.parent


def test_every_declared_code_has_a_row() -> None:
    declared = set(fc.FailureCode)
    assert declared == set(fc.TABLE), f"codes without a row: {declared - set(fc.TABLE)}"
    assert len(fc._ROWS) == len(fc.TABLE), "a code has two rows"


def test_codes_used_in_the_source_are_declared() -> None:
    """Parse every module: any FailureCode.X attribute must name a declared code."""
    names = {c.name for c in fc.FailureCode}
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "FailureCode":
                assert node.attr in names, f"{path}:{node.lineno}: FailureCode.{node.attr} has no row"


def test_allow_list_is_exactly_the_spec() -> None:
    allowed = {c.value for c in fc.FailureCode if fc.auto_resume_decision(c.value).allowed}
    assert {"EXECUTION_FAILED", "TIMEOUT", "RATE_LIMITED", "USAGE_LIMIT_BLOCKED", "NETWORK_TRANSIENT",
            "TOOL_FAILED_TRANSIENT"} <= allowed
    assert "BUDGET_EXCEEDED" not in allowed
    assert fc.auto_resume_decision("BUDGET_EXCEEDED", raised_cap=True).allowed
    for parked in ("EXPRESSION_FAILED", "CONTEXT_LENGTH_EXCEEDED", "IR_UNLOADABLE", "BOT_REQUIRES_NEWER_ENGINE",
                   "WORKSPACE_SAFETY", "TOOL_FAILED_PERMANENT", "AMBIGUOUS_EFFECT"):
        assert not fc.auto_resume_decision(parked).allowed


def test_bot_defined_code_is_not_auto_recoverable() -> None:
    d = fc.auto_resume_decision("REVIEW_REJECTED")
    assert not d.allowed and d.reason == "not auto-recoverable (code REVIEW_REJECTED)"
    assert not fc.is_reserved("REVIEW_REJECTED")
    assert fc.is_reserved("USAGE_LIMIT_BLOCKED")


def test_recovery_dispatcher_columns_follow_the_classification() -> None:
    """In-run retries and recovery pauses (engine/recovery.py) read these columns: never for a
    deterministic or ambiguous code; retries for the transient codes and the model verdicts."""
    for row in fc.TABLE.values():
        if row.retry in (fc.Retry.DETERMINISTIC, fc.Retry.AMBIGUOUS):
            assert row.in_run_retries == 0 and row.pause is fc.Pause.NEVER, row.code
    retried = {c.value for c, row in fc.TABLE.items() if row.in_run_retries}
    assert retried == {"RATE_LIMITED", "NETWORK_TRANSIENT", "TIMEOUT", "TOOL_FAILED_TRANSIENT", "EXECUTION_FAILED",
                       "SCHEMA_VALIDATION", "NO_OUTGOING_EDGE"}
    assert fc.TABLE[fc.FailureCode.EXECUTION_FAILED].retry_origin is fc.Origin.BACKEND
    for code in (fc.FailureCode.SCHEMA_VALIDATION, fc.FailureCode.NO_OUTGOING_EDGE):
        assert fc.TABLE[code].retry_origin is fc.Origin.LLM_VERDICT
    assert fc.TABLE[fc.FailureCode.AUTH_FAILED].pause is fc.Pause.ALWAYS
    assert fc.TABLE[fc.FailureCode.BUDGET_EXCEEDED].pause is fc.Pause.OPT_IN
