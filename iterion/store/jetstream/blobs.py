"""Artifacts and attachments of a run on JetStream: bytes in the object store, an index in KV.

See ``iterion/store/jetstream/store.py`` for the layout and the commit points. Both classes keep
the face of their file-store counterparts (``ArtifactStore``, ``AttachmentStore``) so the engine
does not know which backend it writes to.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrefs.ids import validate_id
from gitrefs.persist import atomic_write_bytes, write_model
from iterion.store.artifacts import ArtifactDoc, ArtifactNotFoundError, ArtifactStore
from iterion.store.attachments import AttachmentRecord, AttachmentStore
from iterion.store.errors import StoreError
from iterion.store.jetstream.tokens import key_token, run_id_of, run_token

if TYPE_CHECKING:
    from iterion.store.jetstream.store import JetStreamStore

VERSION_ATTEMPTS = 100


class JetStreamArtifacts(ArtifactStore):
    """``<run>.<name>.<version>`` in KV ``<prefix>_artifacts`` -> the object holding the document."""

    def __init__(self, store: JetStreamStore, run_id: str, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.js, self.run_tok, self._name_tok = store, run_token(run_id), key_token

    def _prefix(self, name: str) -> str:
        return f"{self.run_tok}.{self._name_tok(validate_id(name, 'artifact name'))}"

    def versions(self, name: str) -> list[int]:
        prefix = self._prefix(name)

        async def go() -> list[int]:
            keys = await self.js._keys(self.js._artifacts, f"{prefix}.*")
            return sorted(int(k.rsplit(".", 1)[1]) for k in keys if k.rsplit(".", 1)[1].isdigit())

        return self.js._bridge.call(go())

    def names(self) -> list[str]:
        async def go() -> list[str]:
            keys = await self.js._keys(self.js._artifacts, f"{self.run_tok}.*.*")
            return sorted({run_id_of(k.split(".")[1]) for k in keys})

        return self.js._bridge.call(go())

    def publish(self, name: str, value: Any, *, node: str | None = None, iteration: int | None = None) -> ArtifactDoc:
        """The next version of ``name``: the KV create of its index entry allocates the number."""
        prefix = self._prefix(name)
        existing = self.versions(name)

        async def go() -> ArtifactDoc:
            from blake3 import blake3

            from iterion.store.jetstream.kvcreate import kv_create

            version = existing[-1] + 1 if existing else 1
            for _ in range(VERSION_ATTEMPTS):
                doc = ArtifactDoc(name=name, version=version, node=node, iteration=iteration, value=value)
                data = doc.model_dump_json().encode()
                obj = f"a/{blake3(data).hexdigest()}"
                await self.js._objects.put(obj, data)
                if await kv_create(self.js._artifacts, f"{prefix}.{version}", obj.encode()) is not None:
                    return doc
                version += 1  # another publisher took this version
            raise StoreError(f"artifact {name}: could not allocate a version after {VERSION_ATTEMPTS} attempts")

        return self.js._bridge.call(go())

    def read(self, name: str, version: int) -> ArtifactDoc:
        key = f"{self._prefix(name)}.{version}"

        async def go() -> ArtifactDoc:
            from nats.js.errors import KeyNotFoundError

            try:
                entry = await self.js._artifacts.get(key)
            except KeyNotFoundError:
                raise ArtifactNotFoundError(f"artifact {name} has no version {version}") from None
            obj = await self.js._objects.get((entry.value or b"").decode())
            return ArtifactDoc.model_validate_json(obj.data or b"")

        return self.js._bridge.call(go())


class JetStreamAttachments(AttachmentStore):
    """Staged locally as on files, and also kept in the object store for every other machine."""

    def __init__(self, store: JetStreamStore, run_id: str, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.js, self.run_tok, self._name_tok = store, run_token(run_id), key_token

    def _key(self, name: str) -> str:
        return f"{self.run_tok}.{self._name_tok(validate_id(name, 'attachment name'))}"

    def stage(self, name: str, source: Path, *, mime: str | None = None) -> AttachmentRecord:
        record = super().stage(name, source, mime=mime)
        key, obj, data = self._key(name), f"att/{self._key(name)}", Path(record.path).read_bytes()

        async def go() -> None:
            await self.js._objects.put(obj, data)  # first the bytes, then the record (the commit point)
            await self.js._attachments.put(key, record.model_dump_json().encode())

        self.js._bridge.call(go())
        return record

    def _materialise(self, record: AttachmentRecord) -> AttachmentRecord:
        """``record`` with its staged copy present here (fetched from the object store if missing)."""
        dest = self.root / "files" / Path(record.path).name
        if dest.is_file() and dest.stat().st_size == record.size:
            return record.model_copy(update={"path": str(dest.resolve())})
        obj = f"att/{self._key(record.name)}"

        async def go() -> bytes:
            return bytes((await self.js._objects.get(obj)).data or b"")

        data = self.js._bridge.call(go())
        if hashlib.sha256(data).hexdigest() != record.sha256:
            raise StoreError(f"attachment {record.name}: the stored bytes do not match its sha256",
                             hint="stage it again")
        atomic_write_bytes(dest, data)  # fsynced, renamed, parent fsynced
        local = record.model_copy(update={"path": str(dest.resolve())})
        write_model(self.root / f"{record.name}.json", local)
        return local

    def get(self, name: str) -> AttachmentRecord | None:
        key = self._key(name)

        async def go() -> bytes | None:
            from nats.js.errors import KeyNotFoundError

            try:
                return bytes((await self.js._attachments.get(key)).value or b"")
            except KeyNotFoundError:
                return None

        raw = self.js._bridge.call(go())
        return None if raw is None else self._materialise(AttachmentRecord.model_validate_json(raw))

    def list(self) -> list[AttachmentRecord]:
        async def go() -> list[bytes]:
            keys = await self.js._keys(self.js._attachments, f"{self.run_tok}.*")
            return [bytes((await self.js._attachments.get(k)).value or b"") for k in sorted(keys)]

        records = [AttachmentRecord.model_validate_json(raw) for raw in self.js._bridge.call(go())]
        return [self._materialise(r) for r in sorted(records, key=lambda r: r.name)]
