"""Reading a run's artifacts and attachments back: the one home of what `iterion artifacts`,
`iterion attachments` and the HTTP ``/artifacts`` and ``/attachments`` endpoints return.

Artifacts are addressed by the node that published them (a name no node published is also
accepted as the artifact's name) and a version. The bytes of an artifact are its value as
indented JSON plus a newline: the CLI and the server produce exactly these, so both ways read
byte-identical. Tombstoned versions (a rewind dropped the node that published them) stay
readable for comparison (docs/user-guide.md, "Artifacts and attachments"): they are listed with
``tombstoned: true``, are never what "the newest" means, and reading one by number says so.

Attachments are read from their staged copy, which must lie inside the run's attachments
directory: a record that points elsewhere (a hand-edited or hostile ``<name>.json``) is refused,
so no name or record can make a reader serve a file outside the store.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrefs.ids import InvalidIdError, validate_id
from gitrefs.persist.errors import ErrorKind
from iterion.invocation import command
from iterion.store.errors import StoreError

if TYPE_CHECKING:
    from iterion.store.artifacts import ArtifactDoc
    from iterion.store.attachments import AttachmentRecord
    from iterion.store.store import Store

LATEST = "latest"


class ItemNotFoundError(StoreError):
    """No such artifact, artifact version or attachment in the run (HTTP 404)."""


class TombstonedOnlyError(StoreError):
    """Every version asked for was tombstoned by a rewind: "the newest" names none (HTTP 409)."""


@dataclass(frozen=True)
class ArtifactEntry:
    name: str
    version: int
    node: str | None
    iteration: int | None
    size: int
    created_at: str
    tombstoned: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def artifact_bytes(doc: ArtifactDoc) -> bytes:
    """What reading an artifact returns: its value as indented JSON (keys in their order), newline-ended."""
    return (json.dumps(doc.value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _tombstones(store: Store, run_id: str) -> dict[str, set[int]]:
    cp = store.load_checkpoint(run_id)
    return {} if cp is None else {k: set(v) for k, v in cp.tombstoned_artifacts.items()}


def _entry(doc: ArtifactDoc, dead: dict[str, set[int]]) -> ArtifactEntry:
    return ArtifactEntry(name=doc.name, version=doc.version, node=doc.node, iteration=doc.iteration,
                         size=len(artifact_bytes(doc)), created_at=doc.created_at.isoformat(),
                         tombstoned=doc.version in dead.get(doc.name, ()))


def _docs(store: Store, run_id: str) -> list[ArtifactDoc]:
    arts = store.artifacts(run_id)
    return [arts.read(name, v) for name in arts.names() for v in arts.versions(name)]


def list_artifacts(store: Store, run_id: str, node: str | None = None) -> list[ArtifactEntry]:
    """Every version of every artifact of the run (or of ``node``), oldest first."""
    dead = _tombstones(store, run_id)
    docs = _docs(store, run_id)
    if node is not None:
        docs = _of_node(docs, node, run_id)
    docs.sort(key=lambda d: (d.created_at, d.name, d.version))
    return [_entry(d, dead) for d in docs]


def _of_node(docs: list[ArtifactDoc], node: str, run_id: str) -> list[ArtifactDoc]:
    mine = [d for d in docs if d.node == node] or [d for d in docs if d.name == node]
    if not mine:
        published = sorted({d.node or d.name for d in docs})
        raise ItemNotFoundError(f"run {run_id} has no artifact of node {node!r}",
                                hint=("nodes with artifacts: " + ", ".join(published)) if published
                                else "this run published no artifact (a node publishes with `publish: NAME`)")
    return mine


def parse_version(raw: str | int | None) -> int | None:
    """``None``/``latest`` -> None (the newest live version), else a positive version number."""
    if raw is None or raw == LATEST:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.isdigit():
        value = int(raw)
    else:
        raise StoreError(f"version must be a number or {LATEST}, got {raw!r}", hint="e.g. --version 2")
    if value < 1:
        raise StoreError(f"version must be at least 1, got {value}", hint="versions count from 1")
    return value


def read_artifact(store: Store, run_id: str, node: str, version: int | None = None) -> tuple[ArtifactEntry, bytes]:
    """The entry and bytes of ``node``'s artifact at ``version`` (None: the newest live one)."""
    dead = _tombstones(store, run_id)
    docs = sorted(_of_node(_docs(store, run_id), node, run_id), key=lambda d: (d.created_at, d.name, d.version))
    listing = command("artifacts", "--run-id", run_id, "--node", node)
    if version is None:
        live = [d for d in docs if d.version not in dead.get(d.name, ())]
        if not live:
            raise TombstonedOnlyError(
                f"every artifact version of node {node} in run {run_id} was tombstoned by a rewind "
                "(the node has not run again since)",
                hint=f"read a tombstoned one by number with --version V (listed by `{listing}`)",
                exit_code=ErrorKind.REFUSED)
        doc = live[-1]
    else:
        found = [d for d in docs if d.version == version]
        if not found:
            have = ", ".join(str(d.version) for d in docs)
            raise ItemNotFoundError(f"node {node} of run {run_id} has no artifact version {version}",
                                    hint=f"its versions: {have}")
        if len({d.name for d in found}) > 1:
            names = ", ".join(sorted({d.name for d in found}))
            raise StoreError(f"node {node} published several artifacts with version {version} ({names})",
                             hint="address the artifact by its name instead of the node")
        doc = found[0]
    return _entry(doc, dead), artifact_bytes(doc)


# -- attachments --------------------------------------------------------------------------------
def list_attachments(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [_record_json(r) for r in store.attachments(run_id).list()]


def _record_json(r: AttachmentRecord) -> dict[str, Any]:
    return {"name": r.name, "original_name": r.original_name, "mime": r.mime, "size": r.size,
            "sha256": r.sha256, "staged_at": r.staged_at.isoformat()}


def attachment_file(store: Store, run_id: str, name: str) -> tuple[dict[str, Any], Path]:
    """The record and the staged file of attachment ``name``, refused unless the file lies inside
    the run's attachments directory (see the module doc)."""
    try:
        validate_id(name, "attachment name")
    except InvalidIdError as exc:
        raise ItemNotFoundError(f"run {run_id} has no attachment {name!r}: {exc.message}") from None
    atts = store.attachments(run_id)
    record = atts.get(name)
    if record is None:
        have = ", ".join(r.name for r in atts.list())
        raise ItemNotFoundError(f"run {run_id} has no attachment {name!r}",
                                hint=f"its attachments: {have}" if have else "this run has no attachment")
    root = Path(os.path.realpath(atts.root))
    path = Path(os.path.realpath(record.path))
    if not path.is_relative_to(root) or not path.is_file():
        raise StoreError(f"attachment {name} of run {run_id}: its record points outside the run's "
                         f"attachments ({record.path})", hint="stage the attachment again",
                         exit_code=ErrorKind.REFUSED)
    return _record_json(record), path
