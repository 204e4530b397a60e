"""The run queue on NATS JetStream: a work-queue stream, a dead-letter stream, a lease bucket and
one control subject per run.

Layout (names prefixed like the JetStream run store, so both share one server):
- stream ``<PREFIX>_QUEUE`` (work-queue retention, file storage) on ``<prefix>.queue.runs``: one
  message per delivery (``iterion.queue.delivery``), published with ``Nats-Msg-Id`` = the
  delivery's ``msg_id`` so a retried request is stored once (the stream's duplicate window);
- durable pull consumer ``runners`` on it: explicit acks, ``ack_wait`` (a runner keeps a claimed
  delivery alive with in-progress acks every ``ack_wait / 3``; a runner that died stops doing so
  and the delivery is offered again after ``ack_wait``) and ``max_deliver`` (the last permitted
  delivery parks instead of NAKing: ``iterion.queue.policy``);
- stream ``<PREFIX>_DLQ`` on ``<prefix>.dlq.runs``: the parked deliveries (limits retention);
- KV ``<prefix>_requests``: a launch's ``request_id`` -> the run it created (for the duplicate
  window), so a retried launch request answers the same run instead of queueing a second one;
- KV ``<prefix>_leases``: the per-run lease (``iterion.queue.lease``), entries expire ``lease_ttl``
  seconds after their last write (the bucket's max age);
- core subject ``<prefix>.control.<run token>``: cancel/pause requests for the runner that owns
  the run (not stored: a run no runner owns is cancelled in the store directly).

The first process to open the queue creates these with ITS settings; later processes use them as
they are (a durable consumer's ack wait and max deliveries are the server's, not each runner's).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iterion.queue.delivery import Delivery, UndecodableDelivery, decode
from iterion.store.jetstream.bridge import Bridge
from iterion.store.jetstream.store import run_token

log = logging.getLogger("iterion.queue")

DEFAULT_ACK_WAIT_S = 60.0
DEFAULT_MAX_DELIVER = 8
DEFAULT_LEASE_TTL_S = 30.0
DUPLICATE_WINDOW_S = 600.0
CONSUMER = "runners"
LIST_MAX = 200


@dataclass(frozen=True)
class QueueSettings:
    prefix: str = "iterion"
    ack_wait_s: float = DEFAULT_ACK_WAIT_S
    max_deliver: int = DEFAULT_MAX_DELIVER
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    file_storage: bool = True


@dataclass
class Claimed:
    """One fetched message: its delivery (or why it cannot be decoded) and its delivery count."""

    msg: Any
    stream_seq: int
    attempt: int                      # 1 = first offer
    delivery: Delivery | None
    undecodable: str | None = None


class WorkQueue:
    def __init__(self, url: str, settings: QueueSettings | None = None, *, timeout_s: float = 10.0,
                 bridge: Bridge | None = None) -> None:
        self.settings = settings or QueueSettings()
        p = self.settings.prefix
        self.url = url
        self.stream = f"{p.upper()}_QUEUE"
        self.dlq_stream = f"{p.upper()}_DLQ"
        # the server's max-deliveries advisories, kept until a runner handles them: an advisory that
        # fires while no runner listens would otherwise be lost and its run left `running` forever
        self.exhausted_stream = f"{p.upper()}_EXHAUSTED"
        self.exhausted_subject = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.stream}.{CONSUMER}"
        self.subject = f"{p}.queue.runs"
        self.dlq_subject = f"{p}.dlq.runs"
        self.lease_bucket = f"{p}_leases"
        self.request_bucket = f"{p}_requests"
        self._own_bridge = bridge is None
        self.bridge = bridge or Bridge(url, timeout_s=timeout_s)
        self.leases: Any = None
        self.requests: Any = None
        self.max_deliver = self.settings.max_deliver
        self.ack_wait_s = self.settings.ack_wait_s
        self.lease_ttl_s = self.settings.lease_ttl_s
        try:
            self.bridge.call(self._setup())
        except BaseException:
            self.close()
            raise

    async def _setup(self) -> None:
        from nats.js.api import (
            AckPolicy,
            ConsumerConfig,
            KeyValueConfig,
            RetentionPolicy,
            StorageType,
            StreamConfig,
        )
        from nats.js.errors import BadRequestError

        s = self.settings
        storage = StorageType.FILE if s.file_storage else StorageType.MEMORY
        js = self.bridge.js
        for cfg in (StreamConfig(name=self.stream, subjects=[self.subject], retention=RetentionPolicy.WORK_QUEUE,
                                 storage=storage, duplicate_window=DUPLICATE_WINDOW_S),
                    StreamConfig(name=self.dlq_stream, subjects=[self.dlq_subject], storage=storage),
                    StreamConfig(name=self.exhausted_stream, subjects=[self.exhausted_subject],
                                 retention=RetentionPolicy.WORK_QUEUE, storage=storage)):
            try:
                await js.add_stream(cfg)
            except BadRequestError:  # exists with other settings: use it as it is
                await js.stream_info(cfg.name)
        try:
            self.leases = await js.create_key_value(KeyValueConfig(bucket=self.lease_bucket, history=1,
                                                                   ttl=s.lease_ttl_s, storage=storage))
        except BadRequestError:
            self.leases = await js.key_value(self.lease_bucket)
        from nats.js.errors import NotFoundError

        try:  # an existing consumer keeps its settings (a create would overwrite them with ours)
            await js.consumer_info(self.stream, CONSUMER)
        except NotFoundError:
            try:
                await js.add_consumer(self.stream, ConsumerConfig(
                    durable_name=CONSUMER, ack_policy=AckPolicy.EXPLICIT, ack_wait=s.ack_wait_s,
                    max_deliver=s.max_deliver, filter_subject=self.subject, max_ack_pending=-1))
            except BadRequestError:  # another process created it first
                pass
        try:
            self.requests = await js.create_key_value(KeyValueConfig(bucket=self.request_bucket, history=1,
                                                                     ttl=DUPLICATE_WINDOW_S, storage=storage))
        except BadRequestError:
            self.requests = await js.key_value(self.request_bucket)
        kv_status = await self.leases.status()
        self.lease_ttl_s = float(kv_status.ttl or s.lease_ttl_s)
        info = await js.consumer_info(self.stream, CONSUMER)
        self.max_deliver = int(info.config.max_deliver or s.max_deliver)
        self.ack_wait_s = float(info.config.ack_wait or s.ack_wait_s)

    def close(self) -> None:
        if self._own_bridge:
            self.bridge.close()

    # -- publishing ---------------------------------------------------------------------------------
    def publish(self, delivery: Delivery) -> dict[str, Any]:
        """Store ``delivery`` once (deduplicated by its msg id); ``{seq, duplicate}``."""
        async def go() -> Any:
            return await self.bridge.js.publish(self.subject, delivery.encode(), stream=self.stream,
                                                headers={"Nats-Msg-Id": delivery.msg_id})

        ack = self.bridge.call(go())
        return {"seq": int(ack.seq), "duplicate": bool(ack.duplicate), "msg_id": delivery.msg_id}

    def claim_request(self, request_id: str, run_id: str) -> str | None:
        """Record that ``request_id`` launches ``run_id``; the run id an earlier identical request
        launched (within the duplicate window) if there was one. Atomic: a KV create."""
        import hashlib

        key = hashlib.blake2b(request_id.encode(), digest_size=16).hexdigest()

        async def go() -> str | None:
            from nats.js.errors import KeyNotFoundError

            from iterion.store.jetstream.kvcreate import kv_create

            while await kv_create(self.requests, key, run_id.encode()) is None:
                try:
                    entry = await self.requests.get(key)
                except KeyNotFoundError:
                    continue  # expired since: this request is the first again
                return (entry.value or b"").decode() or None
            return None

        return self.bridge.call(go())

    # -- claiming -----------------------------------------------------------------------------------
    def subscription(self) -> Any:
        """A pull subscription on the durable consumer (one per claiming thread)."""
        async def go() -> Any:
            return await self.bridge.js.pull_subscribe_bind(durable=CONSUMER, stream=self.stream)

        return self.bridge.call(go())

    def fetch(self, sub: Any, *, timeout_s: float = 1.0) -> Claimed | None:
        async def go() -> Any:
            from nats.errors import TimeoutError as NatsTimeout

            try:
                msgs = await sub.fetch(1, timeout=timeout_s)
            except NatsTimeout:
                return None
            return msgs[0] if msgs else None

        msg = self.bridge.call(go(), timeout_s=timeout_s + 5)
        if msg is None:
            return None
        meta = msg.metadata
        try:
            delivery: Delivery | None = decode(msg.data)
            why = None
        except UndecodableDelivery as exc:
            delivery, why = None, str(exc)
        return Claimed(msg, int(meta.sequence.stream), int(meta.num_delivered), delivery, why)

    def ack(self, c: Claimed) -> None:
        self.bridge.call(c.msg.ack_sync())

    def nak(self, c: Claimed, delay_s: float) -> None:
        self.bridge.call(c.msg.nak(delay=delay_s if delay_s > 0 else None))

    def term(self, c: Claimed) -> None:
        self.bridge.call(c.msg.term())

    def in_progress(self, c: Claimed) -> None:
        self.bridge.call(c.msg.in_progress())

    def park(self, c: Claimed, reason: str) -> None:
        """Copy the delivery to the dead-letter stream (with why), then ack it off the queue."""
        async def go() -> None:
            await self.bridge.js.publish(self.dlq_subject, c.msg.data, stream=self.dlq_stream,
                                         headers={"Iterion-Reason": reason[:500],
                                                  "Iterion-Deliveries": str(c.attempt)})

        self.bridge.call(go())
        self.ack(c)

    # -- deliveries that ran out of deliveries -----------------------------------------------------
    def listen_exhausted(self, on_seq: Callable[[int], None]) -> Any:
        """Consume the server's max-deliveries advisories of the consumer: a delivery whose last
        permitted offer was never acknowledged (its runner died on it). The advisories are kept in
        their own work-queue stream and shared by the runners as one deliver group, so one that fired
        while no runner was up is handled by the next runner to start. ``on_seq(stream_seq)`` is
        called on the bridge's loop: hand the work to a thread (handling it twice is harmless: the
        queue message's deletion decides who parks it)."""
        async def handler(msg: Any) -> None:
            try:
                seq = int(json.loads(msg.data).get("stream_seq") or 0)
            except (ValueError, AttributeError):
                return
            if seq:
                on_seq(seq)

        group = f"{CONSUMER}_exhausted"

        async def go() -> Any:
            return await self.bridge.js.subscribe(self.exhausted_subject, queue=group, durable=group,
                                                  stream=self.exhausted_stream, cb=handler)

        return self.bridge.call(go())

    def peek(self, seq: int) -> Delivery | None:
        """The delivery stored at ``seq`` (None: gone, or undecodable)."""
        async def go() -> Any:
            from nats.js.errors import NotFoundError

            try:
                return (await self.bridge.js.get_msg(self.stream, seq)).data
            except NotFoundError:
                return None

        data = self.bridge.call(go())
        try:
            return decode(data) if data is not None else None
        except UndecodableDelivery:
            return None

    def take_exhausted(self, seq: int, reason: str) -> Delivery | None:
        """Move the message at ``seq`` to the dead-letter stream and delete it from the queue; its
        delivery, or None when it is gone already (another runner took it) or undecodable."""
        async def go() -> Any:
            from nats.js.errors import NotFoundError

            try:
                m = await self.bridge.js.get_msg(self.stream, seq)
            except NotFoundError:
                return None
            await self.bridge.js.publish(self.dlq_subject, m.data or b"", stream=self.dlq_stream,
                                         headers={"Iterion-Reason": reason[:500],
                                                  "Iterion-Deliveries": str(self.max_deliver)})
            try:
                await self.bridge.js.delete_msg(self.stream, seq)
            except NotFoundError:
                pass
            return m.data

        data = self.bridge.call(go())
        if data is None:
            return None
        try:
            return decode(data)
        except UndecodableDelivery:
            return None

    # -- control ------------------------------------------------------------------------------------
    def control_subject(self, run_id: str) -> str:
        return f"{self.settings.prefix}.control.{run_token(run_id)}"

    def send_control(self, run_id: str, action: str, reason: str, *, timeout_s: float = 5.0) -> bool:
        """Ask the runner owning ``run_id`` to cancel/pause it; True when a runner answered."""
        async def go() -> bool:
            from nats.errors import NoRespondersError
            from nats.errors import TimeoutError as NatsTimeout

            try:
                await self.bridge.nc.request(self.control_subject(run_id),
                                             json.dumps({"action": action, "reason": reason}).encode(),
                                             timeout=timeout_s)
            except (NoRespondersError, NatsTimeout):
                return False
            return True

        return self.bridge.call(go(), timeout_s=timeout_s + 5)

    def listen_control(self, run_id: str, on_request: Callable[[str, str], None]) -> Any:
        """Subscribe to ``run_id``'s control subject; ``on_request(action, reason)`` is called on
        the bridge's loop (keep it short). Returns the subscription (``stop_listening`` it)."""
        async def handler(msg: Any) -> None:
            try:
                req = json.loads(msg.data)
                on_request(str(req.get("action")), str(req.get("reason") or "requested over the queue"))
                ok = True
            except Exception as exc:  # noqa: BLE001 - a bad request is answered, never fatal
                log.warning("control request for %s refused: %s", run_id, exc)
                ok = False
            if msg.reply:
                await msg.respond(json.dumps({"ok": ok}).encode())

        async def go() -> Any:
            return await self.bridge.nc.subscribe(self.control_subject(run_id), cb=handler)

        return self.bridge.call(go())

    def stop_listening(self, sub: Any) -> None:
        import contextlib

        with contextlib.suppress(Exception):  # a dead connection: the subscription is gone anyway
            self.bridge.call(sub.unsubscribe())

    # -- what is queued -----------------------------------------------------------------------------
    def _messages(self, stream: str) -> list[tuple[int, bytes, dict[str, str]]]:
        async def go() -> list[tuple[int, bytes, dict[str, str]]]:
            from nats.js.errors import NotFoundError

            info = await self.bridge.js.stream_info(stream)
            first, last = int(info.state.first_seq), int(info.state.last_seq)
            out: list[tuple[int, bytes, dict[str, str]]] = []
            seq = first
            while seq <= last and len(out) < LIST_MAX and info.state.messages:
                try:
                    m = await self.bridge.js.get_msg(stream, seq)
                except NotFoundError:  # acked (work queue) or deleted: a gap
                    seq += 1
                    continue
                out.append((int(m.seq or seq), bytes(m.data or b""), dict(m.headers or {})))
                seq += 1
            return out

        return self.bridge.call(go())

    def status(self) -> dict[str, Any]:
        """Pending (waiting for a runner), in flight (claimed) and dead-lettered deliveries."""
        async def info() -> Any:
            return await self.bridge.js.consumer_info(self.stream, CONSUMER)

        ci = self.bridge.call(info())
        queued = []
        for seq, data, _headers in self._messages(self.stream):
            row = _row(seq, data)
            row["lease"] = self.lease_holder(row["run_id"]) if row.get("run_id") else None
            row["state"] = "in_flight" if row["lease"] else "pending"  # a runner holds the run
            queued.append(row)
        dead = []
        for seq, data, headers in self._messages(self.dlq_stream):
            row = _row(seq, data)
            row.update({"state": "dead_lettered", "reason": headers.get("Iterion-Reason"),
                        "deliveries": headers.get("Iterion-Deliveries")})
            dead.append(row)
        return {"stream": self.stream, "pending": int(ci.num_pending or 0),
                "in_flight": int(ci.num_ack_pending or 0), "redelivered": int(ci.num_redelivered or 0),
                "dead_lettered": len(dead), "max_deliver": self.max_deliver, "ack_wait_s": self.ack_wait_s,
                "deliveries": queued, "dead_letters": dead}

    def lease_holder(self, run_id: str) -> dict[str, Any] | None:
        from iterion.queue.lease import holder

        return holder(self, run_id)


def _row(seq: int, data: bytes) -> dict[str, Any]:
    try:
        d = decode(data)
    except UndecodableDelivery as exc:
        return {"seq": seq, "run_id": None, "kind": None, "error": str(exc)}
    return {"seq": seq, "run_id": d.run_id, "kind": d.kind.value, "msg_id": d.msg_id,
            "requested_at": d.requested_at.isoformat(), "repo_url": d.repo_url, "ref": d.ref, "file": d.file}
