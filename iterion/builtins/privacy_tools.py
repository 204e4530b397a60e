"""privacy_filter and privacy_unfilter (docs/language.md, "Built-in tools"): redaction into the run's vault
(``iterion.builtins.vault``) and restoration from it. The tools see the real text; what the run
persists is scrubbed (``vault.scrub``)."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from typing import Any

from iterion.builtins import vault
from iterion.builtins.privacy import CATEGORIES, detect
from iterion.builtins.registry import BuiltinContext, BuiltinError

ENGINE = "iterion-regex/1"
MISSING_POLICIES = ("leave", "error", "remove")


def _text(args: dict[str, Any], tool: str) -> str:
    text = args.get("text")
    if not isinstance(text, str):
        raise BuiltinError(f"{tool} needs input text (a string), got {type(text).__name__}; "
                           'map it with with { text: "..." }')
    return text


def _categories(args: dict[str, Any]) -> tuple[str, ...]:
    raw = args.get("categories")
    if raw in (None, "", []):
        return CATEGORIES
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise BuiltinError("privacy_filter: categories must be a list of strings")
    bad = [c for c in raw if c not in CATEGORIES]
    if bad:
        raise BuiltinError(f"privacy_filter: unknown category {bad[0]!r}; expected some of {', '.join(CATEGORIES)}")
    return tuple(raw)


def _counts(found: list[Any]) -> dict[str, Any]:
    counts = Counter(f.category for f in found)
    return {"category_counts": {c: counts.get(c, 0) for c in CATEGORIES},
            **{f"has_{c}": counts.get(c, 0) > 0 for c in CATEGORIES}}


def call_privacy_filter(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    t0 = time.monotonic()
    text = _text(args, "privacy_filter")
    mode = args.get("mode") or "redact"
    if mode not in ("redact", "detect"):
        raise BuiltinError(f"privacy_filter: mode must be redact or detect, got {mode!r}")
    try:
        min_score = float(args["min_score"]) if args.get("min_score") is not None else 0.5
    except (TypeError, ValueError):
        raise BuiltinError("privacy_filter: min_score must be a number") from None
    fmt = args.get("placeholder_format") or "{token}"
    if not isinstance(fmt, str) or "{token}" not in fmt:
        raise BuiltinError("privacy_filter: placeholder_format must contain {token} (e.g. \"[{category}:{token}]\")")
    found = detect(text, _categories(args), min_score)
    if mode == "detect":
        spans = [{"category": f.category, "score": f.score, "start": f.start, "end": f.end, "rule": f.rule,
                  "value_hash": "sha256:" + hashlib.sha256(f.value.encode()).hexdigest()[:16]} for f in found]
        return {"spans": spans, **_counts(found)}
    tokens = vault.add(ctx.run_dir, ctx.run_id, [(f.value, f.category, fmt) for f in found]) if found else {}
    doc = vault.load(ctx.run_dir) if found else None
    parts: list[str] = []
    pos = 0
    placeholders = []
    for f in found:
        token = tokens[(f.value, f.category)]
        assert doc is not None
        parts += [text[pos:f.start], doc.entries[token].placeholder]
        pos = f.end
        placeholders.append({"token": token, "category": f.category, "score": f.score, "rule": f.rule})
    parts.append(text[pos:])
    return {"redacted": "".join(parts), "placeholders": placeholders, **_counts(found), "engine": ENGINE,
            "elapsed_ms": round((time.monotonic() - t0) * 1000, 3)}


def call_privacy_unfilter(ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    text = _text(args, "privacy_unfilter")
    policy = args.get("missing_policy") or "leave"
    if policy not in MISSING_POLICIES:
        raise BuiltinError(f"privacy_unfilter: missing_policy must be one of {', '.join(MISSING_POLICIES)}, "
                           f"got {policy!r}")
    doc = vault.load(ctx.run_dir)
    substituted = 0
    # the placeholders as written (a placeholder_format may wrap the token), longest first
    for entry in sorted(doc.entries.values(), key=lambda e: len(e.placeholder), reverse=True):
        if entry.placeholder != entry.value and entry.placeholder in text:
            substituted += text.count(entry.placeholder)
            text = text.replace(entry.placeholder, entry.value)
    missing: list[str] = []

    def bare(m: Any) -> str:
        nonlocal substituted
        token = m.group(0)
        entry = doc.entries.get(token)
        if entry is not None:
            substituted += 1
            return entry.value
        if token not in missing:
            missing.append(token)
        return "" if policy == "remove" else token

    text = vault.TOKEN_RE.sub(bare, text)
    if missing and policy == "error":
        raise BuiltinError(f"privacy_unfilter: no vault entry for {', '.join(missing)} (missing_policy error); "
                           "was the text redacted by this run?")
    return {"text": text, "substituted": substituted, "missing": missing}
