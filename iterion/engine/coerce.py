"""Checking outputs against their schema, and coercing human answers (strings) to it."""

from __future__ import annotations

import json
import math
from typing import Any

from iterion.backends.schema import enum_ok
from iterion.datafile import DataFileError, loads_json
from iterion.engine.errors import AnswerError, NodeFailure
from iterion.engine.placeholder import is_placeholder, refusal
from iterion.failure_codes import FailureCode
from iterion.ir import FieldType, Schema, SchemaField


def type_ok(f: SchemaField, value: Any) -> bool:
    """Whether ``value`` is of ``f``'s declared type (ints fit a float field; null only json)."""
    t = f.type
    if value is None:
        return t is FieldType.JSON
    if t in (FieldType.STRING, FieldType.FILE):
        return isinstance(value, str)
    if t is FieldType.BOOL:
        return isinstance(value, bool)
    if t is FieldType.INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if t is FieldType.FLOAT:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t is FieldType.STRING_LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return True  # json: anything JSON can hold


def schema_problems(schema: Schema, data: Any) -> list[str]:
    if not isinstance(data, dict):
        return [f"expected a JSON object for schema {schema.name}, got {type(data).__name__}"]
    problems = []
    for f in schema.fields:
        if f.name not in data:
            problems.append(f"missing field {f.name!r} ({f.type.value})")
            continue
        value = data[f.name]
        if not type_ok(f, value):
            problems.append(f"field {f.name!r} should be {f.type.value}, got {json.dumps(value)[:80]}")
        elif f.enum and not enum_ok(value, f.enum):
            problems.append(f"field {f.name!r} is {value!r}, not one of {', '.join(f.enum)}")
    return problems


def validate_output(node: str, schema: Schema | None, data: Any) -> dict[str, Any]:
    """``data`` if it matches ``schema`` (floats given as ints are widened), else SCHEMA_VALIDATION."""
    if schema is None:
        if isinstance(data, dict):
            return data
        return {"text": data if isinstance(data, str) else json.dumps(data)}
    problems = schema_problems(schema, data)
    if problems:
        raise NodeFailure(FailureCode.SCHEMA_VALIDATION,
                          f"node {node}: output does not match schema {schema.name}: " + "; ".join(problems),
                          node=node, details={"problems": problems})
    out = dict(data)
    for f in schema.fields:
        if f.type is FieldType.FLOAT and isinstance(out[f.name], int):
            out[f.name] = float(out[f.name])
    return out


_TRUE = {"true", "yes", "y", "1", "on"}
_FALSE = {"false", "no", "n", "0", "off"}


def coerce_value(f: SchemaField, raw: Any) -> Any:
    """Turn one ``--answer key=value`` string into the field's type (typed values pass through)."""
    if not isinstance(raw, str):
        return raw
    t = f.type
    try:
        if t in (FieldType.STRING, FieldType.FILE):
            return raw
        if t is FieldType.BOOL:
            low = raw.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise AnswerError(f"answer {f.name}={raw!r} is not a bool (true/false)")
        if t is FieldType.INT:
            return int(raw.strip())
        if t is FieldType.FLOAT:
            value = float(raw.strip())
            if not math.isfinite(value):
                raise AnswerError(f"answer {f.name}={raw!r} is not a finite number", reason="is not a finite number")
            return value
        if t is FieldType.STRING_LIST:
            text = raw.strip()
            if text.startswith("["):
                return loads_json(text, f"answer {f.name}")
            return [part.strip() for part in text.split(",") if part.strip()]
        return loads_json(raw, f"answer {f.name}")
    except DataFileError as exc:  # too deep, NaN/Infinity/1e999, not JSON: say which
        reason = str(exc).removeprefix(f"answer {f.name} ")
        raise AnswerError(f"answer {f.name}={_short(raw)} {reason}", reason=reason) from None
    except (ValueError, json.JSONDecodeError) as exc:
        if isinstance(exc, AnswerError):
            raise
        raise AnswerError(f"answer {f.name}={_short(raw)} is not a valid {t.value}") from None


def _short(raw: str) -> str:
    """``raw`` quoted for a one-line message (a 10 MB value is not echoed whole)."""
    return repr(raw) if len(raw) <= 80 else repr(raw[:77] + "...")


def coerce_answers(node: str, schema: Schema | None, answers: dict[str, Any]) -> dict[str, Any]:
    """Answers coerced to the human node's output schema; unknown keys, missing fields and a
    printed placeholder pasted unchanged (iterion/engine/placeholder.py) refused."""
    if schema is None:
        return dict(answers)
    unknown = sorted(set(answers) - {f.name for f in schema.fields})
    if unknown:
        known = ", ".join(f.name for f in schema.fields)
        raise AnswerError(f"node {node} has no answer field {', '.join(unknown)} (fields: {known})")
    out: dict[str, Any] = {}
    for f in schema.fields:
        if f.name in answers:
            if is_placeholder(answers[f.name], f.type.value, f.enum):  # pasted unchanged: nobody decided
                raise AnswerError(refusal(f.name, str(answers[f.name]).strip()))
            out[f.name] = coerce_value(f, answers[f.name])
    problems = schema_problems(schema, out)
    if problems:
        raise AnswerError(f"answers for node {node}: " + "; ".join(problems))
    return validate_output(node, schema, out)
