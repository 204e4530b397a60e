"""The workflow digest over real files: single files, fragments, includes, bundles."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from iterion.dsl.canonical import canonical_encoding
from iterion.dsl.digest import (
    DigestError,
    UnitFile,
    UnitRole,
    bare_digest,
    digest_of_files,
    workflow_digest,
)


SINGLE = """\
vars:
  target: string = "README.md"

tool edit:
  command: "echo hi >> {{vars.target}}"

workflow w:
  entry: edit
  edit -> done
"""

MAIN_WITH_IMPORT = """\
import "lib/review.bot"

prompt ask:
  Please review.
  {{include "prompts/rules.md"}}

tool edit:
  command: "true"

workflow w:
  entry: edit
  edit -> review
  review -> done
"""

FRAGMENT = """\
import "more.bot"

agent review:
  model: "m"
  user: ask
"""

MORE = """\
prompt extra:
  {{include "../shared/tone.md"}}
"""


def _unit(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "prompts").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "main.bot").write_text(MAIN_WITH_IMPORT)
    (tmp_path / "lib" / "review.bot").write_text(FRAGMENT)
    (tmp_path / "lib" / "more.bot").write_text(MORE)
    (tmp_path / "prompts" / "rules.md").write_text('Be strict.\n{{include "nested.md"}}')
    (tmp_path / "prompts" / "nested.md").write_text("Nested rule.")
    (tmp_path / "shared" / "tone.md").write_text("Be kind.")
    (tmp_path / "unrelated.md").write_text("not part of the unit")
    return tmp_path / "main.bot"


def test_single_file_hashes_as_sha256_of_its_bytes(tmp_path: Path) -> None:
    main = tmp_path / "w.bot"
    data = SINGLE.replace("\n", "\r\n").encode()  # CRLF must survive: bytes, not text
    main.write_bytes(data)
    result = workflow_digest(main)
    assert result.digest == hashlib.sha256(data).hexdigest() == bare_digest(data)
    assert result.files == [UnitFile(path="w.bot", role=UnitRole.MAIN, text=data.decode())]
    assert digest_of_files(result.files) == result.digest


def test_unit_files_are_discovered_with_roles_in_canonical_order(tmp_path: Path) -> None:
    result = workflow_digest(_unit(tmp_path))
    assert [(f.path, f.role) for f in result.files] == [
        ("main.bot", UnitRole.MAIN),
        ("lib/more.bot", UnitRole.FRAGMENT),
        ("lib/review.bot", UnitRole.FRAGMENT),
        ("prompts/nested.md", UnitRole.INCLUDE),
        ("prompts/rules.md", UnitRole.INCLUDE),
        ("shared/tone.md", UnitRole.INCLUDE),
    ]
    assert result.sources()["lib/review.bot"] == FRAGMENT
    assert result.digest != bare_digest(MAIN_WITH_IMPORT.encode())
    assert digest_of_files(list(reversed(result.files))) == result.digest
    assert result.total_bytes == sum(len(f.text.encode()) for f in result.files)


@pytest.mark.parametrize("edited", ["lib/review.bot", "lib/more.bot", "prompts/rules.md",
                                    "prompts/nested.md", "shared/tone.md"])
def test_editing_any_fragment_or_included_file_changes_the_digest(tmp_path: Path, edited: str) -> None:
    main = _unit(tmp_path)
    before = workflow_digest(main).digest
    path = tmp_path / edited
    path.write_text(path.read_text() + "\n## edited\n")
    assert workflow_digest(main).digest != before


def test_editing_an_unrelated_file_does_not(tmp_path: Path) -> None:
    main = _unit(tmp_path)
    before = workflow_digest(main).digest
    (tmp_path / "unrelated.md").write_text("changed")
    assert workflow_digest(main).digest == before


def test_comment_only_edit_changes_digest_but_not_canonical_encoding(tmp_path: Path) -> None:
    main = tmp_path / "w.bot"
    main.write_text(SINGLE)
    before = workflow_digest(main)
    main.write_text("## a comment\n" + SINGLE.replace("workflow w:", "\n## another\nworkflow w:"))
    after = workflow_digest(main)
    assert after.digest != before.digest
    assert canonical_encoding(after.sources()) == canonical_encoding(before.sources())


def test_bundle_prompts_and_presets_are_part_of_the_unit(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "prompts").mkdir(parents=True)
    (bundle / "presets").mkdir()
    (bundle / "main.bot").write_text(SINGLE)
    (bundle / "prompts" / "review.md").write_text('Review. {{include "../snippets/x.md"}}')
    (bundle / "snippets").mkdir()
    (bundle / "snippets" / "x.md").write_text("X")
    (bundle / "presets" / "fast.md").write_text("fast")
    (bundle / "prompts" / "notes.txt").write_text("ignored: not *.md")
    result = workflow_digest(bundle / "main.bot", bundle_dir=bundle)
    assert [(f.path, f.role) for f in result.files] == [
        ("main.bot", UnitRole.MAIN),
        ("prompts/review.md", UnitRole.BUNDLE_PROMPT),
        ("presets/fast.md", UnitRole.BUNDLE_PRESET),
        ("snippets/x.md", UnitRole.INCLUDE),
    ]
    before = result.digest
    (bundle / "presets" / "fast.md").write_text("faster")
    assert workflow_digest(bundle / "main.bot", bundle_dir=bundle).digest != before


def test_missing_imports_and_includes_and_cycles_do_not_break_the_digest(tmp_path: Path) -> None:
    (tmp_path / "a.bot").write_text('import "b.bot"\nimport "missing.bot"\nprompt p:\n  {{include "gone.md"}}\n')
    (tmp_path / "b.bot").write_text('import "a.bot"\n')
    result = workflow_digest(tmp_path / "a.bot")
    assert [f.path for f in result.files] == ["a.bot", "b.bot"]


def test_include_outside_the_main_directory_keeps_a_relative_path(git_repo: Any) -> None:
    # inside the git repository holding the main file (pytest-git's fresh repository): includes
    # may leave the main's directory
    tmp_path = Path(git_repo.workspace)
    (tmp_path / "bot").mkdir()
    (tmp_path / "common.md").write_text("C")
    (tmp_path / "bot" / "w.bot").write_text('prompt p:\n  {{include "../common.md"}}\n')
    result = workflow_digest(tmp_path / "bot" / "w.bot")
    assert [(f.path, f.role) for f in result.files][1] == ("../common.md", UnitRole.INCLUDE)


def test_non_utf8_files_and_missing_main_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "w.bot").write_bytes(b"vars:\n  x: string = \"\xff\"\n")
    with pytest.raises(DigestError, match="not UTF-8"):
        workflow_digest(tmp_path / "w.bot")
    with pytest.raises(DigestError, match="cannot read workflow"):
        workflow_digest(tmp_path / "nope.bot")
    (tmp_path / "ok.bot").write_text('prompt p:\n  {{include "bin.md"}}\n')
    (tmp_path / "bin.md").write_bytes(b"\xff")
    # an include the loader cannot read is left out (the loader reports it as L003)
    assert [f.path for f in workflow_digest(tmp_path / "ok.bot").files] == ["ok.bot"]


def test_digest_of_files_needs_one_main() -> None:
    with pytest.raises(DigestError):
        digest_of_files([])
    with pytest.raises(DigestError):
        digest_of_files([UnitFile(path="a.md", role=UnitRole.INCLUDE, text="")])
    two = [UnitFile(path=p, role=UnitRole.MAIN, text="") for p in ("a.bot", "b.bot")]
    with pytest.raises(DigestError):
        digest_of_files(two)


def test_framing_keeps_distinct_units_distinct() -> None:
    main = UnitFile(path="m.bot", role=UnitRole.MAIN, text="x")
    a = [main, UnitFile(path="a.md", role=UnitRole.INCLUDE, text="bc")]
    b = [main, UnitFile(path="a.md", role=UnitRole.INCLUDE, text="b"),
         UnitFile(path="c.md", role=UnitRole.INCLUDE, text="c")]
    c = [main, UnitFile(path="a.md", role=UnitRole.FRAGMENT, text="bc")]
    assert len({digest_of_files(a), digest_of_files(b), digest_of_files(c)}) == 3


def test_unit_file_round_trips_through_json() -> None:
    f = UnitFile(path="lib/x.bot", role=UnitRole.FRAGMENT, text="agent a:\n")
    as_json = TypeAdapter(UnitFile)  # embeddable in a persisted document: pydantic dumps and reads it
    assert as_json.validate_json(as_json.dump_json(f)) == f


WORKFLOWS = Path(__file__).resolve().parents[2] / "fixtures" / "workflows"


def test_fixture_units_list_their_files() -> None:
    inc = workflow_digest(WORKFLOWS / "includes.bot")
    assert [(f.path, f.role) for f in inc.files] == [
        ("includes.bot", UnitRole.MAIN),
        ("includes/prompts/base.md", UnitRole.INCLUDE),
        ("includes/prompts/partials/rules.md", UnitRole.INCLUDE),
    ]
    imp = workflow_digest(WORKFLOWS / "imports" / "main.bot")
    assert [f.role for f in imp.files] == [UnitRole.MAIN, UnitRole.FRAGMENT, UnitRole.FRAGMENT]


def _copy_tree(src: Path, dest: Path) -> None:
    for p in src.rglob("*"):
        if p.is_file():
            target = dest / p.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(p.read_bytes())


def test_bundle_directory_and_botz_digest_alike_without_the_manifest(tmp_path: Path) -> None:
    import tarfile

    bundle = tmp_path / "bundle"
    _copy_tree(WORKFLOWS / "bundle_dir", bundle)
    from_dir = workflow_digest(bundle / "main.bot", bundle_dir=bundle)
    roles = {f.path: f.role for f in from_dir.files}
    assert roles["prompts/task.md"] is UnitRole.BUNDLE_PROMPT
    assert roles["presets/deep.md"] is UnitRole.BUNDLE_PRESET
    assert "manifest.yaml" not in roles
    botz = tmp_path / "bot.botz"
    with tarfile.open(botz, "w:gz") as tar:
        tar.add(bundle, arcname=".")
    from_botz = workflow_digest(botz, bundle_dir=botz)
    assert from_botz.files == from_dir.files and from_botz.digest == from_dir.digest
    # the manifest is not program: editing it keeps the digest
    manifest = bundle / "manifest.yaml"
    manifest.write_text(manifest.read_text() + "\n# note\n")
    assert workflow_digest(bundle / "main.bot", bundle_dir=bundle).digest == from_dir.digest
    (bundle / "prompts" / "task.md").write_text("Do something else.\n")
    assert workflow_digest(bundle / "main.bot", bundle_dir=bundle).digest != from_dir.digest


def test_loader_digest_and_canonical_share_one_unit_file_type(tmp_path: Path) -> None:
    import iterion.dsl
    from iterion.dsl import load_workflow
    from iterion.dsl.canonical import load_unit

    assert iterion.dsl.UnitFile is UnitFile and iterion.dsl.UnitRole is UnitRole
    bundle = tmp_path / "bundle"
    _copy_tree(WORKFLOWS / "bundle_dir", bundle)
    loaded = load_workflow(bundle)
    assert all(isinstance(f, UnitFile) and isinstance(f.role, UnitRole) for f in loaded.unit.files)
    by_name = {Path(f.path).relative_to(bundle).as_posix(): f.role for f in loaded.unit.files}
    assert by_name["manifest.yaml"] is UnitRole.MANIFEST  # read by the loader, not program
    digest = workflow_digest(bundle / "main.bot", bundle_dir=bundle)
    assert {f.path: f.role for f in digest.files} == {k: r for k, r in by_name.items() if r is not UnitRole.MANIFEST}
    # the digest's list is what a run persists, and what the canonical encoding reads back
    as_json = TypeAdapter(list[UnitFile])
    recorded = as_json.validate_json(as_json.dump_json(digest.files))
    assert recorded == digest.files
    assert canonical_encoding(recorded) == canonical_encoding(digest.files)
    assert load_unit(recorded).main == "main.bot"
