"""The pygit2 layer: boundary commits, refs, banks, reverts and workspace-checkpoint pushes.

Knows nothing of nodes, workflows or the CLI: node ids are opaque ref components.
Entry points: ``RunRefs`` (one run in one worktree), ``restore_bank``, ``list_runs``.

Modules: ``layout`` (ref names), ``snapshot`` (the `git add -A` tree), ``private_index`` (the
same tree for a run's boundaries, from a copy of the index kept warm), ``commits`` (signature,
trailers), ``run_refs`` (the facade), ``worktree_apply`` (revert's tree-to-tree update),
``bank_restore`` (bank onto a fresh clone), ``records`` (persisted/returned records),
``workspace``/``remotes``/``gitcli``/``run_lock`` (plumbing), ``errors``; plus the shared
vocabulary ``boundary``, ``ids`` and the ``produced_scope`` algorithm.

Names are imported on first use (PEP 562): importing ``gitrefs.ids`` (the DSL compiler and the
run store validate ids with it) does not pay for pygit2 (issue 14, point 10: CLI start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitrefs.persist.lazyexports import lazy_exports

if TYPE_CHECKING:
    from gitrefs.bank_restore import restore_bank
    from gitrefs.errors import (
        BareRepository,
        GitCommandFailed,
        GitRefsError,
        MissingRemote,
        NotARepository,
        PushFailed,
        RefLayoutError,
        RunAlreadyStarted,
        UnknownBoundary,
        UnknownRevision,
        UnknownRun,
    )
    from gitrefs.records import (
        BankRecord,
        BankRestoreResult,
        BoundaryRecord,
        PushRecord,
        RecoveryHint,
        RevertResult,
    )
    from gitrefs.run_refs import RunRefs, list_runs

__all__ = [
    "BankRecord", "BankRestoreResult", "BareRepository", "BoundaryRecord", "GitCommandFailed", "GitRefsError",
    "MissingRemote", "NotARepository", "PushFailed", "PushRecord", "RecoveryHint", "RefLayoutError",
    "RevertResult", "RunAlreadyStarted", "RunRefs", "UnknownBoundary", "UnknownRevision", "UnknownRun",
    "list_runs", "restore_bank",
]

_HOME = {
    "restore_bank": "gitrefs.bank_restore",
    **{n: "gitrefs.errors" for n in ("BareRepository", "GitCommandFailed", "GitRefsError", "MissingRemote",
                                     "NotARepository", "PushFailed", "RefLayoutError", "RunAlreadyStarted",
                                     "UnknownBoundary", "UnknownRevision", "UnknownRun")},
    **{n: "gitrefs.records" for n in ("BankRecord", "BankRestoreResult", "BoundaryRecord", "PushRecord",
                                      "RecoveryHint", "RevertResult")},
    "RunRefs": "gitrefs.run_refs",
    "list_runs": "gitrefs.run_refs",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
