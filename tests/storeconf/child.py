"""A second process on a store of the conformance suite: ``python -m tests.storeconf.child SPEC CMD ...``.

Commands (each waits for the file ``go`` names before it starts, so two children start together):
- ``cas RUN_ID TAG GO``: load the run, then save it with version 1; prints ``won`` or ``stale``.
- ``append RUN_ID TAG N GO``: append N ``warning`` events {w: TAG, i: 0..N-1}; prints ``done``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def open_spec(spec: dict[str, Any]) -> Any:
    """The store a spec names (see tests/storeconf/conftest.py: Backends)."""
    kind, root = spec["kind"], Path(spec["root"])
    docs: Any = None
    if kind.endswith("jetstream"):
        from iterion.store.jetstream import JetStreamStore

        docs = JetStreamStore(spec["url"], prefix=spec["prefix"], timeout_s=5)
        if kind == "jetstream":
            return docs
    from iterion.store.store import Store

    if kind == "fs":
        return Store(root).docs
    return Store(root, docs=docs)


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + 60
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)


def main(argv: list[str]) -> None:
    from iterion.store.errors import StaleWriteError

    store = open_spec(json.loads(argv[0]))
    cmd, run_id, tag = argv[1], argv[2], argv[3]
    if cmd == "cas":
        doc = store.load_run(run_id)
        doc.error = tag
        print("ready", flush=True)
        _wait_for(argv[4])
        try:
            store.save_run(doc, 1)
            print("won", flush=True)
        except StaleWriteError:
            print("stale", flush=True)
    elif cmd == "append":
        n = int(argv[4])
        print("ready", flush=True)
        _wait_for(argv[5])
        for i in range(n):
            store.append_event(run_id, "warning", payload={"w": tag, "i": i})
        print("done", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
