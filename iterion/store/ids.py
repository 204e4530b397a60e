"""Run and interaction ids: time-ordered (lexicographic order = creation order) and unique.

An id is 32 lowercase hex digits: 48 bits of milliseconds since the epoch, then 80 random
bits. Within one process ids are also strictly increasing even inside one millisecond, so a
listing sorted by id is the launch order.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Collection

from gitrefs.ids import validate_id
from gitrefs.persist.text import one_line
from iterion.store.errors import StoreError

_ADJECTIVES = (
    "amber", "brave", "calm", "clever", "crisp", "dapper", "eager", "fancy", "gentle", "glad",
    "golden", "happy", "jolly", "keen", "lively", "lucky", "merry", "mighty", "nimble", "noble",
    "plucky", "proud", "quick", "quiet", "rapid", "shiny", "silent", "steady", "sunny", "swift",
    "tidy", "vivid", "wise", "witty", "zesty", "bold",
)
_NOUNS = (
    "badger", "beacon", "birch", "comet", "cedar", "falcon", "fern", "harbor", "heron", "lantern",
    "maple", "meadow", "otter", "pebble", "pine", "quartz", "raven", "river", "robin", "sparrow",
    "summit", "thistle", "tiger", "valley", "willow", "wren", "zephyr", "orchid", "kestrel", "lynx",
)

_lock = threading.Lock()
_last: int = 0
RUN_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def new_id() -> str:
    """A fresh sortable unique id (see module doc)."""
    import secrets  # (here: its OpenSSL start is a tenth of listing runs, which makes no id)

    global _last
    with _lock:
        ms = time.time_ns() // 1_000_000
        rand = secrets.randbits(80)
        value = (ms << 80) | rand
        # Keep ids strictly increasing in-process even when the clock stalls or steps back.
        if value <= _last:
            value = _last + 1
        _last = value
    return f"{value:032x}"


def id_time_ms(run_id: str) -> int:
    """The creation time (ms since the epoch) encoded in an id from ``new_id``."""
    return int(run_id[:12], 16)


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_").lower()
    return slug or "run"


def friendly_name(workflow: str, taken: Collection[str] = ()) -> str:
    """``<workflow>-<adjective>-<noun>``, e.g. ``tidy-brave-otter``, avoiding the names in ``taken``
    when a free combination turns up in a few draws (``Store.create_run`` makes the final name
    unique under a lock, with a numeric suffix if need be)."""
    import secrets

    name = ""
    for _ in range(32):
        name = f"{_slug(workflow)}-{secrets.choice(_ADJECTIVES)}-{secrets.choice(_NOUNS)}"
        if name not in taken:
            return name
    return name


def validate_run_id(run_id: str) -> str:
    """A run id must be one path component and one git ref component."""
    return validate_id(run_id, "run id")


# A run id or name becomes a directory name and a ref component: a filesystem name is at most
# 255 bytes, so a longer reference can name no run.
MAX_RUN_REF_BYTES = 255
_SHOWN_CHARS = 64


def display_ref(ref: str, limit: int = _SHOWN_CHARS) -> str:
    """``ref`` made safe for a one-line message: control characters escaped, long text cut."""
    escaped = one_line(ref)
    if len(escaped) <= limit:
        return escaped
    return f"{escaped[:limit]}... ({len(ref)} characters)"


def check_run_ref(ref: str) -> str:
    """Refuse a run reference (id, prefix or name) that can name no run: empty, too long, control characters."""
    if not ref.strip():  # `--run-id "$RUN"` with RUN unset: say so, not "prefix  is too short"
        raise StoreError("the run id is empty" if not ref else f"the run id {ref!r} is blank",
                         hint="pass the run's id, a unique prefix of it or its name (`iterion inspect` lists them)")
    if len(ref.encode("utf-8", "surrogateescape")) > MAX_RUN_REF_BYTES:
        raise StoreError(f"run id {display_ref(ref)} is too long to name a run (at most {MAX_RUN_REF_BYTES} bytes)",
                         hint="list runs with `iterion inspect`")
    if any(not ch.isprintable() for ch in ref):
        raise StoreError(f"run id {display_ref(ref)} contains a control character, which no run id or name has",
                         hint="list runs with `iterion inspect`")
    return ref
