"""The claw agent's conversation, persisted so an ``ask_user`` or permission pause can continue it.

Stored at ``runs/<run>/conversations/<session>.json`` (atomic writes); the checkpoint's
``backend_sessions[node]`` holds the session id, so a rewind (which drops the node's session)
drops the rehydration with it. Messages are provider-neutral:

* ``{"role": "user", "content": text}``
* ``{"role": "assistant", "content": text, "tool_calls": [{"id", "name", "arguments"}]}``
* ``{"role": "tool", "tool_call_id", "name", "content": text, "is_error": bool}``

Invariant: when ``pending`` is set, the last assistant message holds a tool call with that id and
no tool message answers it yet; the calls after it in the same message are in ``queued``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field

from gitrefs.persist import VersionedModel, read_model, write_model


class PendingCall(VersionedModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    kind: str = "ask_user"  # ask_user | permission


class Conversation(VersionedModel):
    session_id: str
    node: str = ""
    provider: str = ""
    model: str = ""
    system: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    steps: int = 0  # tool-calling turns taken so far (against tool_max_steps)
    pending: PendingCall | None = None
    queued: list[dict[str, Any]] = Field(default_factory=list)  # tool calls after the pending one
    repaired: bool = False  # the one schema-repair turn was used


def new_session_id() -> str:
    return "claw-" + os.urandom(8).hex()


def conversation_path(directory: Path, session_id: str) -> Path:
    safe = "".join(c for c in session_id if c.isalnum() or c in "-_")
    return Path(directory) / f"{safe}.json"


def load(directory: Path | None, session_id: str | None) -> Conversation | None:
    if directory is None or not session_id:
        return None
    path = conversation_path(directory, session_id)
    if not path.is_file():
        return None
    return read_model(path, Conversation)


def save(directory: Path | None, conv: Conversation) -> None:
    if directory is None:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    write_model(conversation_path(directory, conv.session_id), conv)
