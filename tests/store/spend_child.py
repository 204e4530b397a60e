"""A second process charging the store's daily spend counter (tests/store/test_spend.py).

    python -m tests.store.spend_child '{"root": DIR}' N COST
    python -m tests.store.spend_child '{"url": URL, "prefix": P}' N COST

prints ``ready`` once the counter is open, then the day's total after each acknowledged charge,
one line each, flushed (a test that SIGKILLs it knows which charges were acknowledged)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from iterion.store.spend import FileSpendCounter, SpendCounter, new_charge_id


def open_counter(spec: dict[str, str]) -> SpendCounter:
    if "url" in spec:
        from iterion.store.jetstream import JetStreamStore

        return (JetStreamStore(spec["url"], prefix=spec["prefix"], timeout_s=10)).spend_counter()
    return FileSpendCounter(Path(spec["root"]))


def main() -> None:
    spec, n, cost = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    counter = open_counter(spec)
    counter.today()
    print("ready", flush=True)
    for _ in range(n):
        day = counter.add(cost, charge_id=new_charge_id("child"))
        print(f"{day.spent_usd}", flush=True)


if __name__ == "__main__":
    main()
