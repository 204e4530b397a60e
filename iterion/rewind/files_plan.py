"""The recorded restore decision lives with the versioning interface (iterion/engine/versioning_plan.py);
imported from here by the rewind's intent record."""

from __future__ import annotations

from iterion.engine.versioning_plan import FilesPlan

__all__ = ["FilesPlan"]
