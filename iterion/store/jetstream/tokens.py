"""Run ids and names as JetStream KV keys and subject tokens (below the store and its blob
stores, which both need them)."""

from __future__ import annotations

import re

from iterion.store.ids import validate_run_id

_PLAIN_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def run_token(run_id: str) -> str:
    """The run id as one KV key and one subject token. Generated ids (hex) are used as they are;
    any other valid id (dots, non-ASCII) becomes ``=`` + the hex of its UTF-8 bytes, which no
    plain id can collide with (plain ids never contain ``=``)."""
    validate_run_id(run_id)
    return run_id if _PLAIN_ID_RE.match(run_id) else "=" + run_id.encode("utf-8").hex()


def run_id_of(token: str) -> str:
    return bytes.fromhex(token[1:]).decode("utf-8") if token.startswith("=") else token


def key_token(text: str) -> str:
    """Any non-empty string as one KV key token (a name, an artifact name): plain, or ``=`` + hex."""
    return text if _PLAIN_ID_RE.match(text) else "=" + text.encode("utf-8").hex()
