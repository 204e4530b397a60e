"""The PII vault of a run: ``runs/<run_id>/pii_vault.json`` (mode 0600, written atomically under
a lock; kept across resumes and rewinds: later nodes may hold its tokens). It maps each
placeholder token to the raw value it stands for; ``scrub`` is the persistence hook that puts
the tokens back in place of the raw values in whatever the run persists (events, checkpoints,
artifacts), so the vault is the only file holding them."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from gitrefs.persist import VersionedModel, atomic_write_bytes, file_lock

VAULT_FILE = "pii_vault.json"
TOKEN_RE = re.compile(r"PII_[0-9a-f]{8}")


class VaultEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    value: str
    category: str
    placeholder: str  # the text written in place of the value (placeholder_format applied)


class VaultDoc(VersionedModel):
    FORMAT_VERSION: ClassVar[int] = 1
    model_config = ConfigDict(extra="ignore")

    run_id: str = ""
    entries: dict[str, VaultEntry] = Field(default_factory=dict)  # token -> entry


def vault_path(run_dir: Path) -> Path:
    return Path(run_dir) / VAULT_FILE


def load(run_dir: Path) -> VaultDoc:
    path = vault_path(run_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return VaultDoc()
    return VaultDoc.model_validate_json(data)


def token_for(run_id: str, value: str, category: str, salt: int = 0) -> str:
    """``PII_`` + 8 hex, stable per (run, value, category)."""
    h = hashlib.sha256(f"{run_id}\0{category}\0{value}\0{salt}".encode("utf-8", "surrogatepass"))
    return "PII_" + h.hexdigest()[:8]


def add(run_dir: Path, run_id: str, items: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """Record (value, category, placeholder_format) items; returns (value, category) -> token.
    The file is re-read under its lock: fan-out branches may redact at once."""
    out: dict[tuple[str, str], str] = {}
    with file_lock(Path(run_dir) / ".pii_vault.lock"):
        doc = load(run_dir)
        doc.run_id = run_id
        changed = False
        for value, category, fmt in items:
            salt = 0
            while True:
                token = token_for(run_id, value, category, salt)
                have = doc.entries.get(token)
                if have is None or (have.value == value and have.category == category):
                    break
                salt += 1  # a hash collision between two values: the next token
            if have is None:
                text = fmt.replace("{token}", token).replace("{category}", category.upper())
                doc.entries[token] = VaultEntry(value=value, category=category, placeholder=text)
                changed = True
            out[(value, category)] = token
        if changed:
            atomic_write_bytes(vault_path(run_dir), doc.model_dump_json(indent=2).encode(), mode=0o600)
    _cache.pop(str(run_dir), None)
    return out


# -- the persistence hook ---------------------------------------------------------------------------
_cache: dict[str, tuple[tuple[int, int], re.Pattern[str] | None, dict[str, str]]] = {}
_lock = threading.Lock()


def _matcher(run_dir: Path) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    try:
        st = os.stat(vault_path(run_dir))
    except OSError:
        return None, {}
    key = (st.st_mtime_ns, st.st_size)
    with _lock:
        hit = _cache.get(str(run_dir))
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
    doc = load(run_dir)
    values = {e.value: e.placeholder for e in doc.entries.values() if e.value}
    pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))) if values else None
    with _lock:
        _cache[str(run_dir)] = (key, pattern, values)
    return pattern, values


def scrub(run_dir: Path, value: Any) -> Any:
    """``value`` (JSON-like) with every raw value of the run's vault replaced by its placeholder;
    ``value`` itself when the run has no vault (the common case costs one stat)."""
    pattern, values = _matcher(run_dir)
    if pattern is None:
        return value
    return _walk(value, pattern, values)


def _walk(v: Any, pattern: re.Pattern[str], values: dict[str, str]) -> Any:
    if isinstance(v, str):
        return pattern.sub(lambda m: values[m.group(0)], v) if v else v
    if isinstance(v, dict):
        return {k: _walk(x, pattern, values) for k, x in v.items()}
    if isinstance(v, list):
        return [_walk(x, pattern, values) for x in v]
    if isinstance(v, tuple):
        return tuple(_walk(x, pattern, values) for x in v)
    return v


M = TypeVar("M", bound=BaseModel)


def scrub_model(run_dir: Path, model: M) -> M:
    """A pydantic document (a checkpoint) scrubbed like ``scrub``; ``model`` itself without a vault."""
    if _matcher(run_dir)[0] is None:
        return model
    return type(model).model_validate(scrub(run_dir, model.model_dump(mode="python")))


def scrub_run_fields(run_dir: Path, doc: Any) -> None:
    """The run document's fields that may carry a redacted value (the vars are the entry node's
    input; the error may quote a tool's output), scrubbed in place."""
    doc.vars = scrub(run_dir, doc.vars)
    doc.inputs = scrub(run_dir, doc.inputs)
    if doc.error:
        doc.error = scrub(run_dir, doc.error)
