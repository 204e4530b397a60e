"""Skip codes (``Manifest.skipped``, restore reports) as reasons a person can act on.

The code stays the reason's first word, so a reader matching on it keeps working.
"""

from __future__ import annotations

from workspacetrack.bigfiles import SIZE_CAP_ENV, human_size
from workspacetrack.models import SKIP_OVERSIZED, SKIP_SPECIAL, SKIP_UNREADABLE


def describe(reason: str, size_cap: int | None = None) -> str:
    if reason == SKIP_OVERSIZED:
        limit = f" of {human_size(size_cap)}" if size_cap is not None else ""
        return (f"{SKIP_OVERSIZED}: larger than the capture limit{limit}, so never captured "
                f"(raise it with {SIZE_CAP_ENV})")
    if reason == SKIP_UNREADABLE:
        return f"{SKIP_UNREADABLE}: could not be read when captured"
    if reason == SKIP_SPECIAL:
        return f"{SKIP_SPECIAL}: a fifo, socket or device file, never captured"
    return reason
