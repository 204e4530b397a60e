"""No input makes the front end raise: random text and mutated fixtures only ever yield diagnostics."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iterion.dsl import load_source, parse
from iterion.dsl.diagnostics import CODES, Severity

ROOT = Path(__file__).resolve().parents[2]
# errors="replace": the P010 fixture is deliberately not UTF-8
SOURCES = sorted(p.read_bytes().decode("utf-8", errors="replace")
                 for p in [*(ROOT / "fixtures").rglob("*.bot"), *(ROOT / "fixtures").rglob("*.iter")])
# Fragments that steer random text toward the grammar's interesting corners.
PIECES = ['"', "\\", "#", "##", "{", "}", "[", "]", "(", ")", "->", ":", "=", ",", "\n", "  ", "\t", "\r",
          "{{", "}}", "${", "when ", "not ", "as ", "with ", "agent ", "router ", "workflow ", "prompt ",
          "schema ", "fail ", "import ", "mode: fan_out_all", "await: wait_all", "done", "x", "1", "-2.5e3", "é",
          # dsl.md 1.4-1.7: raw strings, block scalars, escapes, dotted lists, env forms
          "`", "``", "`a\nb`", ": |", ": |\n    x\n", "  script: |\n", "|", "\\\"", "\\n", "\\\n", "\\q",
          "## strict-escape: on\n", "[a.b.*, mcp.x.y]", "mcp.", ".*", "a.b", "${A:-${B:-c}}", "$NAME", "${p.name}",
          # dsl.md 1.1-1.2: a byte order mark, any deeper indentation, trailing commas
          "\ufeff", "   ", "    ", "\n     ", ",]"]

text_like = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=40).map("".join)


def _well_formed(result_diags: list) -> None:
    for d in result_diags:
        assert d.code in CODES
        assert d.severity in (Severity.ERROR, Severity.WARNING)
        assert d.span.line >= 1 and d.span.column >= 1
        assert d.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_like)
def test_random_text_never_raises(src: str) -> None:
    result = load_source(src, file="fuzz/random.bot", env={})
    _well_formed(result.diagnostics)
    if result.workflow is None:
        assert result.diagnostics


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SOURCES), st.lists(st.tuples(st.floats(0, 1), st.sampled_from(PIECES + [""]), st.integers(0, 12)),
                                          min_size=1, max_size=6))
def test_mutated_fixtures_never_raise(src: str, edits: list[tuple[float, str, int]]) -> None:
    for where, insert, delete in edits:
        pos = int(where * len(src))
        src = src[:pos] + insert + src[pos + delete:]
    result = load_source(src, file=str(ROOT / "fixtures" / "workflows" / "mutated.bot"), env={})
    _well_formed(result.diagnostics)
    tree, diags = parse(src, "m.bot")
    assert tree.path == "m.bot"
    _well_formed(diags)


LEXICAL_SEED = """## strict-escape: on
tool t:
  command: `echo "a\\tb"`
tool s:
  script: |
    echo one
      two
agent a:
  model: "${M:-${N:-x}}"
  tools: [read_file, mcp.github.get_issue, mcp.github.*, board.read]
  user: "say \\"hi\\" \\n"
workflow w:
  entry: t
  t -> s
  s -> a
  a -> done
"""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(st.tuples(st.floats(0, 1), st.sampled_from(PIECES + [""]), st.integers(0, 8)),
                               min_size=1, max_size=8))
def test_mutated_lexical_forms_never_raise(strict: bool, edits: list[tuple[float, str, int]]) -> None:
    """Backticks, block scalars, escapes (both modes) and dotted lists, cut and spliced anywhere
    (the seed itself is valid: test_lexical_seed_is_valid)."""
    src = LEXICAL_SEED if strict else LEXICAL_SEED.split("\n", 1)[1]
    for where, insert, delete in edits:
        pos = int(where * len(src))
        src = src[:pos] + insert + src[pos + delete:]
    result = load_source(src, file="fuzz/lexical.bot", env={})
    _well_formed(result.diagnostics)
    _tree, diags = parse(src, "l.bot")
    _well_formed(diags)


def test_lexical_seed_is_valid() -> None:
    for src in (LEXICAL_SEED, LEXICAL_SEED.split("\n", 1)[1]):
        result = load_source(src, file="fuzz/lexical.bot", env={})
        assert result.diagnostics == [] and result.workflow is not None


# Include and import paths holding NUL bytes (a ValueError escaped the include reader once),
# mixed with traversal and absolute pieces: always diagnostics, never an exception.
path_piece = st.one_of(st.sampled_from(["\0", "a\0b", "..", "../", "/", "/etc/passwd", "x.md", ".", "\0/..", "é"]),
                       st.text(max_size=4))
nul_path = st.lists(path_piece, min_size=1, max_size=6).map("".join).filter(lambda p: "\0" in p)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nul_path, st.booleans())
def test_nul_bytes_in_include_and_import_paths_are_diagnostics(path: str, as_import: bool) -> None:
    quoted = path.replace("\\", "/").replace('"', "'")
    if as_import:
        src = f'import "{quoted}"\n' + MINIMAL
    else:
        src = f'prompt p:\n  before {{{{include "{quoted}"}}}} after\n' + MINIMAL
    result = load_source(src, file=str(ROOT / "fixtures" / "workflows" / "nul.bot"), env={})
    _well_formed(result.diagnostics)
    assert result.workflow is None
    assert any(d.code in ("L001", "L003", "L005", "C004", "P003", "P004", "P008") for d in result.diagnostics)


MINIMAL = """
tool t:
  command: "echo {{prompts_unused}}"

workflow w:
  entry: t
  t -> done
""".replace("{{prompts_unused}}", "hi")
