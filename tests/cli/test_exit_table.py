"""One exit-code table (issue 14, point 5): the README's table and cli/exit_codes.py agree, code by
code, and every run status maps to the row that names it."""

from __future__ import annotations

import re

import cli.exit_codes as ec

from ..conftest import REPO_ROOT


def _readme_rows() -> dict[int, str]:
    text = (REPO_ROOT / "README.md").read_text()
    section = text[text.index("### Exit codes"):]
    section = section[:section.index("\n### ", 4)]
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_readme_table_is_the_code_table() -> None:
    rows = _readme_rows()
    codes = {int(c) for c in ec.ExitCode}
    assert set(rows) == codes == {*range(9), 130}
    for status, code in ec.STATUS_EXIT.items():
        if status != "finished":
            assert status in rows[code].replace("`", ""), (status, code, rows[code])
    assert ec.ExitCode.PAUSED_OPERATOR != ec.ExitCode.PAUSED_HUMAN and "refused" in rows[ec.ExitCode.REFUSED]
    # the docstring table of cli/exit_codes.py names the same codes
    doc_codes = {int(m[1]) for m in re.finditer(r"^(\d+)\s{2,}", ec.__doc__ or "", re.M)}
    assert doc_codes == codes
