"""Compiling a workflow file for a run and computing what the run records about its source."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrefs.persist.inputs import SOURCE_LIMIT, check_regular_file, read_bounded
from iterion.engine.errors import EngineError, InvalidWorkflow
from iterion.ir import Workflow


@dataclass
class CompiledSource:
    path: Path                 # what the user named (file, bundle dir or .botz)
    workflow: Workflow
    diagnostics: list[Any]
    digest: str
    bare_digest: str           # legacy digest of the main bytes alone (resume accepts it)
    main_path: str             # key of the main file in ``sources``
    sources: dict[str, str] = field(default_factory=dict)
    bundle_path: str | None = None


def _load(path: Path) -> Any:
    try:
        from iterion.dsl import load_workflow  # type: ignore[attr-defined]
    except ImportError:
        from iterion.dsl.loader import load_workflow
    return load_workflow(path)


def compile_source(path: Path | str) -> CompiledSource:
    """Compile ``path``; raise InvalidWorkflow (carrying the diagnostics) on any error."""
    from iterion.dsl.digest import DigestError, bare_digest, workflow_digest

    p = Path(path)
    if not p.is_dir():  # a FIFO, /dev/zero or a symlink loop is refused here, at once, as bad input (exit 2)
        check_regular_file(p, "workflow file", SOURCE_LIMIT)
    if not p.exists():
        if p.is_symlink():  # "does not exist" would send the user looking for the link itself
            raise EngineError(f"workflow file {p} is a symlink to {os.readlink(p)}, which does not exist",
                              hint="fix the link, or give the path of the .bot file itself")
        raise EngineError(f"workflow file {p} does not exist", hint="give the path of a .bot file or bundle")
    result = _load(p)
    if result.workflow is None:
        raise InvalidWorkflow(str(p), list(result.diagnostics))
    unit = result.unit
    bundle_root = Path(unit.bundle_root) if getattr(unit, "bundle_root", None) else None
    main = p
    if bundle_root is not None:
        main = bundle_root / "main.bot"
    elif p.is_dir():
        main = p / "main.bot"
    try:
        digest = workflow_digest(main, bundle_dir=bundle_root, unit=unit)
        files = digest.files
        main_file = next((f for f in files if f.role.value == "main"), None)
        # a `.botz` member is read from the archive the loader read (never a path on disk)
        main_bytes = (main_file.text.encode("utf-8") if main_file is not None
                      else read_bounded(main, "workflow file", SOURCE_LIMIT))
    except (DigestError, OSError) as exc:
        raise EngineError(f"cannot record the workflow source: {exc}") from None
    main_key = main_file.path if main_file is not None else main.name
    return CompiledSource(path=p, workflow=result.workflow, diagnostics=list(result.diagnostics),
                          digest=digest.digest, bare_digest=bare_digest(main_bytes), main_path=main_key,
                          sources=digest.sources(),
                          bundle_path=str(p.resolve()) if bundle_root is not None else None)
