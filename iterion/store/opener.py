"""Opening the run store a command names: one opener for the CLI, the server and the runner.

Where the run documents live, in this order (the first that is set wins):

1. ``--nats URL`` on the command line;
2. ``$ITERION_NATS_URL``;
3. otherwise the filesystem store (``--store-dir``, ``$ITERION_STORE_DIR``, or the default place
   ``iterion.store.layout.locate_store`` finds).

``off`` (either spelling, any case) or an empty value means the filesystem store, so
``--nats off`` overrides an exported ``ITERION_NATS_URL``. With JetStream the store directory is
still used, for what stays on this machine (the run's working directory: locks, track data,
interactions; a runner's --work-dir). ``$ITERION_NATS_PREFIX`` (default ``iterion``) names the
buckets and stream, so several teams can share one nats-server.

Heavy imports (nats) happen only when a JetStream store is opened: CLI start-up never pays.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from iterion.store.errors import StoreError
from iterion.store.store import Store

NATS_ENV = "ITERION_NATS_URL"
NATS_PREFIX_ENV = "ITERION_NATS_PREFIX"
DEFAULT_PREFIX = "iterion"
OFF = "off"
SCHEMES = ("nats", "tls", "ws", "wss")
EXAMPLE = "nats://127.0.0.1:4222"


class NatsUrlError(StoreError):
    """--nats / $ITERION_NATS_URL is not a NATS server URL."""


def _check_one(url: str, source: str) -> None:
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise NatsUrlError(f"{source} {url!r}: not a NATS URL ({exc})", hint=f"e.g. {source} {EXAMPLE}") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise NatsUrlError(f"{source} {url!r}: not a NATS URL (want {'|'.join(SCHEMES)}://HOST[:PORT])",
                           hint=f"e.g. {source} {EXAMPLE}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise NatsUrlError(f"{source} {url!r}: a NATS URL has no path, query or fragment",
                           hint=f"e.g. {source} {EXAMPLE}")
    del port


def nats_url(explicit: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The JetStream URL to use (--nats beats $ITERION_NATS_URL), or None for the filesystem store.

    Several servers of one cluster: comma-separated (``nats://a:4222,nats://b:4222``)."""
    environ = os.environ if env is None else env
    source, raw = ("--nats", explicit) if explicit is not None else (f"${NATS_ENV}", environ.get(NATS_ENV))
    if raw is None or not raw.strip() or raw.strip().lower() == OFF:
        return None
    urls = [u.strip() for u in raw.split(",")]
    for u in urls:
        if not u:
            raise NatsUrlError(f"{source} {raw!r}: an empty server in the list", hint=f"e.g. {source} {EXAMPLE}")
        _check_one(u, source)
    return ",".join(urls)


def nats_prefix(env: Mapping[str, str] | None = None) -> str:
    environ = os.environ if env is None else env
    return environ.get(NATS_PREFIX_ENV) or DEFAULT_PREFIX


def open_store(store_dir: Path | None, *, nats: str | None = None, cwd: Path | None = None,
               prefix: str | None = None, timeout_s: float | None = None) -> Store:
    """The run store a command names (see the module doc for the precedence). With JetStream the
    connection is made here: an unreachable server is one StoreUnavailableError (exit 2).
    ``prefix``: the buckets' prefix (default $ITERION_NATS_PREFIX, else ``iterion``)."""
    url = nats_url(nats)
    local = Store.open(store_dir, cwd)
    if url is None:
        return local
    from iterion.store.jetstream import JetStreamStore

    prefix = prefix or nats_prefix()
    try:
        docs = JetStreamStore(url, prefix=prefix) if timeout_s is None else \
            JetStreamStore(url, prefix=prefix, timeout_s=timeout_s)
    except ValueError as exc:  # the prefix
        raise StoreError(f"${NATS_PREFIX_ENV}={prefix!r}: {exc}", hint="unset it, or use letters, digits, - and _") \
            from None
    return Store(local.root, origin=local.origin, docs=docs)


__all__ = ["NATS_ENV", "NATS_PREFIX_ENV", "NatsUrlError", "nats_prefix", "nats_url", "open_store"]
