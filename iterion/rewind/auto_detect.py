"""``--auto`` detection: diff the source the run executed against the source on disk.

The run records every file of its unit (``workflow_sources``); the comparison is the DSL's
declaration-granular diff (``iterion.dsl.diff``), which runs on the AST without spans, so
comments and line shifts are not changes. A run that recorded its main file alone while the
unit now has several cannot be diffed honestly (an edit in a fragment would be invisible), so
``--auto`` is refused there and asks for ``--node``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iterion.rewind.errors import AutoRefusedError
from iterion.rewind.sources import disk_unit, main_and_bundle
from iterion.store import RunDoc


@dataclass
class DetectedEdit:
    changes: list[str]  # one human-readable line per changed declaration
    impacted: dict[str, list[str]] = field(default_factory=dict)  # node -> reasons


def recorded_unit(doc: RunDoc, disk: dict[str, str], main_rel: str) -> dict[str, str]:
    """The unit as the run executed it; refuses when it cannot be diffed file for file."""
    if doc.workflow_sources:
        return dict(doc.workflow_sources)
    if doc.workflow_source is None:
        raise AutoRefusedError(
            f"run {doc.id} did not record its workflow source, so --auto cannot tell what changed",
            hint="name the pivot with --node NODE",
        )
    if len(disk) > 1:
        why = ("over the 1 MiB cap" if doc.workflow_sources_truncated
               else "launched before a unit's files were recorded")
        raise AutoRefusedError(
            f"run {doc.id} recorded its main file alone ({why}) but the workflow's unit has "
            f"{len(disk)} files; "
            "an edit outside the main file would be invisible to --auto",
            hint="name the pivot with --node NODE",
        )
    return {main_rel: doc.workflow_source}


def detect_edit(doc: RunDoc, source: Path) -> DetectedEdit:
    from iterion.dsl import diff as dsl_diff
    from iterion.dsl.canonical import UnitError

    if source.is_file() and source.suffix == ".botz":
        raise AutoRefusedError(f"--auto cannot diff inside the archive {source}",
                               hint="pass the unpacked bundle directory with --file, "
                                    "or name the pivot with --node")
    disk, _ = disk_unit(source)
    main, _bundle = main_and_bundle(source)
    main_rel = main.name
    recorded = recorded_unit(doc, disk, main_rel)
    recorded_main = main_rel if main_rel in recorded else None
    try:
        result = dsl_diff.diff_units(recorded, disk, old_main=recorded_main, new_main=main_rel)
    except UnitError as exc:
        raise AutoRefusedError(f"--auto cannot compare the recorded source with {source}: {exc.message}",
                               hint="name the pivot with --node NODE") from None
    changes = [f"{c} ({c.path})" for c in result.changes]
    if changes and not result.impacted:
        raise AutoRefusedError(f"the edit affects no node ({'; '.join(changes)}): nothing to rewind",
                               hint="resume with --force to run the edited workflow from the checkpoint")
    impacted = {node: list(reasons) for node, reasons in result.impacted.items()}
    return DetectedEdit(changes=changes, impacted=impacted)
