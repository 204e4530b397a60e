"""The canonical encoding: blind to comments, blank lines, declaration order and spelling;
sensitive to every property value."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iterion.dsl.canonical import (
    DeclKey,
    UnitError,
    canonical_encoding,
    declaration_encodings,
    load_unit,
)
from iterion.dsl.digest import workflow_digest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted(p for p in (REPO / "fixtures" / "workflows").glob("**/*") if p.suffix in (".bot", ".iter")) + sorted(
    (REPO / "fixtures" / "diff").glob("*.bot"))


_DECL_START = re.compile(
    r"(vars|presets|attachments|prompt|schema|cursor|mcp_server|agent|judge|router|human|tool|compute|fail"
    r"|import|workflow)\b")


def _blocks(text: str) -> list[list[str]]:
    """Split a file into top-level declarations (a declaration owns its leading comments).

    A declaration starts at a column-0 keyword line: a backtick string may continue at column 0."""
    blocks: list[list[str]] = []
    pending: list[str] = []
    for line in text.splitlines():
        if line.startswith("##") or not line.strip():
            pending.append(line)
            continue
        if _DECL_START.match(line):
            blocks.append(pending + [line])
            pending = []
        elif blocks:
            blocks[-1].extend(pending + [line])
            pending = []
        else:
            pending.append(line)
    if pending:
        blocks.append(pending)
    return blocks


def _rebuild(blocks: list[list[str]], order: list[int], extras: list[int]) -> str:
    out: list[str] = []
    for n, i in enumerate(order):
        kind = extras[n % len(extras)] if extras else 0
        if kind == 1:
            out.append("## an inserted comment")
        elif kind == 2:
            out.extend(["", ""])
        elif kind == 3:
            out.extend(["##", "", "## comment after a blank line"])
        # strip a block's trailing blank lines so moving it does not move them into a raw body
        block = list(blocks[i])
        while block and not block[-1].strip():
            block.pop()
        out.extend(block)
        out.append("")
    return "\n".join(out) + "\n"


def _id(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_there_are_fixtures() -> None:
    assert len(FIXTURES) >= 1


@pytest.mark.parametrize("path", FIXTURES, ids=_id)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_comments_blank_lines_and_order_are_not_changes(path: Path, data: st.DataObject) -> None:
    text = path.read_text().removeprefix("\ufeff")  # a BOM leads the file only; moved blocks would carry it
    # a `## strict-escape: on` directive belongs to the file's opening lines: it stays first
    head, body = ("", text) if not text.startswith("## strict-escape") else text.split("\n", 1)
    blocks = _blocks(body)
    order = data.draw(st.permutations(range(len(blocks))))
    extras = data.draw(st.lists(st.integers(0, 3), max_size=len(blocks)))
    shifted = (head + "\n" if head else "") + _rebuild(blocks, list(order), extras)
    name = path.name
    assert canonical_encoding({name: shifted}, main=name) == canonical_encoding({name: text}, main=name)


def _mutations(text: str) -> list[tuple[str, str]]:
    """(description, mutated text) for each property value, loop bound and prompt line."""
    lines = text.splitlines()
    out: list[tuple[str, str]] = []
    raw_indent: int | None = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip(" "))
        if raw_indent is not None:
            if line.strip() and indent <= raw_indent:
                raw_indent = None
            elif line.strip():
                changed = line + " (edited)"
                out.append((f"raw line {i + 1}", "\n".join(lines[:i] + [changed] + lines[i + 1:])))
                continue
            else:
                continue
        if line.lstrip().startswith("##"):
            continue
        if re.match(r"^\s*(prompt \w+|script):\s*$", line):
            raw_indent = indent
            continue
        candidates = [
            (r'"([^"]*)"', lambda m: '"' + m.group(1) + 'Z"'),
            (r"\((\d+)\)", lambda m: f"({int(m.group(1)) + 1})"),
            (r": (\d+)$", lambda m: f": {int(m.group(1)) + 7}"),
            (r": true$", lambda m: ": false"),
            (r": false$", lambda m: ": true"),
            (r"when not (\w+)", lambda m: f"when {m.group(1)}"),
            (r": ([A-Za-z_]\w*)$", lambda m: f": {m.group(1)}_edited"),
            (r"-> ([A-Za-z_]\w*)", lambda m: f"-> {m.group(1)}_edited"),
        ]
        for pattern, repl in candidates:
            if re.search(pattern, line):
                changed = re.sub(pattern, repl, line, count=1)
                out.append((f"line {i + 1}: {line.strip()}", "\n".join(lines[:i] + [changed] + lines[i + 1:])))
                break
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=_id)
def test_every_value_change_changes_the_encoding(path: Path) -> None:
    text = path.read_text()
    name = path.name
    base = canonical_encoding({name: text}, main=name)
    mutations = _mutations(text)
    assert mutations
    for what, mutated in mutations:
        assert canonical_encoding({name: mutated}, main=name) != base, what


def test_fixture_is_fully_parsed() -> None:
    unit = load_unit({"full.bot": (REPO / "fixtures/diff/full.bot").read_text()}, main="full.bot")
    kinds = {k.kind for k in unit.decls}
    assert kinds == {"var", "preset", "attachment", "schema", "prompt", "node", "workflow", "edges"}
    assert len(unit.nodes()) == 8
    assert unit.entry() == "plan"


BASE = """\
schema s:
  ok: bool

tool a:
  command: "x"

tool b:
  command: "y"

compute c:
  output: s
  expr:
    ok: "length(vars.l) > 0 && true"

workflow w:
  entry: a
  a -> b when "vars.n == 1"
  a -> c
  b -> done
  c -> done when ok
  c -> fail when not ok
"""


def _enc(text: str) -> str:
    return canonical_encoding({"w.bot": text})


def test_expression_spelling_is_not_a_change() -> None:
    respelled = BASE.replace('"vars.n == 1"', "\"(vars.n)==1\"").replace(
        '"length(vars.l) > 0 && true"', '"(length( vars.l )>0) && (true)"')
    assert respelled != BASE
    assert _enc(respelled) == _enc(BASE)
    assert _enc(BASE.replace("vars.n == 1", "vars.n == 2")) != _enc(BASE)


def test_property_order_and_map_key_order_are_not_changes() -> None:
    text = BASE.replace('tool a:\n  command: "x"\n', 'tool a:\n  command: "x"\n  output: s\n')
    swapped = BASE.replace('tool a:\n  command: "x"\n', 'tool a:\n  output: s\n  command: "x"\n')
    assert _enc(text) == _enc(swapped)
    with1 = BASE.replace("  a -> c\n", '  a -> c with { x: "1", y: "2" }\n')
    with2 = BASE.replace("  a -> c\n", '  a -> c with { y: "2", x: "1" }\n')
    assert _enc(with1) == _enc(with2) != _enc(BASE)


def test_edge_order_matters_within_a_source_only() -> None:
    lines = BASE.splitlines()
    i_b, i_c = lines.index('  a -> b when "vars.n == 1"'), lines.index("  a -> c")
    same_src = lines.copy()
    same_src[i_b], same_src[i_c] = same_src[i_c], same_src[i_b]
    assert _enc("\n".join(same_src)) != _enc(BASE)
    i_bd, i_cd = lines.index("  b -> done"), lines.index("  c -> done when ok")
    other_src = lines.copy()
    other_src[i_bd], other_src[i_c] = other_src[i_c], other_src[i_bd]
    other_src[i_bd], other_src[i_cd] = other_src[i_cd], other_src[i_bd]
    assert _enc("\n".join(other_src)) == _enc(BASE)


def test_moving_a_declaration_into_a_fragment_is_not_a_change() -> None:
    main = BASE.replace('tool b:\n  command: "y"\n', "")
    split = {"w.bot": 'import "lib/b.bot"\n' + main, "lib/b.bot": 'tool b:\n  command: "y"\n'}
    assert canonical_encoding(split, main="w.bot") == _enc(BASE)
    # ...but a missing fragment is visible
    assert canonical_encoding({"w.bot": split["w.bot"]}) != _enc(BASE)


def test_declaration_keys() -> None:
    encs = declaration_encodings({"w.bot": BASE})
    assert list(encs) == sorted(encs)
    assert set(encs) == {
        DeclKey("schema", "s"), DeclKey("node", "a"), DeclKey("node", "b"), DeclKey("node", "c"),
        DeclKey("workflow", "name"), DeclKey("workflow", "entry"), DeclKey("edges", "a"),
        DeclKey("edges", "b"), DeclKey("edges", "c"),
    }
    assert str(DeclKey("edges", "a")) == "edges a"


def test_multi_file_unit_from_recorded_files_and_includes() -> None:
    result = workflow_digest(REPO / "fixtures/diff/multi/main.bot")
    encs = declaration_encodings(result.files)
    assert DeclKey("include", "prompts/rules.md") in encs
    assert DeclKey("include", "prompts/tone.md") in encs
    assert DeclKey("node", "review") in encs  # from the fragment
    sources = result.sources()
    edited = {**sources, "prompts/tone.md": "Be blunt.\n"}
    assert canonical_encoding(edited, main="main.bot") != canonical_encoding(sources, main="main.bot")


def test_bundle_prompts_and_presets_are_declarations() -> None:
    sources = {"main.bot": BASE, "prompts/greet.md": "Hello", "presets/fast.md": "x: 1",
               "prompts/sub/deep.md": "not a bundle prompt"}
    encs = declaration_encodings(sources)
    assert DeclKey("prompt", "greet") in encs and DeclKey("preset_file", "fast") in encs
    assert not any(k.name == "deep" for k in encs)
    assert DeclKey("prompt", "greet") not in declaration_encodings(sources, bundle=False)


def test_an_included_prompts_file_named_by_no_node_is_only_an_include() -> None:
    main = BASE.replace("schema s:", 'prompt p:\n  {{include "prompts/part.md"}}\n\nschema s:')
    encs = declaration_encodings({"main.bot": main, "prompts/part.md": "Part"})
    assert DeclKey("include", "prompts/part.md") in encs
    assert DeclKey("prompt", "part") not in encs
    forced = declaration_encodings({"main.bot": main, "prompts/part.md": "Part"}, bundle=True)
    assert DeclKey("prompt", "part") in forced


def test_duplicate_declarations_are_kept_order_free() -> None:
    dup1 = BASE + '\ntool a:\n  command: "z"\n'
    dup2 = BASE.replace('tool a:\n  command: "x"\n', 'tool a:\n  command: "z"\n') + '\ntool a:\n  command: "x"\n'
    assert _enc(dup1) == _enc(dup2) != _enc(BASE)


def test_main_inference() -> None:
    assert load_unit({"a.bot": 'import "b.bot"\n', "b.bot": ""}).main == "a.bot"
    with pytest.raises(UnitError):
        load_unit({"a.bot": "", "b.bot": ""})
    with pytest.raises(UnitError):
        load_unit({"a.bot": ""}, main="zzz.bot")
    assert load_unit("tool a:\n  command: \"x\"\n").main == "main.bot"


UNITS = [
    (REPO / "fixtures/workflows/imports/main.bot", None),
    (REPO / "fixtures/workflows/includes.bot", None),
    (REPO / "fixtures/workflows/bundle_dir/main.bot", REPO / "fixtures/workflows/bundle_dir"),
    (REPO / "fixtures/diff/multi/main.bot", None),
]


@pytest.mark.parametrize(("main", "bundle"), UNITS, ids=lambda p: _id(p) if isinstance(p, Path) else "-")
def test_multi_file_units_round_trip_and_see_every_file(main: Path, bundle: Path | None) -> None:
    files = workflow_digest(main, bundle_dir=bundle).files
    base = canonical_encoding(files)
    assert len(files) > 1
    for i, f in enumerate(files):
        blocks = _blocks(f.text)
        shifted = _rebuild(blocks, list(reversed(range(len(blocks)))), [1, 2, 3]) if f.path.endswith(".bot") \
            else f.text
        moved = [*files[:i], replace(f, text=shifted), *files[i + 1:]]
        assert canonical_encoding(moved) == base, f.path
        edited = [*files[:i], replace(f, text=f.text + "\nagent zz_added:\n  model: \"m\"\n"
                                         if f.path.endswith(".bot") else f.text + "\nmore text"),
                  *files[i + 1:]]
        assert canonical_encoding(edited) != base, f.path
