"""Bundles: a directory (or `.botz` archive) holding main.bot, prompts/*.md, presets/*.md and
a manifest.yaml (name, version, requires.iterion).

A bundle prompt is named by its file stem and is usable exactly like a declared prompt. A
preset file is YAML front matter (or a bare YAML mapping) of var values, named by its stem.
A manifest whose ``requires.iterion`` is newer than this engine refuses the bundle with the
engine's BOT_REQUIRES_NEWER_ENGINE code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from gitrefs.persist.inputs import InputFileError
from iterion import __version__
from iterion.datafile import DataFileError, loads_yaml
from iterion.dsl import ast
from iterion.dsl.diagnostics import Diagnostic, make
from iterion.dsl.sources import MAIN as MAIN
from iterion.dsl.sources import MANIFEST as MANIFEST
from iterion.dsl.sources import SourceTree, display
from iterion.dsl.unit import UnitFile, UnitRole
from iterion.failure_codes import FailureCode
from iterion.ir import Span


class Requires(BaseModel):
    model_config = ConfigDict(extra="allow")
    iterion: str | None = None


class Manifest(BaseModel):
    """The author-written manifest (read, never written by iterion)."""

    model_config = ConfigDict(extra="allow")
    name: str | None = None
    version: str | None = None
    schema_version: int | None = None  # 1 (the default); others are refused (docs/language.md §6)
    requires: Requires = Requires()


@dataclass
class BundleContents:
    root: Path
    manifest: Manifest | None = None
    prompts: list[ast.PromptDecl] = field(default_factory=list)
    presets: list[ast.PresetDecl] = field(default_factory=list)
    texts: list[UnitFile] = field(default_factory=list)  # every file read, paths as diagnostics show them


_VERSION = re.compile(r"^\s*(?:>=|=>|==|\^|~=?)?\s*v?(\d+(?:\.\d+)*)")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"0.2"``, ``">=0.2.1"``, ``"v1.0.0-rc1"`` -> a comparable tuple; None if unreadable."""
    m = _VERSION.match(str(text))
    if not m:
        return None
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def requires_newer(required: str, current: str = __version__) -> bool:
    need, have = parse_version(required), parse_version(current)
    return need is not None and have is not None and need > have


def is_bundle_dir(tree: SourceTree, path: Path) -> bool:
    return tree.exists(path / MAIN)


def load_bundle(tree: SourceTree, root: Path) -> tuple[BundleContents, list[Diagnostic]]:
    out = BundleContents(root)
    diags: list[Diagnostic] = []
    mpath = root / MANIFEST
    if tree.exists(mpath):
        try:
            text = tree.read_text(mpath)
            out.texts.append(UnitFile(path=display(mpath), role=UnitRole.MANIFEST, text=text))
            data = loads_yaml(text, "the manifest") or {}
            if not isinstance(data, dict):
                raise ValueError("the manifest must be a YAML mapping")
            if isinstance(data.get("version"), (int, float)):
                data["version"] = str(data["version"])
            req = data.get("requires")
            if isinstance(req, dict) and isinstance(req.get("iterion"), (int, float)):
                data["requires"] = {**req, "iterion": str(req["iterion"])}
            out.manifest = Manifest.model_validate(data)
        except InputFileError as exc:
            diags.append(make("L004", Span(display(mpath), 1, 1), f"bad bundle manifest: {exc.reason}", exc.hint))
        except (ValueError, yaml.YAMLError, ValidationError, UnicodeDecodeError) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            diags.append(make("L004", Span(display(mpath), 1, 1), f"bad bundle manifest: {msg}",
                              "manifest.yaml holds name, version and requires: {iterion: \"X.Y.Z\"}"))
        if out.manifest and out.manifest.schema_version not in (None, 1):
            diags.append(make("L004", Span(display(mpath), _line_of(text, "schema_version"), 1),
                              f"manifest schema_version {out.manifest.schema_version} is not supported (only 1)",
                              "write schema_version: 1, or leave it out"))
        if out.manifest and out.manifest.requires.iterion:
            need = out.manifest.requires.iterion
            if parse_version(need) is None:
                diags.append(make("L004", Span(display(mpath), 1, 1),
                                  f"requires.iterion {need!r} is not a version", 'write it like "0.2.0"'))
            elif requires_newer(need):
                code = FailureCode.BOT_REQUIRES_NEWER_ENGINE.value
                line = _line_of(text, "iterion") if "requires" in text else 1
                diags.append(make(code, Span(display(mpath), line, 1),
                                  f"bundle {out.manifest.name or root.name!r} requires iterion {need}, "
                                  f"this is iterion {__version__}",
                                  "upgrade iterion to run this bundle"))
    for p, text in _markdown_files(tree, root / "prompts", "prompt", diags):
        out.texts.append(UnitFile(path=display(p), role=UnitRole.BUNDLE_PROMPT, text=text))
        sp = Span(display(p), 1, 1)
        out.prompts.append(ast.PromptDecl(p.stem, ast.RawText(text, sp, 0), sp))
    for p, text in _markdown_files(tree, root / "presets", "preset", diags):
        out.texts.append(UnitFile(path=display(p), role=UnitRole.BUNDLE_PRESET, text=text))
        preset, err = _preset_from_markdown(p.stem, text, display(p))
        if err:
            diags.append(err)
        elif preset:
            out.presets.append(preset)
    return out, diags


def _markdown_files(tree: SourceTree, folder: Path, what: str, diags: list[Diagnostic]) -> Iterator[tuple[Path, str]]:
    """The ``*.md`` files of a bundle folder with their text; an unreadable one is reported (L001)."""
    for p in tree.listdir(folder):
        if p.suffix.lower() != ".md":  # "prompts/*.md (any case ...)" (docs/language.md §6)
            continue
        try:
            text = tree.read_text(p)
        except InputFileError as exc:  # a FIFO or device among the prompts: refused, not read
            diags.append(make("L001", Span(display(p), 1, 1), f"cannot read bundle {what}: {exc.reason}", exc.hint))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            diags.append(make("L001", Span(display(p), 1, 1), f"cannot read bundle {what}: {exc}"))
            continue
        yield p, text


def _line_of(text: str, key: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(key + ":"):
            return i
    return 1


def _front_matter(text: str) -> tuple[str, int]:
    """The YAML part of a preset file and the line it starts on."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return "\n".join(lines[1:i]), 2
        return "\n".join(lines[1:]), 2
    return text, 1


def _preset_from_markdown(name: str, text: str, path: str) -> tuple[ast.PresetDecl | None, Diagnostic | None]:
    body, first = _front_matter(text)
    try:
        data = loads_yaml(body, f"preset {name!r}") or {}
    except DataFileError as exc:
        return None, make("L004", Span(path, first, 1), str(exc),
                          "a preset file is YAML front matter (between '---' lines) of var: value pairs")
    if not isinstance(data, dict):
        return None, make("L004", Span(path, first, 1), f"preset {name!r} must be a mapping of var: value",
                          "a preset file is YAML front matter (between '---' lines) of var: value pairs")
    props = []
    lines = body.splitlines()
    for key, value in data.items():
        line = next((i for i, ln in enumerate(lines) if ln.startswith(f"{key}:")), 0) + first
        sp = Span(path, line, 1)
        props.append(ast.Property(str(key), _yaml_value(value, sp), sp))
    return ast.PresetDecl(name, tuple(props), Span(path, 1, 1)), None


def _yaml_value(value: Any, sp: Span) -> ast.Value:
    if isinstance(value, list):
        return ast.ListValue(tuple(_yaml_value(v, sp) for v in value), sp)
    if isinstance(value, dict):
        return ast.MapValue(tuple(ast.MapEntry(str(k), _yaml_value(v, sp), sp) for k, v in value.items()), sp)
    if value is None or isinstance(value, (str, int, float, bool)):
        return ast.Literal(value, sp)
    return ast.Literal(str(value), sp)  # dates and the like: keep their text
