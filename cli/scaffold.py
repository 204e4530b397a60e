"""`iterion init`'s files, and the worktree run's merge note: small user-facing helpers of cli/run.py.

``scaffold`` adds the starter workflow to a directory: a new or empty one gets the whole demo
(workflow, script answers, answers file, README); an existing project gets the workflow files
only, and none of its own files is touched. If any file it would write already exists it
refuses before writing anything (one line naming the files, exit 2), so a half-initialised
project never happens. The demo comes from the source checkout (fixtures/demo) when there is
one, else from the installed package (cli/demo, package data).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cli.errors import CliError

_PACKAGED = Path(__file__).resolve().parent / "demo"
_CHECKOUT = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
PROJECT_ONLY = ("README.md",)  # written into a new directory only: an existing project keeps its own


def demo_source() -> Path:
    for candidate in (_CHECKOUT, _PACKAGED):
        if (candidate / "demo.bot").is_file():
            return candidate
    raise CliError("the demo project is missing from this installation",
                   hint="reinstall iterion (pip install --force-reinstall iterion)")


def scaffold(directory: Path) -> list[str]:
    """Copy the demo into ``directory``; the names written, in order (see the module doc)."""
    src = demo_source()
    resolved = directory.resolve()
    if resolved == Path(resolved.anchor):  # `iterion run` refuses it as a workspace: nothing to run there
        raise CliError(f"{resolved} is the filesystem root", hint="init into a project directory, e.g. `iterion init my-demo`")
    if directory.exists() and not directory.is_dir():
        raise CliError(f"{directory} exists and is not a directory", hint="name a directory")
    fresh = not directory.exists() or not any(directory.iterdir())
    names = [p.name for p in sorted(src.iterdir())
             if p.is_file() and not p.name.startswith(".") and (fresh or p.name not in PROJECT_ONLY)]
    clashes = [n for n in names if (directory / n).exists() or (directory / n).is_symlink()]
    if clashes:
        raise CliError(f"{directory} already has {', '.join(clashes)}; nothing was written",
                       hint="init into another directory, or move those files away first")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. under /proc, or under a file: one line, nothing written
        raise CliError(f"cannot create {directory}: {exc.strerror or exc}", hint="init into a directory you can create") from None
    for name in names:
        shutil.copyfile(src / name, directory / name)
    return names


def next_step(directory: Path) -> str:
    """``cd DIR && iterion run demo.bot``, pasting as printed: the program named so that it is
    still found after that ``cd`` (a relative ``.venv/bin/iterion`` printed absolute)."""
    from iterion.invocation import command
    from iterion.shellquote import printed_word

    return f"cd {printed_word(str(directory))} && {command('run', 'demo.bot', anywhere=True)}"


def merge_skipped_reason(store: object, run_id: str) -> str:
    """Why a finished worktree run did not fast-forward its target branch (from its run_finished
    event), or a generic line when the reason was not recorded."""
    try:
        events = store.read_events(run_id)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a note for a person: never fail the command over it
        events = []
    for e in reversed(events):
        if e.type == "run_finished":
            from iterion.store.events import RunFinishedPayload, payload

            reason = payload(e, RunFinishedPayload).get("merge_skipped")
            if reason:
                return str(reason)
            break
    return "the reason was not recorded; merge the run's branch by hand"
