"""The workflow as it is on disk NOW: compiled (the rewind resolves "downstream" against it) and
its unit's files (protected from the restore, and diffed by ``--auto``)."""

from __future__ import annotations

from pathlib import Path

from iterion.ir import Workflow
from iterion.rewind.errors import RewindError
from iterion.store import RunDoc


def main_and_bundle(source: Path) -> tuple[Path, Path | None]:
    """(main .bot file, bundle directory or None) for a file or a bundle directory."""
    if source.is_dir():
        return source / "main.bot", source
    return source, None


def disk_unit(source: Path) -> tuple[dict[str, str], list[Path]]:
    """(path relative to the main file's dir -> text, absolute paths) of every file of the unit."""
    from iterion.dsl.digest import DigestError, workflow_digest

    main, bundle = main_and_bundle(source)
    if not main.is_file():
        return {}, []
    try:
        result = workflow_digest(main, bundle_dir=bundle)
    except DigestError as exc:
        raise RewindError(exc.message, hint=exc.hint) from None
    base = main.absolute().parent
    return result.sources(), [base / f.path for f in result.files]


def load_current_workflow(source: Path, doc: RunDoc) -> tuple[Workflow, list[Path]]:
    from iterion.dsl import load_workflow

    result = load_workflow(source)
    if result.workflow is None:
        errors = [d for d in result.diagnostics if str(getattr(d, "severity", "error")).endswith("error")]
        first = errors[0] if errors else (result.diagnostics[0] if result.diagnostics else None)
        detail = f": {first.span}: {first.code} {first.message}" if first is not None else ""
        raise RewindError(f"the workflow {source} does not compile ({len(errors)} error(s)){detail}",
                          hint=f"fix it first (`iterion validate {source}`); rewind resolves the graph "
                               "against the source as it is now")
    _, files = disk_unit(source)
    if not files:
        files = [source]
    return result.workflow, files
