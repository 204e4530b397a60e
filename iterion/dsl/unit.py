"""What loading a workflow yields: every file of the program (a *unit*) and the compile result.

``UnitFile`` is THE record of one file of a unit: the loader lists them, the digest hashes
them, runs persist them, and the canonical encoding and the declaration diff read them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from iterion.dsl import ast
from iterion.dsl.diagnostics import Diagnostic
from iterion.ir import Workflow


class UnitRole(StrEnum):
    """Why a file is part of a unit. The declaration order is the digest's canonical order."""

    MAIN = "main"
    BUNDLE_PROMPT = "bundle_prompt"
    BUNDLE_PRESET = "bundle_preset"
    FRAGMENT = "fragment"  # a .bot file reached by ``import``
    INCLUDE = "include"  # a file read by an ``{{include}}`` marker
    MANIFEST = "manifest"  # a bundle's manifest.yaml: read by the loader, not program


# What the workflow digest covers (docs/language.md 6: main, prompts, presets, fragments, includes).
PROGRAM_ROLES = frozenset(r for r in UnitRole if r is not UnitRole.MANIFEST)


@dataclass(frozen=True)
class UnitFile:
    """One file of a unit (frozen; embeddable in a persisted document: pydantic validates and
    dumps a dataclass field like a model's).

    ``path`` is as the holder of the list addresses it: the loader's ``Unit.files`` use the
    paths diagnostics show; a digest's (and a run's recorded) list uses POSIX paths relative
    to the main file's directory (which may start with ``../``).

    A dataclass, not a pydantic model: every load makes these, and ``iterion validate`` would
    otherwise import pydantic for them alone (issue 14, point 10).
    """

    path: str
    role: UnitRole
    text: str


@dataclass
class Unit:
    """Every file the program is made of, in load order (main first), with its text.

    ``files`` holds the `.bot` files, included prompt files, a bundle's prompts/presets and
    its manifest (the digest keeps the ``PROGRAM_ROLES``). ``asts`` are the parsed `.bot`
    files; ``unparsed`` names those whose parse reported an error (their tree may lack lines).
    """

    main: str
    files: list[UnitFile] = field(default_factory=list)
    asts: list[ast.File] = field(default_factory=list)
    bundle_root: str | None = None
    unparsed: list[str] = field(default_factory=list)

    def add(self, path: str, text: str, role: UnitRole) -> None:
        if all(f.path != path for f in self.files):
            self.files.append(UnitFile(path=path, role=role, text=text))

    def file(self, path: str) -> UnitFile | None:
        return next((f for f in self.files if f.path == path), None)


@dataclass
class CompileResult:
    workflow: Workflow | None  # None when any diagnostic is an error
    diagnostics: list[Diagnostic]
    unit: Unit

    @property
    def ok(self) -> bool:
        return self.workflow is not None
