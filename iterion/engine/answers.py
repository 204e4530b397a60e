"""Answers to a paused human node: ``--answer k=v`` flags, ``--answers-file``, and ``key=@./path``.

Typing reuses ``coerce.py`` (one implementation of "a string -> the field's type"); this module
adds only what is specific to answering from a command line:

* ``merge_answer_sources``: typed values from a file, then explicit ``--answer`` flags over them;
* ``stage_file_answers``: a ``file``-typed field answered ``@./path`` is staged as a run attachment
  (the same upload the studio gate performs) and the field then carries the staged copy's path.
  ``@`` is honoured ONLY for fields the schema declares as ``file`` (a string field keeps a leading
  ``@`` untouched); inside a file field a literal leading ``@`` is written ``@@``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitrefs.persist.errors import ErrorKind
from iterion.engine.coerce import coerce_answers
from iterion.engine.errors import AnswerError, EngineError
from iterion.ir import FieldType, Schema
from iterion.store import Store
from iterion.store import events as ev

UPLOAD_PREFIX = "@"


def parse_answer_flags(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}`` (values stay strings; the schema types them later)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise EngineError(f"--answer {item!r} is not FIELD=VALUE", hint='e.g. --answer approved=true')
        out[key] = value
    return out


def merge_answer_sources(from_file: dict[str, Any] | None, flags: dict[str, str]) -> dict[str, Any]:
    """The file's typed values, overridden key by key by the explicit flags."""
    merged: dict[str, Any] = dict(from_file or {})
    merged.update(flags)
    return merged


def coerce_for_node(node: str, schema: Schema | None, answers: dict[str, Any]) -> dict[str, Any]:
    """Answers typed to ``schema``; a bad value is an EngineError naming the field and the type."""
    try:
        return coerce_answers(node, schema, answers)
    except AnswerError as exc:
        raise EngineError(str(exc), hint=_field_hint(schema), exit_code=ErrorKind.BAD_INPUT) from None


def _field_hint(schema: Schema | None) -> str | None:
    if schema is None:
        return None
    return "fields: " + ", ".join(f"{f.name} ({f.type.value})" for f in schema.fields)


def file_fields(schema: Schema | None) -> set[str]:
    return {f.name for f in schema.fields if f.type is FieldType.FILE} if schema is not None else set()


def upload_path(value: Any) -> Path | None:
    """The path a file field's ``@path`` names (None for a literal, including an ``@@`` escape)."""
    if not isinstance(value, str) or not value.startswith(UPLOAD_PREFIX) or value.startswith(UPLOAD_PREFIX * 2):
        return None
    return Path(value[1:])


def unescape_literal(value: Any) -> Any:
    """``@@x`` -> ``@x`` (the literal a file field wrote escaped); anything else unchanged."""
    if isinstance(value, str) and value.startswith(UPLOAD_PREFIX * 2):
        return value[1:]
    return value


def check_uploads(schema: Schema | None, answers: dict[str, Any], *, cwd: Path | None = None) -> None:
    """Refuse (before anything is claimed) an ``@path`` that names no readable file."""
    base = cwd or Path.cwd()
    for name in sorted(file_fields(schema) & set(answers)):
        path = upload_path(answers[name])
        if path is not None and not (base / path).is_file():
            raise EngineError(f"answer {name}=@{path}: {base / path} is not a readable file",
                              hint=f"give an existing file, or write a literal leading @ as @@ (--answer {name}=@@...)")


def stage_file_answers(store: Store, run_id: str, node: str, schema: Schema | None, answers: dict[str, Any], *,
                       cwd: Path | None = None, emit: Any = None) -> dict[str, Any]:
    """Stage every ``@path`` of a file field as attachment ``<field>``; return the answers with
    those fields set to the staged copy's absolute path and ``@@`` escapes undone."""
    base = cwd or Path.cwd()
    out = dict(answers)
    for name in sorted(file_fields(schema) & set(answers)):
        path = upload_path(answers[name])
        if path is None:
            out[name] = unescape_literal(answers[name])
            continue
        record = store.attachments(run_id).stage(name, base / path)
        out[name] = record.path
        if emit is not None:
            emit(ev.ATTACHMENT_STAGED, node, None, {"name": name, "field": name, "source": str(base / path),
                                                    "path": record.path, "size": record.size,
                                                    "sha256": record.sha256, "mime": record.mime})
    return out


def pending_schema(state: Any, wf: Any) -> tuple[str | None, Schema | None]:
    """(node id, output schema) of the human node a parked run waits on, else (None, None)."""
    pending = getattr(state, "pending", None)
    if pending is None:
        return None, None
    node = wf.nodes.get(pending.node)
    if node is None or node.kind.value != "human":
        return pending.node, None
    return node.id, node.output_schema


def check_pending_uploads(state: Any, wf: Any, answers: dict[str, Any] | None) -> None:
    """Resume pre-flight: every ``@path`` answer of a file field names a readable file."""
    if answers:
        check_uploads(pending_schema(state, wf)[1], answers)


def stage_pending_answers(store: Store, run_id: str, state: Any, wf: Any, answers: dict[str, Any] | None,
                          emit: Any = None) -> dict[str, Any] | None:
    """Resume hook: stage the ``@path`` uploads of the paused node's file fields (see module doc)."""
    node, schema = pending_schema(state, wf)
    if not answers or node is None or schema is None:
        return answers
    return stage_file_answers(store, run_id, node, schema, answers, emit=emit)
