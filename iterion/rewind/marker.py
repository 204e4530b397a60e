"""Whether a run has an unfinished rewind: the intent record's EXISTENCE is the mark
(``iterion.rewind.intent``). Kept apart from the record's model so the run list (``iterion
inspect``, every row) asks it without importing the restore machinery the model refers to."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iterion.store import Store


def has_intent(store: Store, run_id: str) -> bool:
    return os.path.lexists(store.paths(run_id).rewind_intent)
