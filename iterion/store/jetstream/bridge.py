"""A synchronous face for nats-py: one asyncio loop on a daemon thread per connection.

The engine and the CLI are synchronous; nats-py is asyncio-only. Every call is submitted to the
bridge's loop and waited for with a deadline, so a caller never blocks forever on a server that
went away: the wait ends in StoreUnavailableError (a UserError naming the URL and what to check).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from iterion.store.errors import StoreUnavailableError

T = TypeVar("T")

__all__ = ["TRANSIENT", "Bridge", "StoreUnavailableError"]

DEFAULT_TIMEOUT_S = 10.0


def TRANSIENT() -> tuple[type[BaseException], ...]:  # noqa: N802 - a constant computed on first use (nats is heavy)
    """nats-py errors that mean "the server is not answering right now" (down, restarting,
    JetStream not ready yet): retried within the deadline, then StoreUnavailableError."""
    import nats.errors
    import nats.js.errors

    return (nats.errors.NoServersError, nats.errors.TimeoutError, nats.errors.ConnectionClosedError,
            nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError,
            nats.js.errors.ServiceUnavailableError)


class Bridge:
    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="iterion-nats", daemon=True)
        self._thread.start()
        self.nc: Any = None
        self.js: Any = None
        self.last_error: BaseException | None = None
        try:
            self.call(self._connect())
        except BaseException:
            self.close()
            raise

    async def _connect(self) -> None:
        import nats  # heavy: only when a JetStream store is opened
        import nats.errors

        async def quiet(exc: Exception) -> None:
            # nats-py logs every failed (re)connect with a traceback; the caller's deadline turns
            # an outage into one line instead, naming the last reason seen here
            self.last_error = exc

        # the first connect tries each server a few times and gives up (an unreachable URL is one
        # clear error at once); once connected, reconnect forever in the background (a restarted
        # server is picked up again), each call keeping its own deadline
        try:
            self.nc = await nats.connect(self.url.split(","), connect_timeout=min(self.timeout_s, 5.0),
                                         max_reconnect_attempts=2, reconnect_time_wait=0.2, allow_reconnect=True,
                                         error_cb=quiet)
        except (OSError, nats.errors.NoServersError, TimeoutError) as exc:
            why = self.last_error or exc
            reason = getattr(why, "strerror", None) or str(why) or type(why).__name__
            raise StoreUnavailableError(f"cannot reach the run store at {self.url}: {reason}",
                                        hint="start nats-server with JetStream (-js), or check --nats / "
                                             "$ITERION_NATS_URL") from None
        self.nc.options["max_reconnect_attempts"] = -1
        self.js = self.nc.jetstream(timeout=self.timeout_s)

    def call(self, coro: Coroutine[Any, Any, T], *, timeout_s: float | None = None) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        wait = self.timeout_s if timeout_s is None else timeout_s
        try:
            return fut.result(wait + 1.0)
        except (FutureTimeout, TimeoutError):
            fut.cancel()
            raise StoreUnavailableError(
                f"the run store at {self.url} did not answer within {wait:.0f}s",
                hint="check that nats-server is running with JetStream (-js) and reachable") from None
        except OSError as exc:  # refused connection and the like, from the connect
            raise StoreUnavailableError(f"cannot reach the run store at {self.url}: {exc.strerror or exc}",
                                        hint="start nats-server with JetStream (-js), or check --nats") from None
        except Exception as exc:
            if isinstance(exc, TRANSIENT()):
                raise StoreUnavailableError(f"the run store at {self.url} is unavailable ({type(exc).__name__})",
                                            hint="check that nats-server is running with JetStream (-js)") from None
            raise

    @property
    def alive(self) -> bool:
        """Not closed yet."""
        return self._thread.is_alive()

    def close(self) -> None:
        if not self._thread.is_alive():
            return  # closed already (a second close must not leave a coroutine never awaited)
        if self.nc is not None:
            with contextlib.suppress(Exception):  # closing a dead connection must not mask the caller's error
                asyncio.run_coroutine_threadsafe(self.nc.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
