"""iterion: the .bot language, the run store, the durable engine, resume and rewind.

The Python API (``iterion.api``, docs/python-api.md) is re-exported here and imported on first
use (PEP 562), so ``import iterion`` (and the CLI's start-up) stays light. ``rewind`` is
``iterion.api.rewind``: ``iterion.rewind`` is the rewind engine's package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitrefs.persist.lazyexports import lazy_exports

__version__ = "0.2.0"

if TYPE_CHECKING:
    from iterion.api import (
        InvalidWorkflowError,
        IterionError,
        RefusedError,
        RewindReport,
        Run,
        RunFailedError,
        RunNotFoundError,
        RunStatus,
        RunSummary,
        SourceChangedError,
        inspect,
        resume,
        run,
        runs,
    )

__all__ = ["InvalidWorkflowError", "IterionError", "RefusedError", "RewindReport", "Run", "RunFailedError",
           "RunNotFoundError", "RunStatus", "RunSummary", "SourceChangedError", "__version__", "inspect",
           "resume", "run", "runs"]
__getattr__, __dir__ = lazy_exports(__name__, {n: "iterion.api" for n in __all__ if n != "__version__"}, globals())
