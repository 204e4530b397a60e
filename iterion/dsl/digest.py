"""The workflow digest: one SHA-256 over every file a run's program is made of.

The unit of a run is its main file, a bundle's ``prompts/*.md`` and ``presets/*.md``, the
fragments its ``import`` lines reach (transitively) and the files its prompts'
``{{include}}`` markers read (nested too). Files are hashed in a canonical order (role, then
path), each framed by its role, path and length, so no two different units share a byte
stream. A unit that is just its main file hashes EXACTLY as ``sha256(main bytes)``: that is
the digest runs recorded before the unit's other files entered it (``bare_digest``).

Discovery is the DSL loader's (``iterion.dsl.loader``), so the digest covers exactly the files
a launch reads. It is lenient: an import or include that cannot be read is left out (the
loader reports it); the digest fails only when the main file itself cannot be read as UTF-8.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gitrefs.persist.inputs import SOURCE_LIMIT, InputFileError, read_bounded
from iterion.dsl.errors import HintedError
from iterion.dsl.loader import load_workflow
from iterion.dsl.unit import PROGRAM_ROLES, Unit, UnitFile, UnitRole

__all__ = ["DigestError", "DigestResult", "UnitFile", "UnitRole", "bare_digest", "canonical_order",
           "digest_of_files", "workflow_digest"]

_ROLE_ORDER = {role: i for i, role in enumerate(UnitRole)}
_FRAME_HEADER = b"iterion-unit-v1\n"


class DigestError(HintedError):
    """A file of the unit exists but cannot be recorded (not UTF-8, unreadable)."""


@dataclass(frozen=True)
class DigestResult:
    digest: str  # lowercase hex SHA-256
    files: list[UnitFile]  # canonical order: main first

    @property
    def total_bytes(self) -> int:
        return sum(len(f.text.encode("utf-8")) for f in self.files)

    def sources(self) -> dict[str, str]:
        """path -> text of every file (the mapping the declaration diff reads)."""
        return {f.path: f.text for f in self.files}


def bare_digest(main_bytes: bytes) -> str:
    """The legacy digest: SHA-256 of the main file's bytes alone (resume still accepts it)."""
    return hashlib.sha256(main_bytes).hexdigest()


def canonical_order(files: Iterable[UnitFile]) -> list[UnitFile]:
    return sorted(files, key=lambda f: (_ROLE_ORDER[f.role], f.path))


def digest_of_files(files: Sequence[UnitFile]) -> str:
    """Recompute the digest from recorded files (any order)."""
    ordered = canonical_order(files)
    if not ordered or ordered[0].role is not UnitRole.MAIN:
        raise DigestError("a unit needs exactly one main file")
    if sum(1 for f in ordered if f.role is UnitRole.MAIN) != 1:
        raise DigestError("a unit needs exactly one main file")
    if len(ordered) == 1:
        return bare_digest(ordered[0].text.encode("utf-8"))
    h = hashlib.sha256(_FRAME_HEADER)
    for f in ordered:
        data = f.text.encode("utf-8")
        h.update(f"{f.role.value}\0{f.path}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _read_main(path: Path) -> str:
    try:
        data = read_bounded(path, "workflow file", SOURCE_LIMIT)
    except InputFileError as exc:
        raise DigestError(exc.message, hint=exc.hint) from None
    except OSError as exc:
        raise DigestError(f"cannot read workflow {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DigestError(f"{path} is not UTF-8 text (byte {exc.start})",
                          hint="save the workflow's files as UTF-8") from None


def workflow_digest(main: Path, *, bundle_dir: Path | None = None, unit: Unit | None = None) -> DigestResult:
    """Digest of the unit rooted at ``main`` (or of the bundle ``bundle_dir``: a directory or a
    ``.botz``). The files are discovered by the DSL loader, exactly as a launch reads them;
    paths are relative to the main file's directory (the bundle root for a bundle). ``unit``:
    the loader's result for this same path, when the caller has just loaded it (the unit is
    then not loaded a second time: one parse, not two, held at once)."""
    if unit is None:
        target = Path(bundle_dir if bundle_dir is not None else main).absolute()
        unit = load_workflow(target, env={}).unit
    root = Path(os.path.normpath(unit.main)).parent
    files: dict[str, UnitFile] = {}
    for f in unit.files:
        if f.role in PROGRAM_ROLES:
            rel = Path(os.path.relpath(os.path.normpath(f.path), root)).as_posix()
            files.setdefault(rel, replace(f, path=rel))
    if not any(f.role is UnitRole.MAIN for f in files.values()):
        # the loader could not read the main (missing, not UTF-8): say why, in our words
        main_path = Path(os.path.normpath(unit.main)) if unit.main else Path(main).absolute()
        text = _read_main(main_path)
        files[main_path.name] = UnitFile(path=main_path.name, role=UnitRole.MAIN, text=text)
    ordered = canonical_order(files.values())
    return DigestResult(digest=digest_of_files(ordered), files=ordered)
