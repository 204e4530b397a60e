"""Answering a parked run at the terminal: `run`/`resume` (and `iterion dev`) ask each field, then go on.

When a run parks at a human gate and both stdin and stdout are a terminal, ``ask`` (called by
``cli.run.terminal_answerer`` through ``iterion.api``'s ``on_question``, and by `iterion dev`)
asks the question's fields one by one, typed as the gate's schema declares them:

- an enum: its values numbered, answered by number or by value;
- a bool: ``y/n``;
- a string (and json, string[]): one line; ``@path`` reads the answer from a file (a literal
  leading ``@`` is written ``@@``); an empty line opens $VISUAL/$EDITOR for a multi-line answer;
- an int or float: a number; a file field: a path (``@`` optional), staged as the gate's upload;
- an agent's permission question: ``y/n``; a recovery pause: ``y`` once the cause is fixed.

There is NO default: an empty answer to a bool or an enum asks again, so pressing Enter never
approves anything. Each value is checked with the engine's own coercion (iterion/engine/coerce.py)
and a wrong one is asked again, naming why. Then the run resumes in the same process with those
answers, and if it parks at another gate the loop asks again. Ctrl-D or Ctrl-C at a prompt stops
asking: the run stays parked (exit 4) and the summary prints the `answer with:` command.

``--no-input``, ``--json``, or a stdin/stdout that is not a terminal keep the old behaviour: the
summary and exit 4, nothing read from stdin.

`iterion dev` asks through the same functions with its own line reader (``reading_with``): a
save of the workflow withdraws the open question (``Interrupted``), and ``q`` stops asking.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.output import echo, styled
from gitrefs.persist import UserError

if TYPE_CHECKING:
    from iterion.ir import SchemaField
    from iterion.store import Store

NO_INPUT = typer.Option(False, "--no-input", help="Never ask at the terminal: a run parked at a human gate "
                                                  "prints how to answer and exits 4 (as off a terminal). "
                                                  "Example: --no-input")

YES = ("y", "yes")
NO = ("n", "no")


class Stop(UserError):
    """The person stopped answering (Ctrl-D, Ctrl-C): the run stays parked (caught in this
    module: the summary and exit 4 follow, never an error line)."""


class Interrupted(UserError):
    """The question was withdrawn before it was answered (`iterion dev`: a workflow file was saved);
    raised by the line reader ``reading_with`` installs, never by the default one (caught by
    `iterion dev`, never reported as an error)."""


# reads one answer line given its prompt (default: ``input``); `iterion dev` installs one that a
# save interrupts (cli/dev.py) - a context variable, so nothing else ever sees it
_READER: ContextVar[Callable[[str], str]] = ContextVar("iterion_prompt_reader", default=input)


@contextmanager
def reading_with(reader: Callable[[str], str]) -> Iterator[None]:
    """Within the block, answers are read with ``reader(prompt)`` (it raises ``EOFError`` or
    ``KeyboardInterrupt`` to stop asking, ``Interrupted`` or ``Stop`` to leave the questions)."""
    token = _READER.set(reader)
    try:
        yield
    finally:
        _READER.reset(token)


def interactive(no_input: bool) -> bool:
    """Asking is possible and wanted: both ends a terminal, no ``--no-input``/``--json``."""
    if no_input:
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (OSError, ValueError):
        return False


def _read(prompt: str) -> str:
    try:
        return _READER.get()(prompt)
    except (EOFError, KeyboardInterrupt):
        echo()
        raise Stop("not answered: the run stays parked") from None


def _yes_no(prompt: str) -> bool:
    while True:
        text = _read(f"{prompt} [y/n]: ").strip().lower()
        if text in YES:
            return True
        if text in NO:
            return False
        echo(styled("  answer y or n (there is no default)", "yellow"))


def yes_no(prompt: str) -> bool:
    """A y/n question with no default (`iterion dev --confirm` asks it too)."""
    return _yes_no(prompt)


def _editor(name: str) -> str | None:
    """A multi-line answer written in the person's editor (None: closed without saving)."""
    import click  # typer's own dependency: finds $VISUAL, $EDITOR, else a system editor

    try:
        text = click.edit("", extension=".txt", require_save=True)
    except click.ClickException as exc:
        echo(styled(f"  cannot open an editor for {name}: {exc.format_message()}; set $EDITOR, or give @path",
                    "yellow"))
        return None
    return None if text is None else text.removesuffix("\n")


def _enum(f: SchemaField) -> str:
    values = list(f.enum or ())
    for i, v in enumerate(values, 1):
        echo(f"    {i}) {v}")
    while True:
        text = _read(f"  {f.name} (1-{len(values)} or a value): ").strip()
        if text.isdigit() and 1 <= int(text) <= len(values):
            return values[int(text) - 1]
        if text in values:
            return text
        echo(styled(f"  pick one of {', '.join(values)} (there is no default)", "yellow"))


def _text(f: SchemaField) -> str | None:
    """A line, a file's text (``@path``), or the editor's (an empty line); None: ask again."""
    text = _read(f"  {f.name} ({f.type.value}; @path reads a file, Enter opens $EDITOR): ")
    if text == "":
        return _editor(f.name)
    if text.startswith("@@"):
        return text[1:]
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8").removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            echo(styled(f"  cannot read {path}: {getattr(exc, 'strerror', None) or exc}", "yellow"))
            return None
    return text


def _file(f: SchemaField) -> str:
    while True:
        text = _read(f"  {f.name} (file: a path to upload): ").strip()
        path = Path(text.removeprefix("@")).expanduser()
        if text and path.is_file():
            return "@" + str(path.resolve())  # staged as the gate's attachment (iterion/engine/answers.py)
        echo(styled(f"  {path} is not a readable file" if text else "  give a path", "yellow"))


def ask_field(f: SchemaField) -> Any:
    """One field's answer, typed; asked again until it is valid."""
    from iterion.engine.coerce import coerce_value
    from iterion.engine.errors import AnswerError
    from iterion.ir import FieldType

    if f.enum:
        return _enum(f)
    if f.type is FieldType.BOOL:
        return _yes_no(f"  {f.name}")
    if f.type is FieldType.FILE:
        return _file(f)
    while True:
        if f.type in (FieldType.INT, FieldType.FLOAT):
            raw: str | None = _read(f"  {f.name} ({f.type.value}): ").strip()
        else:
            raw = _text(f)
        if raw is None:
            continue
        try:
            return coerce_value(f, raw)
        except AnswerError as exc:
            echo(styled(f"  {exc}", "yellow"))


def _schema_field(d: dict[str, Any]) -> SchemaField:
    from iterion.ir import FieldType, SchemaField

    try:
        kind = FieldType(str(d.get("type") or "string"))
    except ValueError:
        kind = FieldType.STRING
    enum = tuple(map(str, d["enum"])) if d.get("enum") else None
    return SchemaField(str(d.get("name")), kind, enum)


def ask(pending: dict[str, Any], *, hint: str = "(Ctrl-D leaves the run parked)") -> dict[str, Any]:
    """The answers to one parked gate, asked at the terminal (raises ``Stop``); ``hint``: the
    line shown before the fields."""
    from iterion.engine.placeholder import PERMISSION_FIELD
    from iterion.engine.recovery import ACK_FIELD

    node = pending.get("node")
    echo()
    echo(styled("?", "yellow"), " ", styled(str(node), "bold"), " asks:")
    for key in ("instructions", "question"):
        if pending.get(key):
            for line in str(pending[key]).strip().splitlines():
                echo(f"  {line}")
    if pending.get("permission"):
        return {PERMISSION_FIELD: "yes" if _yes_no(f"  allow {pending['permission'].get('tool')}") else "no"}
    fields = list(pending.get("fields") or [{"name": "answer", "type": "string"}])
    if [f.get("name") for f in fields] == [ACK_FIELD]:
        if not _yes_no("  is the cause fixed (retry the node)?"):
            raise Stop("not answered: the run stays parked")
        return {ACK_FIELD: "true"}
    echo(styled(f"  {hint}", "dim"))
    return {str(f.get("name")): ask_field(_schema_field(f)) for f in fields}


def ask_before_resume(store: Store, run_ref: str, *, no_input: bool) -> dict[str, Any]:
    """`resume` of a run parked at a gate, given no answers: ask them at the terminal ({} when it
    cannot ask, or the run waits on nobody). Stopped: the run stays parked, and the command exits
    4 after printing how to answer, as a `run` that parked there."""
    if not interactive(no_input):
        return {}
    try:
        run_id = store.resolve_run(run_ref)
        doc, cp = store.load_run(run_id), store.load_checkpoint(run_id)
    except Exception:  # noqa: BLE001 - an unknown or damaged run is reported by the resume itself
        return {}
    from iterion.store import RunStatus

    p = cp.pending_interaction if cp is not None else None
    if doc.status is not RunStatus.PAUSED_WAITING_HUMAN or p is None:
        return {}
    pending = {"node": p.node, "kind": p.kind, **p.questions}
    try:
        return ask(pending)
    except Stop:
        from cli.exit_codes import STATUS_EXIT
        from cli.parked import answer_command, store_args

        echo(styled("  not answered: the run stays parked", "dim"))
        echo(f"  answer with: {answer_command(doc.name or run_id, pending, store_args(store))}")
        raise typer.Exit(int(STATUS_EXIT[RunStatus.PAUSED_WAITING_HUMAN])) from None
