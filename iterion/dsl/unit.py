"""What loading a workflow yields: every file of the program (a *unit*) and the compile result."""

from __future__ import annotations

from dataclasses import dataclass, field

from iterion.dsl import ast
from iterion.dsl.diagnostics import Diagnostic
from iterion.ir import Workflow


@dataclass(frozen=True)
class UnitFile:
    path: str  # as shown in diagnostics (spans use the same string)
    text: str
    role: str  # main | fragment | include | bundle_prompt | bundle_preset | manifest (digest roles + manifest)


@dataclass
class Unit:
    """Every file the program is made of, in load order (main first), with its text.

    ``files`` is what the workflow digest covers: `.bot` files, included prompt files, a
    bundle's prompts/presets and its manifest. ``asts`` are the parsed `.bot` files.
    """

    main: str
    files: list[UnitFile] = field(default_factory=list)
    asts: list[ast.File] = field(default_factory=list)
    bundle_root: str | None = None

    def add(self, path: str, text: str, role: str) -> None:
        if all(f.path != path for f in self.files):
            self.files.append(UnitFile(path, text, role))

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
