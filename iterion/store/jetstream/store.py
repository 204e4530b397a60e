"""The JetStream run store: run documents and checkpoints in key-value buckets, events in a stream.

Layout on the NATS server (names prefixed so several iterion stores can share one server):
- KV ``<prefix>_runs``: key = run id, value = the run document's JSON. ``save_run`` is the
  compare-and-swap: it reads the entry, refuses unless the document's version is the expected one,
  then writes with the KV revision it read as the expected last revision. A writer that slipped in
  between makes the server refuse the write (wrong last sequence): StaleWriteError, as on disk. So
  the logical version check and the server-side revision check together give exactly one winner.
- KV ``<prefix>_checkpoints``: key = run id, the checkpoint JSON (only the run's owner writes it).
- Object store ``<prefix>_objects``: a document or checkpoint over ``INLINE_LIMIT`` bytes (NATS
  refuses messages over the server's max_payload, 1 MiB by default) is written there FIRST, under
  the blake3 of its bytes, and the KV entry then holds ``{"$object": name, "size": n}``. The KV
  write stays the commit point: a crash between the two leaves an unreferenced object, never a
  reference to a missing one.
- Stream ``<PREFIX>_EVENTS`` on subjects ``<prefix>.events.<run>``: one message per event. An
  append publishes with ``Nats-Expected-Last-Subject-Sequence`` = the stream sequence of the run's
  last event it read, so two appenders (two processes, two machines) never both write seq n: the
  loser re-reads and retries. Per-run order is the stream order.

Durability: the server acknowledges a publish only once it is stored (file storage by default),
so a returned call survives a server restart; a call that times out may or may not have landed,
and the next read tells (CAS writes are idempotent to retry only through update_run's re-read).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Self

from iterion.store.checkpoint import Checkpoint
from iterion.store.errors import RunExistsError, RunNotFoundError, StaleWriteError
from iterion.store.events import Event
from iterion.store.ids import validate_run_id
from iterion.store.jetstream.bridge import Bridge
from iterion.store.run_doc import RunDoc
from iterion.store.timeutil import utcnow

_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_PLAIN_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def run_token(run_id: str) -> str:
    """The run id as one KV key and one subject token. Generated ids (hex) are used as they are;
    any other valid id (dots, non-ASCII) becomes ``=`` + the hex of its UTF-8 bytes, which no
    plain id can collide with (plain ids never contain ``=``)."""
    validate_run_id(run_id)
    return run_id if _PLAIN_ID_RE.match(run_id) else "=" + run_id.encode("utf-8").hex()


def run_id_of(token: str) -> str:
    return bytes.fromhex(token[1:]).decode("utf-8") if token.startswith("=") else token
_WRONG_LAST_SEQUENCE = (10071, 10164)
APPEND_ATTEMPTS = 50
INLINE_LIMIT = 512 * 1024
_OBJECT_KEY = "$object"
READ_BATCH = 256


class JetStreamStore:
    """A run-document store on NATS JetStream (see the module docstring for the layout)."""

    def __init__(self, url: str, *, prefix: str = "iterion", timeout_s: float = 10.0,
                 file_storage: bool = True) -> None:
        if not _PREFIX_RE.match(prefix):
            raise ValueError(f"store prefix {prefix!r}: use 1-32 letters, digits, '-' or '_'")
        self.url = url
        self.prefix = prefix
        self.events_stream = f"{prefix.upper()}_EVENTS"
        self._bridge = Bridge(url, timeout_s=timeout_s)
        self._runs: Any = None
        self._ckpts: Any = None
        self._objects: Any = None
        self._bridge.call(self._setup(file_storage))

    # -- set-up ------------------------------------------------------------------------------------
    async def _setup(self, file_storage: bool) -> None:
        from nats.js.api import KeyValueConfig, StorageType, StreamConfig

        storage = StorageType.FILE if file_storage else StorageType.MEMORY
        js = self._bridge.js
        self._runs = await js.create_key_value(KeyValueConfig(bucket=f"{self.prefix}_runs", history=1,
                                                              storage=storage))
        self._ckpts = await js.create_key_value(KeyValueConfig(bucket=f"{self.prefix}_checkpoints", history=1,
                                                               storage=storage, max_value_size=-1))
        self._objects = await js.create_object_store(f"{self.prefix}_objects", storage=storage)
        # add_stream is idempotent for an identical config (a second process opening the store)
        await js.add_stream(StreamConfig(name=self.events_stream, subjects=[f"{self.prefix}.events.*"],
                                         storage=storage))

    def close(self) -> None:
        self._bridge.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- values too large for one message -------------------------------------------------------------
    async def _encode(self, data: bytes) -> bytes:
        """``data`` itself, or (over INLINE_LIMIT) a reference to it stored in the object store."""
        if len(data) <= INLINE_LIMIT:
            return data
        import json

        from blake3 import blake3

        name = f"v/{blake3(data).hexdigest()}"
        await self._objects.put(name, data)
        return json.dumps({_OBJECT_KEY: name, "size": len(data)}).encode()

    async def _decode(self, value: bytes) -> bytes:
        if not value.startswith(b'{"' + _OBJECT_KEY.encode()):
            return value
        import json

        ref = json.loads(value)
        return bytes((await self._objects.get(ref[_OBJECT_KEY])).data or b"")

    def _subject(self, run_id: str) -> str:
        return f"{self.prefix}.events.{run_token(run_id)}"

    # -- run documents ------------------------------------------------------------------------------
    def create_run(self, doc: RunDoc) -> RunDoc:
        key = run_token(doc.id)
        doc.version = 1
        doc.created_at = doc.updated_at = utcnow()
        data = doc.model_dump_json().encode()

        async def go() -> None:
            from nats.js.errors import KeyWrongLastSequenceError

            try:
                await self._runs.create(key, await self._encode(data))
            except KeyWrongLastSequenceError:
                raise RunExistsError(f"run {doc.id} already exists") from None

        self._bridge.call(go())
        return doc

    async def _get_run(self, run_id: str) -> tuple[RunDoc, int]:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await self._runs.get(run_token(run_id))
        except KeyNotFoundError:  # KeyDeletedError derives from it
            raise RunNotFoundError(f"run {run_id} not found in the run store at {self.url}",
                                   hint="list runs with `iterion inspect`") from None
        return RunDoc.model_validate_json(await self._decode(entry.value)), entry.revision

    def load_run(self, run_id: str) -> RunDoc:
        return self._bridge.call(self._get_run(run_id))[0]

    def exists(self, run_id: str) -> bool:
        try:
            self.load_run(run_id)
        except RunNotFoundError:
            return False
        return True

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc:
        async def go() -> RunDoc:
            from nats.js.errors import KeyWrongLastSequenceError

            current, revision = await self._get_run(doc.id)
            if current.version != expected_version:
                raise StaleWriteError(doc.id, expected_version, current.version)
            new = doc.model_copy(update={"version": expected_version + 1, "updated_at": utcnow()})
            try:
                await self._runs.update(run_token(doc.id), await self._encode(new.model_dump_json().encode()),
                                        last=revision)
            except KeyWrongLastSequenceError:
                latest, _ = await self._get_run(doc.id)
                raise StaleWriteError(doc.id, expected_version, latest.version) from None
            return new

        new = self._bridge.call(go())
        doc.version, doc.updated_at = new.version, new.updated_at
        return doc

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        for attempt in range(attempts):
            doc = self.load_run(run_id)
            expected = doc.version
            mutate(doc)
            try:
                return self.save_run(doc, expected)
            except StaleWriteError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def list_runs(self) -> list[RunDoc]:
        async def go() -> list[RunDoc]:
            from nats.js.errors import NoKeysError

            try:
                keys = await self._runs.keys()
            except NoKeysError:
                return []
            out = []
            for run_id in sorted(run_id_of(k) for k in keys):  # ids are time-ordered: oldest first
                try:
                    out.append((await self._get_run(run_id))[0])
                except RunNotFoundError:  # deleted between the listing and the read
                    continue
            return out

        return self._bridge.call(go())

    # -- checkpoints ---------------------------------------------------------------------------------
    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None:
        checkpoint.run_id = run_id
        checkpoint.written_at = utcnow()

        async def go() -> None:
            await self._ckpts.put(run_token(run_id), await self._encode(checkpoint.model_dump_json().encode()))

        self._bridge.call(go())

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        async def go() -> Checkpoint | None:
            from nats.js.errors import KeyNotFoundError

            try:
                entry = await self._ckpts.get(run_token(run_id))
            except KeyNotFoundError:
                return None
            return Checkpoint.model_validate_json(await self._decode(entry.value))

        return self._bridge.call(go())

    # -- events ----------------------------------------------------------------------------------------
    async def _last_event(self, subject: str) -> tuple[int, int]:
        """(our seq, stream sequence) of the run's last event; (0, 0) when it has none."""
        from nats.js.errors import NotFoundError

        try:
            msg = await self._bridge.js.get_last_msg(self.events_stream, subject)
        except NotFoundError:
            return 0, 0
        return Event.model_validate_json(msg.data).seq, int(msg.seq)

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        subject = self._subject(run_id)

        async def go() -> Event:
            from nats.js.errors import APIError

            for _ in range(APPEND_ATTEMPTS):
                seq, stream_seq = await self._last_event(subject)
                event = Event(seq=seq + 1, time=utcnow(), type=type, node=node, iteration=iteration,
                              payload=payload or {})
                try:
                    await self._bridge.js.publish(
                        subject, event.model_dump_json().encode(), stream=self.events_stream,
                        headers={"Nats-Expected-Last-Subject-Sequence": str(stream_seq)})
                except APIError as exc:
                    if exc.err_code in _WRONG_LAST_SEQUENCE:  # another appender won seq n: re-read
                        continue
                    raise
                return event
            raise StaleWriteError(run_id, seq, seq + 1)

        return self._bridge.call(go())

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        subject = self._subject(run_id)

        async def go() -> list[Event]:
            from nats.errors import TimeoutError as NatsTimeout
            from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

            _, last_stream_seq = await self._last_event(subject)
            if last_stream_seq == 0:
                return []
            sub = await self._bridge.js.pull_subscribe(
                subject, stream=self.events_stream,
                config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL,
                                      inactive_threshold=30.0))
            out: list[Event] = []
            try:
                while True:
                    try:
                        msgs = await sub.fetch(READ_BATCH, timeout=2.0)
                    except NatsTimeout:
                        break
                    done = False
                    for m in msgs:
                        ev = Event.model_validate_json(m.data)
                        if ev.seq > after_seq:
                            out.append(ev)
                        if m.metadata.sequence.stream >= last_stream_seq:
                            done = True
                    if done:
                        break
            finally:
                await sub.unsubscribe()
            return out

        return self._bridge.call(go())
