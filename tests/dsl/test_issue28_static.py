"""Issue 28, "Static differences to close": single-edit variants of the original's workflows
that it accepts and this project rejected, or the reverse. Each file under ``issue28/`` opens
with ``## original: accepts|rejects. <what>; expect: none | CODE line N col C[, ...]`` and is
checked through the CLI (`iterion validate --json`): exit code and every diagnostic."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

HERE = Path(__file__).resolve().parent / "issue28"
FILES = sorted(HERE.glob("*.bot"))


def _header(path: Path) -> tuple[str, list[tuple[str, int, int]]]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    m = re.match(r"## original: (accepts|rejects)\b.*; expect: (.*)$", first)
    assert m, f"{path.name}: the first line must say what the original does and what to expect"
    expected = [(c, int(n), int(col)) for c, n, col in re.findall(r"([A-Z]\d{3}) line (\d+) col (\d+)", m.group(2))]
    assert expected or m.group(2).strip() == "none", path.name
    return m.group(1), expected


def test_every_item_of_the_issue_has_a_file() -> None:
    names = {p.stem for p in FILES}
    for item in ("accepts_schema_field_twice", "accepts_with_key_twice", "accepts_with_blank_line",
                 "accepts_with_continuation_line", "accepts_input_field_without_input_schema",
                 "accepts_flat_chain_of_150_operators", "accepts_nesting_256_levels",
                 "rejects_prompt_line_indented_less", "rejects_empty_schema", "rejects_empty_vars",
                 "rejects_empty_router", "rejects_empty_preset", "rejects_cursor_value_name_twice",
                 "rejects_cursor_value_in_band_gap", "rejects_edge_out_of_done_closing_cycle",
                 "rejects_nesting_257_levels"):
        assert item in names, item


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_validate_gives_the_originals_verdict(path: Path) -> None:
    verdict, expected = _header(path)
    proc = run_cli("validate", "--json", str(path))
    assert proc.returncode == (0 if verdict == "accepts" else 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stdout + proc.stderr
    diags = json.loads(proc.stdout)["files"][0]["diagnostics"]
    got = sorted((d["code"], d["line"], d["column"]) for d in diags)
    assert got == sorted(expected), [f"{d['code']} {d['line']}:{d['column']} {d['message']}" for d in diags]
    severities = {d["severity"] for d in diags}
    assert ("error" in severities) == (verdict == "rejects")
