"""The docs say what the code does (issue 34 point 4): the user guide's id-prefix length and exit
codes are the code's, checkpoint pushing is described as implemented, and language.md's list of
blocks the engine does not execute is the engine's own list."""

from __future__ import annotations

import re

import cli.exit_codes as ec
from iterion.engine.declared import NOT_ENFORCED_BLOCKS
from iterion.store.refs import MIN_PREFIX
from tests.conftest import REPO_ROOT

GUIDE = (REPO_ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
LANGUAGE = (REPO_ROOT / "docs" / "language.md").read_text(encoding="utf-8")
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = re.search(r"^#{2,3} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + (nxt.start() if nxt else len(text))]


def test_the_id_prefix_length_is_the_stores() -> None:
    said = {int(n) for n in re.findall(r"prefix(?: of it)? of (?:at least )?(\d+)", GUIDE + README)}
    assert said == {MIN_PREFIX}, said


def test_the_guides_exit_codes_are_the_table() -> None:
    rows = {int(m[1]): m[2] for m in re.finditer(r"^- (\d+): (.+(?:\n  .+)*)", _section(GUIDE, "### Exit codes"), re.M)}
    assert set(rows) == {int(c) for c in ec.ExitCode}
    for status, code in ec.STATUS_EXIT.items():
        if status != "finished":
            assert status in rows[code], (status, code, rows[code])
    assert rows[ec.ExitCode.REFUSED].startswith("refused") and "changed source" in rows[ec.ExitCode.REFUSED]
    assert "`cancel`/`pause`" in rows[ec.ExitCode.CONTROL_PENDING]


def test_checkpoint_pushing_is_described_as_it_is() -> None:
    for doc in (GUIDE, LANGUAGE, README):
        assert "being added" not in doc and "**[issue" not in doc
    section = _section(GUIDE, "## Recovery of pushed checkpoints")
    assert "--push-checkpoints REMOTE" in section and "ITERION_PUSH_CHECKPOINTS" in section
    reference = (REPO_ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    assert "--push-checkpoints REMOTE" in _section(reference, "## `iterion run`")  # the flag exists


def test_the_kept_not_executed_list_is_the_engines() -> None:
    section = _section(LANGUAGE, "## 9. ")
    start = section.index("**Kept, not executed**")
    kept = section[start:section.index("\n\n", start)]
    executed = section[section.index("**Executed**"):section.index("**Kept, not executed**")]
    for block in NOT_ENFORCED_BLOCKS:
        assert f"`{block}:`" in kept and f"`{block}:`" not in executed, block
    for block in ("cursor NAME:", "permission:", "sandbox:"):
        assert f"`{block}`" in executed and f"`{block}`" not in kept, block
    assert "feature_not_enforced" in kept


def test_the_languages_warning_codes_are_the_tables() -> None:
    from iterion.dsl import diagnostics

    table = next(v for v in vars(diagnostics).values() if isinstance(v, dict) and "C016" in v)
    warnings = {code for code, (severity, _) in table.items() if severity.name == "WARNING"}
    said = _section(LANGUAGE, "## 7. Diagnostics")
    said = said[said.index("`C016`"):said.index("everything\nelse is an error")]
    named: set[str] = set()
    for lo, hi in re.findall(r"`(C\d+)`(?:-`(C\d+)`)?", said):
        named |= {f"C{n:03d}" for n in range(int(lo[1:]), int((hi or lo)[1:]) + 1)}
    assert named - {"C016"} == warnings
    assert "is an error" in said and "C016" not in warnings
    assert "being extended" not in LANGUAGE.lower() and "until it lands" not in LANGUAGE
