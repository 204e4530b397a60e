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

- KV ``<prefix>_names``: key = a friendly name, value = the id of the run that owns it. A new run
  claims its name with a create (exactly one creator wins; the loser takes ``-2``, ``-3``...);
  an entry whose run does not exist is reclaimed with a revision-checked update once it is older
  than CLAIM_GRACE_S (younger, it may be a launch between its claim and its document).
- KV ``<prefix>_summaries``: key = run id, the run's index row (iterion/store/runindex.py) tagged
  with the KV revision of the document it summarises; a listing reads only this bucket. Stream
  ``<PREFIX>_SUMMARY_PENDING``: a marker ``<prefix>.summary-pending.<run>`` is published before a
  document write and purged once its summary is written, so a writer killed between the two
  leaves a marker the next listing repairs from (see ``index_rows``).
- Artifacts: the document in the object store under the blake3 of its bytes (no two writers can
  clobber one object), then the index entry ``<run>.<name>.<version>`` in KV
  ``<prefix>_artifacts`` created with a create: that create is the commit point and allocates
  the version (a lost race retries with the next number).
- Attachments: the bytes in the object store (``att/<run>/<name>``), then the record in KV
  ``<prefix>_attachments`` (``<run>.<name>``). The staged copy tools read is a local file under
  the run's directory, fetched again (and checked against its sha256) on a machine without it.

Durability: the server acknowledges a publish only once it is stored (file storage by default),
so a returned call survives a server restart; a call that times out may or may not have landed,
and the next read tells (CAS writes are idempotent to retry only through update_run's re-read).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import re
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from gitrefs.persist.killpoint import kill_point
from iterion.store.docstore import CorruptRun
from iterion.store.errors import CorruptDocumentError, RunExistsError, RunNotFoundError, StaleWriteError
from iterion.store.fsdocs import update_with_retry
from iterion.store.jetstream.bridge import TRANSIENT, Bridge
from iterion.store.jetstream.kvcreate import kv_create
from iterion.store.jetstream.tokens import key_token, run_id_of, run_token
from iterion.store.runindex import IndexRow, corrupt_row, row_of_doc
from iterion.store.timeutil import utcnow

if TYPE_CHECKING:
    # the document models (pydantic) load on first use: listing runs needs none of them
    from iterion.store.checkpoint import Checkpoint
    from iterion.store.events import Event
    from iterion.store.jetstream.blobs import JetStreamArtifacts, JetStreamAttachments
    from iterion.store.run_doc import RunDoc
    from iterion.store.spend import SpendCounter

_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")

_WRONG_LAST_SEQUENCE = (10071, 10164)
APPEND_ATTEMPTS = 50
TRANSIENT_WAIT_S = 0.2
CLAIM_GRACE_S = 60.0  # a name claim without its run is a launch in progress for this long
INLINE_LIMIT = 512 * 1024
_OBJECT_KEY = "$object"
READ_BATCH = 256
SNAPSHOT = "index/summaries"  # the summaries bucket as of a stream sequence (index_rows)
SNAPSHOT_EVERY = 200  # summaries past the snapshot that make a listing write a new one (each read past it
# costs a listing ~0.1 ms; a rewrite at 10,000 runs ~30 ms, paid by the listing that makes it)
SNAPSHOT_CHUNK = 512 * 1024
SUMMARY_REVS_KEPT = 4096  # runs whose last summary revision a process remembers (_put_summary)


class JetStreamStore:
    """A run-document store on NATS JetStream (see the module docstring for the layout)."""

    shared = True  # several machines share it: a local lock proves nothing about the others

    def __init__(self, url: str, *, prefix: str = "iterion", timeout_s: float = 10.0,
                 file_storage: bool = True) -> None:
        if not _PREFIX_RE.match(prefix):
            raise ValueError(f"store prefix {prefix!r}: use 1-32 letters, digits, '-' or '_'")
        self.url = url
        self.prefix = prefix
        self.events_stream = f"{prefix.upper()}_EVENTS"
        self.pending_stream = f"{prefix.upper()}_SUMMARY_PENDING"
        self._bridge = Bridge(url, timeout_s=timeout_s)
        self._runs: Any = None
        self._ckpts: Any = None
        self._objects: Any = None
        self._names: Any = None
        self._artifacts: Any = None
        self._attachments: Any = None
        self._summaries: Any = None
        self._rows_cache: tuple[tuple[int, ...], list[IndexRow]] | None = None
        self._tails: dict[str, tuple[int, int]] = {}  # run -> (seq, stream seq) of its last known event
        self._read_marks: dict[str, tuple[int, int]] = {}  # run -> (seq, stream seq) of the last event read
        self._logs: dict[str, JetStreamEventLog] = {}
        self._logs_lock = threading.Lock()
        self._unmarking: set[asyncio.Future[None]] = set()  # a writer's marker purges in flight
        # run key -> (KV revision of the summary this process last wrote, the document revision it
        # summarises): the next summary of a newer document is one revision-checked update
        self._summary_revs: dict[str, tuple[int, int]] = {}
        # the commands never close their store: at exit, the purges still in flight are sent and
        # waited for, or each command's last write would leave its marker for the next listing
        # (only those: the connection is left as it always was; a weak reference: registering
        # keeps no store alive)
        ref = weakref.ref(self)

        def at_exit() -> None:
            store = ref()
            if store is not None:
                store._wait_unmarking()

        self._at_exit = at_exit  # (its own function: atexit.unregister removes every registration of one)
        atexit.register(at_exit)
        self._bridge.call(self._setup(file_storage))

    # -- set-up ------------------------------------------------------------------------------------
    async def _setup(self, file_storage: bool) -> None:
        from nats.js.api import KeyValueConfig, StorageType, StreamConfig

        storage = StorageType.FILE if file_storage else StorageType.MEMORY
        js = self._bridge.js

        def kv(bucket: str, **more: Any) -> Any:
            return js.create_key_value(KeyValueConfig(bucket=f"{self.prefix}_{bucket}", history=1, storage=storage,
                                                      **more))

        # all at once (each is one idempotent request: a second process opening the store gets the
        # existing ones): one round trip's wait instead of nine
        (self._runs, self._ckpts, self._names, self._artifacts, self._attachments, self._summaries,
         self._objects, _, _) = await asyncio.gather(
            kv("runs"), kv("checkpoints", max_value_size=-1), kv("names"), kv("artifacts"), kv("attachments"),
            kv("summaries"), js.create_object_store(f"{self.prefix}_objects", storage=storage),
            js.add_stream(StreamConfig(name=self.events_stream, subjects=[f"{self.prefix}.events.*"],
                                       storage=storage)),
            js.add_stream(StreamConfig(name=self.pending_stream, storage=storage, max_msgs_per_subject=1,
                                       subjects=[f"{self.prefix}.summary-pending.*", self._checked_subject])))

    def where(self) -> str:
        return f"the run store at {self.url} (prefix {self.prefix})"

    @property
    def bridge(self) -> Bridge:
        """The connection (sync face over nats-py): the queue and the runner share it, so one
        process holds one connection to the server."""
        return self._bridge

    def spend_counter(self) -> SpendCounter:
        from iterion.store.jetstream.spend import JetStreamSpendCounter

        return JetStreamSpendCounter(self.bridge, self.prefix)  # KV <prefix>_spend: every machine charges it

    def close(self) -> None:
        atexit.unregister(self._at_exit)
        self._wait_unmarking()
        self._bridge.close()

    def _wait_unmarking(self) -> None:
        if self._unmarking and self._bridge.alive:
            with contextlib.suppress(Exception):  # (best effort: a leftover marker costs one re-read)
                self._bridge.call(self._settle(), timeout_s=3.0)

    async def _settle(self) -> None:
        """The marker purges still in flight, waited for (on the loop: the set is the loop's)."""
        if self._unmarking:
            await asyncio.wait(set(self._unmarking), timeout=2.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- values too large for one message -------------------------------------------------------------
    async def _encode(self, data: bytes) -> bytes:
        """``data`` itself, or (over INLINE_LIMIT) a reference to it stored in the object store."""
        if len(data) <= INLINE_LIMIT:
            return data
        from blake3 import blake3

        name = f"v/{blake3(data).hexdigest()}"
        await self._objects.put(name, data)
        return json.dumps({_OBJECT_KEY: name, "size": len(data)}).encode()

    async def _decode(self, value: bytes) -> bytes:
        if not value.startswith(b'{"' + _OBJECT_KEY.encode()):
            return value
        ref = json.loads(value)
        return bytes((await self._objects.get(ref[_OBJECT_KEY])).data or b"")

    def _subject(self, run_id: str) -> str:
        return f"{self.prefix}.events.{run_token(run_id)}"

    # -- run documents ------------------------------------------------------------------------------
    def create_run(self, doc: RunDoc) -> RunDoc:
        key = run_token(doc.id)

        async def go() -> None:
            marking = asyncio.ensure_future(self._mark_pending(key))  # (its round trip overlaps the read)
            try:
                if await self._run_entry(key) is not None:
                    raise RunExistsError(f"run {doc.id} already exists")
                claimed = await self._claim_name(doc.name, doc.id) if doc.name else None
            except BaseException:
                await self._unmark_after(key, marking)
                raise
            doc.name = claimed or doc.name
            doc.version = 1
            doc.created_at = doc.updated_at = utcnow()
            marker = await marking  # stored before the document is written
            revision = await kv_create(self._runs, key, await self._encode(doc.model_dump_json().encode()))
            if revision is None:
                if claimed:
                    await self._release_name(claimed, doc.id)
                await self._unmark_pending(key, marker)
                raise RunExistsError(f"run {doc.id} already exists")
            kill_point("run-index")
            if await self._put_summary(key, row_of_doc(doc, None), revision, True):
                self._unmark_later(key, marker)

        self._bridge.call(go())
        return doc

    async def _run_entry(self, key: str) -> Any:
        from nats.js.errors import KeyNotFoundError

        try:
            return await self._runs.get(key)
        except KeyNotFoundError:
            return None

    async def _claim_name(self, name: str, run_id: str) -> str:
        """``name`` or the first free ``name-N``, recorded as ``run_id``'s (see the module doc).

        A claim is made before its run document, so a claim whose run does not exist may be a
        launch in progress: it is reclaimed only once older than CLAIM_GRACE_S (a crashed launch)."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        claim = json.dumps({"run": run_id, "at": time.time()}).encode()
        n = 1
        while True:
            cand = name if n == 1 else f"{name}-{n}"
            key = key_token(cand)
            if await kv_create(self._names, key, claim) is not None:
                return cand
            try:
                entry = await self._names.get(key)
            except KeyNotFoundError:
                continue  # released meanwhile: try the same name again
            owner, at = _claim_of(entry.value)
            if owner == run_id:
                return cand
            stale = time.time() - at > CLAIM_GRACE_S and await self._run_entry(run_token(owner)) is None
            if stale:
                try:
                    await self._names.update(key, claim, last=entry.revision)
                    return cand
                except KeyWrongLastSequenceError:
                    continue
            n += 1

    async def _release_name(self, name: str, run_id: str) -> None:
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        try:
            entry = await self._names.get(key_token(name))
            if _claim_of(entry.value)[0] == run_id:
                await self._names.delete(key_token(name), last=entry.revision)
        except (KeyNotFoundError, KeyWrongLastSequenceError):  # gone, or claimed again meanwhile
            pass

    def run_names(self) -> set[str]:
        """The friendly names in use (a new run's name is picked outside them)."""
        async def go() -> set[str]:
            return {run_id_of(k) for k in await self._keys(self._names, ">")}

        return self._bridge.call(go())

    def discard_run(self, run_id: str) -> None:
        """Remove a run whose creation failed half-way: its document, name and checkpoint."""
        async def go() -> None:
            from nats.js.errors import KeyNotFoundError

            from iterion.store.run_doc import RunDoc

            entry = await self._run_entry(run_token(run_id))
            if entry is None:
                return
            try:
                doc = RunDoc.model_validate_json(await self._decode(entry.value))
                if doc.name:
                    await self._release_name(doc.name, run_id)
            except ValueError:
                pass
            for kv in (self._runs, self._ckpts, self._summaries):
                try:
                    await kv.purge(run_token(run_id))
                except KeyNotFoundError:
                    pass
            await self._bridge.js.purge_stream(self.events_stream, subject=self._subject(run_id))
            await self._unmark_pending(run_token(run_id))
            self._tails.pop(run_id, None)
            self._read_marks.pop(run_id, None)
            self._summary_revs.pop(run_token(run_id), None)

        self._bridge.call(go())

    async def _keys(self, kv: Any, pattern: str) -> list[str]:
        """The live keys of ``kv`` matching the subject ``pattern`` (a server-side filter).

        Not nats-py's end marker alone: the watcher puts it when the consumer reports nothing
        pending and nothing received yet, which is also true while the server's first messages
        are still on their way to this client (seen under load: a listing right after a write
        found nothing). Here every message is read, deletes included, and the listing ends at
        the message the server sent with nothing pending after it; an early marker ends it only
        when the consumer confirms it never delivered anything."""
        from nats.js.kv import KV_DEL, KV_PURGE

        watcher = await kv.watch(pattern, meta_only=True)
        keys: dict[str, None] = {}
        try:
            while True:
                entry = await watcher.updates(timeout=self._bridge.timeout_s)
                if entry is None:
                    info = await watcher._sub.consumer_info()
                    if info.delivered.consumer_seq == 0 and info.num_pending == 0:
                        break  # truly empty when the watch began
                    continue  # early: the delivered messages follow, the last one says so
                if entry.operation in (KV_DEL, KV_PURGE):
                    keys.pop(entry.key, None)
                else:
                    keys[entry.key] = None
                if entry.delta == 0:
                    break  # the last message stored when the watch began
        finally:
            await watcher.stop()
        return list(keys)

    async def _get_run(self, run_id: str) -> tuple[RunDoc, int]:
        from nats.js.errors import KeyNotFoundError

        from iterion.store.run_doc import RunDoc

        try:
            entry = await self._runs.get(run_token(run_id))
        except KeyNotFoundError:  # KeyDeletedError derives from it
            raise RunNotFoundError(f"run {run_id} not found in the run store at {self.url}",
                                   hint="list runs with `iterion inspect --nats URL`") from None
        try:
            return RunDoc.model_validate_json(await self._decode(entry.value)), entry.revision
        except ValueError as exc:
            detail = _first_error(exc)
            where = f"{self.url} bucket {self.prefix}_runs key {run_token(run_id)}"
            raise CorruptDocumentError(f"run {run_id}: its document is unreadable ({detail}) in {where}",
                                       detail=detail,
                                       hint="`iterion inspect --nats URL` lists the run as corrupt") from None

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

            key = run_token(doc.id)
            marking = asyncio.ensure_future(self._mark_pending(key))  # (its round trip overlaps the read)
            try:
                current, revision = await self._get_run(doc.id)
                if current.version != expected_version:
                    raise StaleWriteError(doc.id, expected_version, current.version)
            except BaseException:
                await self._unmark_after(key, marking)
                raise
            new = doc.model_copy(update={"version": expected_version + 1, "updated_at": utcnow()})
            marker = await marking  # stored before the document is written
            try:
                written = await self._runs.update(key, await self._encode(new.model_dump_json().encode()),
                                                  last=revision)
            except KeyWrongLastSequenceError:
                # (the marker stays: the winner's write may be the one still in flight; a listing
                # re-reads the document and drops it)
                latest, _ = await self._get_run(doc.id)
                raise StaleWriteError(doc.id, expected_version, latest.version) from None
            kill_point("run-index")
            if await self._put_summary(key, row_of_doc(new, None), int(written)):
                self._unmark_later(key, marker)
            return new

        new = self._bridge.call(go())
        doc.version, doc.updated_at = new.version, new.updated_at
        return doc

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        return update_with_retry(self, run_id, mutate, attempts=attempts)

    def list_runs(self) -> list[RunDoc]:
        from iterion.store.run_doc import RunDoc

        return [r for r in self.list_entries() if isinstance(r, RunDoc)]

    def list_entries(self) -> list[RunDoc | CorruptRun]:
        """Every run, oldest first (ids are time-ordered); an unreadable document is a CorruptRun."""
        async def go() -> list[RunDoc | CorruptRun]:
            out: list[RunDoc | CorruptRun] = []
            for key in sorted(await self._keys(self._runs, ">"), key=run_id_of):
                run_id = run_id_of(key)
                try:
                    out.append((await self._get_run(run_id))[0])
                except RunNotFoundError:  # deleted between the listing and the read
                    continue
                except CorruptDocumentError as exc:
                    out.append(CorruptRun(run_id, f"{self.url}/{self.prefix}_runs/{key}", exc.detail))
            return out

        return self._bridge.call(go())

    # -- the run index: KV ``<prefix>_summaries`` ---------------------------------------------------
    @property
    def _checked_subject(self) -> str:
        return f"{self.prefix}.summary-checked"

    def _pending_subject(self, key: str) -> str:
        return f"{self.prefix}.summary-pending.{key}"

    async def _mark_pending(self, key: str) -> int:
        """Before a document write: a stored marker that its summary may fall behind (its stream
        sequence returned)."""
        ack = await self._bridge.js.publish(self._pending_subject(key), b"", stream=self.pending_stream)
        return int(ack.seq)

    async def _unmark_pending(self, key: str, marker: int | None = None) -> None:
        """After the summary write (a purge: no tombstone, so an empty stream means nothing pending).
        ``marker``: only the marker of that stream sequence (and older ones), so a purge never
        removes the marker of a later write of the run, whenever it lands."""
        try:
            await self._bridge.js.purge_stream(self.pending_stream, subject=self._pending_subject(key),
                                               seq=marker + 1 if marker else None)
        except Exception:  # noqa: BLE001 - a marker left behind costs the next listing one re-read
            pass

    def _unmark_later(self, key: str, marker: int) -> None:
        """The writer's purge of its own marker, not waited for: a document write costs its
        round trips, and this one may land late or never (a leftover marker costs one re-read);
        ``marker`` bounds it (see ``_unmark_pending``). ``close`` waits for the ones in flight."""
        task = asyncio.ensure_future(self._unmark_pending(key, marker))
        self._unmarking.add(task)
        task.add_done_callback(self._unmarking.discard)

    async def _unmark_after(self, key: str, marking: asyncio.Future[int]) -> None:
        """A write given up before its document: its marker, once stored, purged."""
        try:
            marker = await marking
        except Exception:  # noqa: BLE001 - not stored: nothing to purge
            return
        self._unmark_later(key, marker)

    async def _put_summary(self, key: str, row: IndexRow, revision: int, new: bool = False) -> bool:
        """The run's summary row, tagged with the revision of the document it summarises. Written
        right after the document (NATS has no two-key transaction; the pending marker published
        before the document covers a crash between the two), and only over an older row: two
        writers' (or a writer's and a repairing reader's) summaries may arrive in either order,
        and the newer document's row must stay. False: not written (the marker stays).

        One round trip when this process wrote the run's last summary (``_summary_revs``), or
        ``new`` (a run just created: no summary yet): the update expects that summary's revision
        (the create, none), so any other write since makes the server refuse it, and the full
        read-compare-write below decides."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        data = json.dumps(list(row._replace(mtime_ns=revision, size=0))).encode()
        try:
            known = self._summary_revs.get(key)
            if (new and known is None) or (known is not None and known[1] < revision):
                try:
                    written = await (self._summaries.create(key, data) if known is None
                                     else self._summaries.update(key, data, last=known[0]))
                    self._remember_summary(key, int(written), revision)
                    return True
                except (KeyWrongLastSequenceError, KeyNotFoundError):
                    pass  # written meanwhile (or a removed run's tombstone): read, compare, write
            for _ in range(APPEND_ATTEMPTS):
                try:
                    entry = await self._summaries.get(key)
                except KeyNotFoundError:  # (KeyDeletedError too: a purged run's marker)
                    entry = None
                if entry is None or entry.value is None:
                    created = await kv_create(self._summaries, key, data)
                    if created is not None:
                        self._remember_summary(key, created, revision)
                        return True
                    continue
                try:
                    if int(json.loads(entry.value)[11]) >= revision:
                        return True  # a newer (or this) document's row is there already
                except (ValueError, TypeError, IndexError):
                    pass  # a damaged row: replaced
                try:
                    written = await self._summaries.update(key, data, last=entry.revision)
                    self._remember_summary(key, int(written), revision)
                    return True
                except KeyWrongLastSequenceError:
                    continue
        except Exception:  # noqa: BLE001 - the document is written; the next listing repairs the row
            self._summary_revs.pop(key, None)
            return False
        return False

    def _remember_summary(self, key: str, summary_revision: int, doc_revision: int) -> None:
        if len(self._summary_revs) >= SUMMARY_REVS_KEPT:
            self._summary_revs.clear()  # (a cache: forgetting costs a read, never a wrong row)
        self._summary_revs[key] = (summary_revision, doc_revision)

    async def _entries(self, bucket: str, *, meta_only: bool, count: int,
                       start_seq: int = 0) -> dict[str, tuple[int, bytes]]:
        """key -> (revision, value) of every live key of KV ``<prefix>_<bucket>`` (``count``: its
        stream's message count): an ephemeral pull consumer on the last message per key, fetched
        in one batch of the whole bucket (a watch delivers one message per await: seconds at 10,000
        keys; batches of 2,000 cost a round trip and a server-side wait each). ``meta_only``:
        values left empty. ``start_seq``: only the keys written from that stream sequence on; a
        key deleted there maps to ``(seq, b"")``."""
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        stream = f"KV_{self.prefix}_{bucket}"
        head = f"$KV.{self.prefix}_{bucket}."
        if count == 0:
            return {}
        sub = await self._bridge.js.pull_subscribe(
            f"{head}>", stream=stream,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start_seq
                                  else DeliverPolicy.LAST_PER_SUBJECT, opt_start_seq=start_seq or None,
                                  ack_policy=AckPolicy.NONE, headers_only=meta_only, inactive_threshold=30.0))
        out: dict[str, tuple[int, bytes]] = {}
        cut = len(head)
        try:
            while True:
                try:
                    msgs = await sub.fetch(batch=min(max(count, 100), 50_000), timeout=self._bridge.timeout_s)
                except NatsTimeout:
                    break
                pending = 0
                for m in msgs:
                    key = m.subject[cut:]
                    headers = m.headers
                    if headers and headers.get("KV-Operation") in ("DEL", "PURGE"):
                        out.pop(key, None)
                        if start_seq:
                            out[key] = (m.metadata.sequence.stream, b"")  # (a tail: the key's removal)
                    else:
                        meta = m.metadata
                        out[key] = (meta.sequence.stream, m.data)
                    pending = m.metadata.num_pending if m is msgs[-1] else pending
                if not msgs or pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        return out

    async def _repair_pending(self, subjects: list[str]) -> None:
        """Every run with a pending marker (a writer killed between its document and its summary,
        or one still writing): its summary re-read from the document, then the marker purged."""
        head = f"{self.prefix}.summary-pending."
        for subject in sorted(subjects):
            key = subject[len(head):]
            await self._resummarise(key, None)
            await self._unmark_pending(key)

    async def _resummarise(self, key: str, revision: int | None) -> IndexRow | None:
        """The run's row from its document, saved as its summary (None: the run is gone)."""
        run_id = run_id_of(key)
        try:
            got, rev = await self._get_run(run_id)
            row = row_of_doc(got, None)
        except RunNotFoundError:
            return None
        except CorruptDocumentError as exc:
            entry = await self._run_entry(key)
            row, rev = corrupt_row(run_id, exc.detail, None), (entry.revision if entry is not None else revision or 0)
        await self._put_summary(key, row, rev)
        return row._replace(mtime_ns=rev, size=0)

    def index_rows(self) -> list[IndexRow]:
        """Every run's summary row, from the summaries bucket alone: three stream-info calls (at
        once) and one batched read. Repaired first: every run with a pending marker (a writer killed
        between its document and its summary). Documents with no summary at all, or newer than
        every summary (written by an iterion before the index, which writes no marker), make the
        listing compare every summary with its document's revision once (the documents' revisions
        only: headers, no values) and record that it did (``<prefix>.summary-checked``)."""
        async def go() -> list[IndexRow]:
            js = self._bridge.js

            def states() -> Any:
                return asyncio.gather(js.stream_info(f"KV_{self.prefix}_runs"),
                                      js.stream_info(f"KV_{self.prefix}_summaries"))

            # the three asked at once (one round trip's wait); a repair writes summaries: asked again
            pending, (runs_info, sums_info) = await asyncio.gather(
                js.stream_info(self.pending_stream, subjects_filter=f"{self.prefix}.summary-pending.*"), states())
            if pending.state.subjects:
                await self._repair_pending(list(pending.state.subjects))
                runs_info, sums_info = await states()
            runs, sums = runs_info.state, sums_info.state
            # unchanged streams (no write since the last listing: same last sequences) give the
            # same rows: a long-lived reader (the server) pays three stream-info calls (one round trip)
            stamp = (runs.last_seq, sums.last_seq)
            if self._rows_cache is not None and self._rows_cache[0] == stamp:
                return self._rows_cache[1]
            rows = await self._summary_rows(sums, str(sums_info.created))
            newest = max((r.mtime_ns for r in rows.values()), default=0)
            # (runs and summaries are written and purged together: one message per key in each)
            if runs.messages != sums.messages or (runs.last_seq > newest
                                                  and (await self._checked_seq() or 0) < runs.last_seq):
                rows = await self._reconcile(rows)
                await js.publish(self._checked_subject, str(runs.last_seq).encode(), stream=self.pending_stream)
            out = list(rows.values())
            self._rows_cache = (stamp, out) if runs.messages == sums.messages else None
            return out

        return self._bridge.call(go())

    async def _summary_rows(self, sums: Any, created: str) -> dict[str, IndexRow]:
        """key -> row of the summaries bucket (``sums``: its stream state): the snapshot object
        ``index/summaries`` (every row as of a stream sequence) plus the summaries written after
        it. Reading 10,000 rows as one object costs milliseconds where 10,000 messages cost most
        of a second in the client; a listing that finds more than SNAPSHOT_EVERY rows past the
        snapshot writes a new one (any listing may: each snapshot is exact as of its sequence, so
        racing writers are all right), as does one that read a snapshot of an older format. The
        format: iterion/store/jetstream/snapshot.py (one that cannot be read, or of another
        incarnation of the bucket, ``created``: its stream's creation time, is ignored)."""
        from iterion.store.jetstream import snapshot

        rows: dict[str, IndexRow] = {}
        upto = 0
        current = True
        if sums.messages > SNAPSHOT_EVERY:
            try:
                data = bytes((await self._objects.get(SNAPSHOT)).data or b"")
            except Exception:  # noqa: BLE001 - missing, or replaced while read: read every row
                data = b""
            got = snapshot.decode(data, stream=created, last_seq=sums.last_seq) if data else None
            if got is not None:
                rows, upto, current = got
        last = upto
        tail = 0
        if sums.last_seq > upto:
            entries = await self._entries("summaries", meta_only=False,
                                          count=sums.last_seq - upto if upto else sums.messages,
                                          start_seq=upto + 1 if upto else 0)
            for key, (seq, value) in entries.items():
                last, tail = max(last, seq), tail + 1
                try:
                    row = snapshot.row_of(json.loads(value)) if value else None
                except ValueError:
                    row = None
                if row is None:  # removed (a discarded run), or damaged: not listed
                    rows.pop(key, None)
                else:
                    rows[key] = row
        if (tail > SNAPSHOT_EVERY or not current) and len(rows) > SNAPSHOT_EVERY:
            from nats.js.api import ObjectMeta, ObjectMetaOptions

            # in chunks under the server's 1 MiB message limit: 10,000 rows are one ~200 KB chunk
            # (nats-py reads an object's chunks one message at a time)
            meta = ObjectMeta(name=SNAPSHOT, options=ObjectMetaOptions(max_chunk_size=SNAPSHOT_CHUNK))
            try:
                await self._objects.put(SNAPSHOT, snapshot.encode(rows, stream=created, upto=last), meta=meta)
            except Exception:  # noqa: BLE001 - a read-only user: the next listing reads the rows again
                pass
        return rows

    async def _checked_seq(self) -> int | None:
        """The runs stream sequence the last full comparison covered (None: never made)."""
        from nats.js.errors import NotFoundError

        try:
            msg = await self._bridge.js.get_last_msg(self.pending_stream, self._checked_subject)
        except NotFoundError:
            return None
        try:
            return int(msg.data or b"0")
        except ValueError:
            return 0

    async def _reconcile(self, rows: dict[str, IndexRow]) -> dict[str, IndexRow]:
        """Every summary against its document's revision; missing or behind ones re-read and saved."""
        runs = (await self._bridge.js.stream_info(f"KV_{self.prefix}_runs")).state
        docs = await self._entries("runs", meta_only=True, count=runs.messages)
        out: dict[str, IndexRow] = {}
        for key, (revision, _) in docs.items():
            row = rows.get(key)
            if row is not None and row.mtime_ns == revision:
                out[key] = row
                continue
            fresh = await self._resummarise(key, revision)
            if fresh is not None:
                out[key] = fresh
        return out

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

            from iterion.store.checkpoint import Checkpoint

            try:
                entry = await self._ckpts.get(run_token(run_id))
            except KeyNotFoundError:
                return None
            return Checkpoint.model_validate_json(await self._decode(entry.value))

        return self._bridge.call(go())

    def has_checkpoint(self, run_id: str) -> bool:
        async def go() -> bool:
            from nats.js.errors import KeyNotFoundError

            try:
                await self._ckpts.get(run_token(run_id))
            except KeyNotFoundError:
                return False
            return True

        return self._bridge.call(go())

    def checkpoint_location(self, run_id: str) -> str:
        return f"{self.url} bucket {self.prefix}_checkpoints key {run_token(run_id)}"

    # -- events ----------------------------------------------------------------------------------------
    async def _last_event(self, subject: str) -> tuple[int, int]:
        """(our seq, stream sequence) of the run's last event; (0, 0) when it has none."""
        from iterion.store.events import Event

        msg = await self._last_msg(subject)
        return (0, 0) if msg is None else (Event.model_validate_json(msg.data).seq, int(msg.seq))

    async def _last_msg(self, subject: str) -> Any:
        from nats.js.errors import NotFoundError

        try:
            return await self._bridge.js.get_last_msg(self.events_stream, subject)
        except NotFoundError:
            return None

    def events(self, run_id: str) -> JetStreamEventLog:
        """The process-wide appender of this run (same face as the file store's EventLog)."""
        with self._logs_lock:
            log = self._logs.get(run_id)
            if log is None:
                log = self._logs[run_id] = JetStreamEventLog(self, run_id)
            return log

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        subject = self._subject(run_id)

        async def go() -> Event:
            from nats.js.errors import APIError

            from iterion.store.events import Event

            transient = TRANSIENT()
            # the tail this process last wrote or read: one round trip per event while nobody else
            # appends; the server's expected-last-subject-sequence check catches anyone who did
            tail = self._tails.get(run_id)
            for _ in range(APPEND_ATTEMPTS):
                seq, stream_seq = tail if tail is not None else await self._last_event(subject)
                event = Event(seq=seq + 1, time=utcnow(), type=type, node=node, iteration=iteration,
                              payload=payload or {})
                try:
                    ack = await self._bridge.js.publish(
                        subject, event.model_dump_json().encode(), stream=self.events_stream,
                        headers={"Nats-Expected-Last-Subject-Sequence": str(stream_seq)})
                except APIError as exc:
                    if exc.err_code in _WRONG_LAST_SEQUENCE:  # another appender won seq n: re-read
                        tail = None
                        continue
                    raise
                except transient:  # a restarting server: nothing was stored; wait, re-read, retry
                    tail = None
                    await asyncio.sleep(TRANSIENT_WAIT_S)
                    continue
                self._tails[run_id] = (event.seq, int(ack.seq))
                return event
            raise StaleWriteError(run_id, seq, seq + 1)

        try:
            return self._bridge.call(go())
        except BaseException:
            self._tails.pop(run_id, None)  # a publish that timed out may have landed: re-read next time
            raise

    # -- artifacts and attachments (iterion/store/jetstream/blobs.py) -------------------------------
    def artifacts(self, run_id: str, run_dir: Path) -> JetStreamArtifacts:
        from iterion.store.jetstream.blobs import JetStreamArtifacts

        return JetStreamArtifacts(self, run_id, run_dir)

    def attachments(self, run_id: str, run_dir: Path) -> JetStreamAttachments:
        from iterion.store.jetstream.blobs import JetStreamAttachments

        return JetStreamAttachments(self, run_id, run_dir)

    def last_flush_time(self, run_id: str) -> float | None:
        """When the run's last event was written (its recorded time), or None without events:
        the staleness rule works across machines without any local file."""
        async def go() -> float | None:
            from iterion.store.events import Event

            msg = await self._last_msg(self._subject(run_id))
            return None if msg is None else Event.model_validate_json(msg.data).time.timestamp()

        return self._bridge.call(go())

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        """The run's events with seq > ``after_seq``, in order. Cheap to poll (--follow, the HTTP
        event stream): nothing new costs one request, and a read after an earlier one starts at
        the stream position where that one stopped instead of at the run's first event."""
        subject = self._subject(run_id)

        async def go() -> list[Event]:
            from nats.errors import TimeoutError as NatsTimeout
            from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

            from iterion.store.events import Event

            last_seq, last_stream_seq = await self._last_event(subject)
            if last_stream_seq == 0 or last_seq <= after_seq:
                return []
            mark = self._read_marks.get(run_id)
            # per subject, seq and stream sequence grow together: events after ``after_seq`` all
            # lie past the stream position of any event with seq <= after_seq
            if mark is not None and mark[0] <= after_seq and mark[1] < last_stream_seq:
                config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                        opt_start_seq=mark[1] + 1, inactive_threshold=30.0)
            else:
                config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL,
                                        inactive_threshold=30.0)
            sub = await self._bridge.js.pull_subscribe(subject, stream=self.events_stream, config=config)
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
                        self._read_marks[run_id] = (ev.seq, int(m.metadata.sequence.stream))
                        if m.metadata.sequence.stream >= last_stream_seq:
                            done = True
                    if done:
                        break
            finally:
                await sub.unsubscribe()
            return out

        return self._bridge.call(go())


def _claim_of(value: bytes | None) -> tuple[str, float]:
    """(run id, claim time) of a name claim; a bare id (no time) counts as old."""
    try:
        data = json.loads(value or b"")
        return str(data["run"]), float(data["at"])
    except (ValueError, KeyError, TypeError):
        return (value or b"").decode(errors="replace"), 0.0


def _first_error(exc: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "document"
        return f"unreadable RunDoc ({where}: {first.get('msg')})"
    return str(exc)


class JetStreamEventLog:
    """One run's appender on JetStream (``Store.events(run_id)``), the EventLog's face."""

    def __init__(self, store: JetStreamStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id

    def append(self, type: str, *, node: str | None = None, iteration: int | None = None,
               payload: dict[str, Any] | None = None) -> Event:
        return self.store.append_event(self.run_id, type, node=node, iteration=iteration, payload=payload)
