"""The formatter over the whole fixture corpus: every fixture is either refused or formatted to
a text that formats to itself, keeps every comment, and that `validate` judges the same (same
codes and severities)."""

from __future__ import annotations

from iterion.dsl import load_source
from iterion.lsp.formatting import Refused, format_text
from tests.conftest import REPO_ROOT

FIXTURES = sorted(p for p in (REPO_ROOT / "fixtures").rglob("*") if p.suffix in (".bot", ".iter") and p.is_file())


def _codes(text: str, file: str) -> list[tuple[str, str]]:
    return sorted((d.code, d.severity.value) for d in load_source(text, file=file).diagnostics)


def test_format_is_idempotent_and_keeps_the_diagnostics_over_the_fixtures() -> None:
    formatted, refused = [], []
    for path in FIXTURES:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # p010: no text to format
        file = str(path.resolve())
        try:
            once = format_text(text, file)
        except Refused as exc:
            assert str(exc).startswith("not formatted: "), exc
            refused.append(path.name)
            continue
        assert format_text(once, file) == once, path
        assert _codes(once, file) == _codes(text, file), path
        assert once.count("##") == text.count("##"), path
        formatted.append(path.name)
    assert len(formatted) > 150, (len(formatted), refused)
    # the two the unparser would "fix" are refused, not silently changed
    assert {"p008_trailing_comma_in_tools.bot", "c105_second_workflow_vars_block.bot"} <= set(refused)


def test_margin_comments_are_kept_and_others_refused() -> None:
    src = 'agent a:\n  model: "m"\n\nworkflow w:\n  entry: a\n  a -> done\n'
    assert format_text(src, "/tmp/x.bot") == src
    noted = "## header\n\n## about a\nagent a:\n    model:   \"m\"\n## the flow\nworkflow w:\n  entry: a\n  a -> done\n## end\n"
    assert format_text(noted, "/tmp/x.bot") == (
        '## header\n## about a\nagent a:\n  model: "m"\n\n## the flow\nworkflow w:\n  entry: a\n  a -> done\n\n## end\n')
    for text, why in ((src.replace("  a -> done", "  a -> done ## end"), "comment"),
                      (src.replace("entry: a", "entry a"), "does not parse")):
        try:
            format_text(text, "/tmp/x.bot")
        except Refused as exc:
            assert why in str(exc)
        else:
            raise AssertionError(f"formatted: {text!r}")
