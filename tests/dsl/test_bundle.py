"""Bundles: directories and .botz archives, manifests, safe extraction, engine-version refusal."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from iterion import __version__
from iterion.dsl import load_workflow
from iterion.dsl.bundle import parse_version, requires_newer
from iterion.dsl.sources import SourceError, extract_archive, read_archive
from iterion.failure_codes import FailureCode

BUNDLE = Path(__file__).resolve().parents[2] / "fixtures" / "workflows" / "bundle_dir"


def _botz(src: Path, dest: Path, arcname: str = ".") -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(src, arcname=arcname)
    return dest


def _tar_with(dest: Path, members: list[tarfile.TarInfo], data: dict[str, bytes]) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        for m in members:
            payload = data.get(m.name)
            if payload is not None:
                m.size = len(payload)
                tar.addfile(m, io.BytesIO(payload))
            else:
                tar.addfile(m)
    return dest


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def test_bundle_directory_prompts_and_presets_resolve_by_name() -> None:
    result = load_workflow(BUNDLE, env={})
    assert result.workflow is not None, [d.format() for d in result.diagnostics]
    writer = result.workflow.nodes["writer"]
    assert writer.system_ref == "writer" and writer.user_ref == "task"
    assert writer.system == "You write documentation in {{vars.language}}.\nPrefer short sentences.\n\n"
    assert result.workflow.presets == {"deep": {"depth": 3, "language": "fr"}}
    roles = sorted((Path(f.path).as_posix().split("bundle_dir/")[1], f.role) for f in result.unit.files)
    assert roles == [("main.bot", "main"), ("manifest.yaml", "manifest"), ("presets/deep.md", "bundle_preset"),
                     ("prompts/task.md", "bundle_prompt"), ("prompts/writer.md", "bundle_prompt"), ("shared/style.md", "include")]


def test_main_bot_of_a_bundle_is_loaded_as_the_bundle() -> None:
    result = load_workflow(BUNDLE / "main.bot", env={})
    assert result.workflow is not None and result.workflow.nodes["writer"].system_ref == "writer"


def test_botz_archive_compiles_like_its_directory(tmp_path: Path) -> None:
    botz = _botz(BUNDLE, tmp_path / "docs.botz")
    result = load_workflow(botz, env={})
    assert result.workflow is not None, [d.format() for d in result.diagnostics]
    assert result.workflow.nodes["writer"].system == load_workflow(BUNDLE, env={}).workflow.nodes["writer"].system  # type: ignore[union-attr]
    assert all(f.path.startswith(str(botz)) for f in result.unit.files)
    assert list(tmp_path.iterdir()) == [botz], "validating a .botz writes nothing"


def test_botz_wrapped_in_one_top_directory(tmp_path: Path) -> None:
    botz = _botz(BUNDLE, tmp_path / "wrapped.botz", arcname="docs_bundle")
    assert load_workflow(botz, env={}).workflow is not None


def test_botz_diagnostics_name_the_member(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(BUNDLE, src)
    (src / "main.bot").write_text((src / "main.bot").read_text().replace("system: writer", "system: writr"))
    result = load_workflow(_botz(src, tmp_path / "b.botz"), env={})
    assert [(d.code, d.span.file, d.span.line) for d in result.diagnostics] == [
        ("C003", str(tmp_path / "b.botz" / "main.bot"), 11)]


@pytest.mark.parametrize("name", ["../evil.txt", "/etc/evil", "a/../../evil"])
def test_botz_with_path_traversal_is_refused_and_writes_nothing(tmp_path: Path, name: str) -> None:
    botz = _tar_with(tmp_path / "evil.botz", [_file("main.bot"), _file(name)],
                     {"main.bot": b"workflow w:\n  entry: a\n", name: b"pwned"})
    result = load_workflow(botz, env={})
    assert result.workflow is None
    assert [d.code for d in result.diagnostics] == ["L005"]
    with pytest.raises(SourceError):
        extract_archive(botz, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "out").exists()


def test_botz_with_a_symlink_is_refused(tmp_path: Path) -> None:
    link = _file("prompts/x.md")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    botz = _tar_with(tmp_path / "link.botz", [_file("main.bot"), link], {"main.bot": b""})
    result = load_workflow(botz, env={})
    assert [d.code for d in result.diagnostics] == ["L005"]
    assert "link" in result.diagnostics[0].message


def test_not_a_tar_gz(tmp_path: Path) -> None:
    botz = tmp_path / "junk.botz"
    botz.write_bytes(b"not an archive")
    result = load_workflow(botz, env={})
    assert [d.code for d in result.diagnostics] == ["L004"]


def test_extract_archive_writes_the_bundle(tmp_path: Path) -> None:
    botz = _botz(BUNDLE, tmp_path / "docs.botz")
    written = extract_archive(botz, tmp_path / "out")
    assert (tmp_path / "out" / "skills" / "README.md").read_text().startswith("Skill files")
    assert len(written) == len(read_archive(botz))


def test_bundle_requiring_a_newer_engine_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "newer"
    shutil.copytree(BUNDLE, src)
    (src / "manifest.yaml").write_text("name: future\nversion: 2.0.0\nrequires:\n  iterion: \">=99.0\"\n")
    result = load_workflow(src, env={})
    assert result.workflow is None
    (d,) = result.diagnostics
    assert d.code == FailureCode.BOT_REQUIRES_NEWER_ENGINE.value == "BOT_REQUIRES_NEWER_ENGINE"
    assert d.span.line == 4 and __version__ in d.message and "99.0" in d.message
    # the same refusal from an archive
    botz = _botz(src, tmp_path / "newer.botz")
    assert [x.code for x in load_workflow(botz, env={}).diagnostics] == ["BOT_REQUIRES_NEWER_ENGINE"]


def test_manifest_schema_version_other_than_1_is_refused(tmp_path: Path) -> None:
    # dsl.md 6: "schema_version (1, the default; others refused)"
    src = tmp_path / "v"
    shutil.copytree(BUNDLE, src)
    (src / "manifest.yaml").write_text("name: v\nschema_version: 1\n")
    assert load_workflow(src, env={}).diagnostics == []
    (src / "manifest.yaml").write_text("name: v\nschema_version: 2\n")
    assert [(d.code, d.span.line) for d in load_workflow(src, env={}).diagnostics] == [("L004", 2)]


def test_bundle_prompt_files_match_md_in_any_case(tmp_path: Path) -> None:
    # dsl.md 6: "prompts/*.md (any case; subdirectories ignored)"
    src = tmp_path / "c"
    shutil.copytree(BUNDLE, src)
    md = sorted((src / "prompts").glob("*.md"))[0]
    md.rename(md.with_suffix(".MD"))
    result = load_workflow(src, env={})
    assert result.diagnostics == [] and md.stem in result.workflow.prompts  # type: ignore[union-attr]


def test_bad_manifest_and_missing_main(tmp_path: Path) -> None:
    src = tmp_path / "b"
    shutil.copytree(BUNDLE, src)
    (src / "manifest.yaml").write_text("- just\n- a list\n")
    assert [d.code for d in load_workflow(src, env={}).diagnostics] == ["L004"]
    (src / "main.bot").unlink()
    assert [d.code for d in load_workflow(src, env={}).diagnostics] == ["L004"]


def test_bundle_preset_of_wrong_type_and_duplicate_prompt(tmp_path: Path) -> None:
    src = tmp_path / "b"
    shutil.copytree(BUNDLE, src)
    (src / "presets" / "bad.md").write_text("---\ndepth: \"deep\"\nnope: 1\n---\n")
    main = src / "main.bot"
    main.write_text(main.read_text() + "\nprompt task:\n  duplicate of prompts/task.md\n")
    result = load_workflow(src, env={})
    got = sorted((d.code, Path(d.span.file).name, d.span.line) for d in result.diagnostics)
    assert got == [("C041", "main.bot", 20), ("C070", "bad.md", 3), ("C071", "bad.md", 2)]


@pytest.mark.parametrize(("need", "newer"), [("0.1.0", False), ("0.1", False), (">=0.0.9", False),
                                             ("0.2.0", True), ("v1", True), ("0.1.1-rc1", True)])
def test_version_comparison(need: str, newer: bool) -> None:
    assert requires_newer(need, "0.1.0") is newer
    assert parse_version(need) is not None
