"""Skip codes (``Manifest.skipped``, restore reports) as reasons a person can act on.

The code stays the reason's first word, so a reader matching on it keeps working.
"""

from __future__ import annotations

from workspacetrack.bigfiles import SIZE_CAP_ENV, human_size
from workspacetrack.models import SkipReason


def describe(reason: str, size_cap: int | None = None) -> str:
    """``reason`` (a ``SkipReason``, or a code with its detail) as a person reads it."""
    if reason == SkipReason.OVERSIZED:
        limit = f" of {human_size(size_cap)}" if size_cap is not None else ""
        return (f"{SkipReason.OVERSIZED}: larger than the capture limit{limit}, so never captured "
                f"(raise it with {SIZE_CAP_ENV})")
    if reason == SkipReason.UNREADABLE:
        return f"{SkipReason.UNREADABLE}: could not be read when captured"
    if reason == SkipReason.SPECIAL:
        return f"{SkipReason.SPECIAL}: a fifo, socket or device file, never captured"
    if reason == SkipReason.GIT_UNRESTORED:
        return f"{SkipReason.GIT_UNRESTORED}: not restored by git"
    return str(reason)
