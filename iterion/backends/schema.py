"""Output schemas for backends: JSON Schema for providers, prompt instructions, JSON extraction,
and the check that an output matches an ``ir.Schema``."""

from __future__ import annotations

import json
import re
from typing import Any

from iterion import ir
from iterion.backends.base import ASK_USER_KEY, NEEDS_INTERACTION_KEY, BackendError, BackendRequest
from iterion.failure_codes import FailureCode

_JSON_TYPES: dict[ir.FieldType, dict[str, Any]] = {
    ir.FieldType.STRING: {"type": "string"},
    ir.FieldType.BOOL: {"type": "boolean"},
    ir.FieldType.INT: {"type": "integer"},
    ir.FieldType.FLOAT: {"type": "number"},
    ir.FieldType.JSON: {},
    ir.FieldType.STRING_LIST: {"type": "array", "items": {"type": "string"}},
    ir.FieldType.FILE: {"type": "string", "description": "a file path"},
}


def json_schema(schema: ir.Schema) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for f in schema.fields:
        spec = dict(_JSON_TYPES[f.type])
        if f.enum:
            typed = [v for v in (_enum_value(f.type, e) for e in f.enum) if v is not _NO_VALUE]
            if typed:  # an enum on a non-string field (accepted, C101) holds the values' text
                spec["enum"] = typed
        props[f.name] = spec
    return {"type": "object", "properties": props, "required": [f.name for f in schema.fields],
            "additionalProperties": False}


def router_schema(request: BackendRequest) -> ir.Schema:
    """The schema an llm router answers with: one target, or a list of targets when multi."""
    if request.multi:
        return ir.Schema("route", (ir.SchemaField("targets", ir.FieldType.STRING_LIST),))
    return ir.Schema("route", (ir.SchemaField("target", ir.FieldType.STRING, tuple(request.choices)),))


def effective_schema(request: BackendRequest) -> ir.Schema | None:
    if request.choices:
        return router_schema(request)
    return request.output_schema


def output_instructions(request: BackendRequest) -> str:
    """Text appended to the system prompt: the JSON shape to answer with, and how to ask."""
    parts: list[str] = []
    schema = effective_schema(request)
    if request.choices:
        parts.append("Choose the next step among: " + ", ".join(request.choices) + ".")
    if schema is not None:
        parts.append("Answer with one JSON object only, matching this JSON Schema:\n"
                     + json.dumps(json_schema(schema), sort_keys=True))
    if request.allow_ask_user:
        parts.append(f'If you need information from the user first, answer with only {{"{ASK_USER_KEY}": '
                     '"<your question>"} instead.')
    return "\n\n".join(parts)


def prior_exchange(request: BackendRequest) -> str:
    """The earlier ask_user question and its answer, for backends that cannot resume a session."""
    if request.prior_question is None and request.prior_answer is None:
        return ""
    answer = request.prior_answer if isinstance(request.prior_answer, str) else json.dumps(request.prior_answer)
    return f"Earlier you asked the user: {request.prior_question}\nThe user answered: {answer}"


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's text (bare, or in a ```json fence, or the outermost {...})."""
    candidates = [text.strip()]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for c in candidates:
        try:
            value = json.loads(c)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise BackendError(FailureCode.SCHEMA_VALIDATION, f"the model did not answer with a JSON object: {text[:200]!r}")


def _type_ok(ftype: ir.FieldType, value: Any) -> bool:
    if ftype is ir.FieldType.STRING or ftype is ir.FieldType.FILE:
        return isinstance(value, str)
    if ftype is ir.FieldType.BOOL:
        return isinstance(value, bool)
    if ftype is ir.FieldType.INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if ftype is ir.FieldType.FLOAT:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ftype is ir.FieldType.STRING_LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return True  # json: anything


_NO_VALUE = object()


def _enum_value(ftype: ir.FieldType, text: str) -> Any:
    """An enum entry (always written as a string) as a value of the field's type, or _NO_VALUE."""
    if ftype in (ir.FieldType.STRING, ir.FieldType.FILE, ir.FieldType.STRING_LIST, ir.FieldType.JSON):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return _NO_VALUE
    return value if _type_ok(ftype, value) else _NO_VALUE


def enum_ok(value: Any, enum: tuple[str, ...]) -> bool:
    """Strings compare as they are, other scalars by their JSON text (so `n: int [enum: "1", "2"]`
    accepts 1: docs/language.md 2 accepts an enum on any type), a list item by item; an object is
    not constrained."""
    if isinstance(value, list):
        return all(enum_ok(v, enum) for v in value)
    if isinstance(value, dict):
        return True
    return (value if isinstance(value, str) else json.dumps(value)) in enum


def schema_problems(schema: ir.Schema, output: Any) -> list[str]:
    """Why ``output`` does not match ``schema`` (empty list = it matches)."""
    if not isinstance(output, dict):
        return [f"output is {type(output).__name__}, not an object"]
    problems: list[str] = []
    for f in schema.fields:
        if f.name not in output:
            problems.append(f"missing field {f.name!r}")
        elif not _type_ok(f.type, output[f.name]):
            problems.append(f"field {f.name!r} should be {f.type.value}, got {type(output[f.name]).__name__}")
        elif f.enum and not enum_ok(output[f.name], f.enum):
            problems.append(f"field {f.name!r} must be one of {', '.join(f.enum)}, got {output[f.name]!r}")
    return problems


def check_output(schema: ir.Schema, output: Any, *, node_id: str = "") -> dict[str, Any]:
    """``output`` if it matches ``schema``, else BackendError(SCHEMA_VALIDATION)."""
    problems = schema_problems(schema, output)
    if problems:
        where = f"node {node_id}: " if node_id else ""
        raise BackendError(FailureCode.SCHEMA_VALIDATION,
                           f"{where}output does not match schema {schema.name}: " + "; ".join(problems))
    return output


def selected_targets(request: BackendRequest, output: dict[str, Any]) -> tuple[str, ...]:
    """The router targets named in ``output``, each checked against the request's choices."""
    picked = output.get("targets") if request.multi else [output.get("target")]
    if not isinstance(picked, list) or not picked:
        raise BackendError(FailureCode.SCHEMA_VALIDATION, f"router {request.node_id}: no target chosen")
    bad = [p for p in picked if p not in request.choices]
    if bad:
        raise BackendError(FailureCode.SCHEMA_VALIDATION,
                           f"router {request.node_id}: {bad[0]!r} is not one of {', '.join(request.choices)}")
    return tuple(picked)


def asked(obj: dict[str, Any]) -> str | None:
    """The question of an ``{"_ask_user": "..."}`` or ``{"_needs_interaction": ...}`` answer (the
    latter may be a question string or an object with ``question``/``message``), else None."""
    for key in (ASK_USER_KEY, NEEDS_INTERACTION_KEY):
        v = obj.get(key)
        if isinstance(v, str) and v.strip():
            return v
        if isinstance(v, dict):
            q = v.get("question") or v.get("message") or v.get("prompt")
            if isinstance(q, str) and q.strip():
                return q
            return json.dumps(v, sort_keys=True)
        if v is True:
            q = obj.get("question") or obj.get("message")
            return q if isinstance(q, str) and q.strip() else "The agent needs your input to continue."
    return None


def finish_structured(request: BackendRequest, text: str) -> tuple[dict[str, Any] | None, str | None,
                                                                    tuple[str, ...]]:
    """Turn a model's text into (output, ask_user question, router selection) per the request."""
    schema = effective_schema(request)
    if schema is None and not request.allow_ask_user:
        return None, None, ()
    if schema is None:
        try:
            obj = parse_json_object(text)
        except BackendError:
            return None, None, ()
        question = asked(obj)
        if question is not None and (len(obj) == 1 or NEEDS_INTERACTION_KEY in obj):
            return None, question, ()
        return None, None, ()
    obj = parse_json_object(text)
    if request.allow_ask_user and (question := asked(obj)) is not None:
        return None, question, ()
    check_output(schema, obj, node_id=request.node_id)
    if request.choices:
        return obj, None, selected_targets(request, obj)
    return obj, None, ()
