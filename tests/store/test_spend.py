"""The store's daily spend counter, on disk and on JetStream: concurrent charging processes lose
no charge, a SIGKILLed charger leaves a readable counter holding every acknowledged charge (and at
most the one in flight), a retried charge counts once, and each UTC day has its own counter."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from iterion.store.spend import SpendCounter, SpendDay, new_charge_id, resets_at, utc_day
from tests.natsserver import NatsServer
from tests.store.spend_child import open_counter

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["fs", "jetstream"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "fs":
        yield {"root": str(tmp_path / "store")}
    else:
        server: NatsServer = request.getfixturevalue("nats_server")
        yield {"url": server.url, "prefix": "sp" + uuid.uuid4().hex[:10]}


def child(spec: dict[str, str], n: int, cost: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.spend_child", json.dumps(spec), str(n), str(cost)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of its output (read through the same buffered pipe ``child`` read ``ready`` from:
    ``communicate`` would read the descriptor and miss what the buffer already holds)."""
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait(120)
    return out, err


def test_concurrent_processes_and_threads_lose_no_charge(spec: dict[str, str]) -> None:
    counter = open_counter(spec)
    procs = [child(spec, 30, 0.25) for _ in range(3)]

    def charge_here() -> None:
        for _ in range(10):
            counter.add(0.5, charge_id=new_charge_id("parent"))

    threads = [threading.Thread(target=charge_here) for _ in range(2)]
    for t in threads:
        t.start()
    for p in procs:
        out, err = finish(p)
        assert p.returncode == 0, err
        assert len(out.split()) == 30
    for t in threads:
        t.join(120)
    today = counter.today()
    assert today.charges == 3 * 30 + 2 * 10
    assert today.spent_usd == pytest.approx(3 * 30 * 0.25 + 2 * 10 * 0.5)


def test_a_sigkilled_charger_leaves_every_acknowledged_charge(spec: dict[str, str]) -> None:
    counter = open_counter(spec)
    proc = child(spec, 100_000, 0.25)
    assert proc.stdout is not None
    acked = [proc.stdout.readline() for _ in range(25)]
    proc.send_signal(signal.SIGKILL)
    rest, _ = finish(proc)
    acked += rest.split()
    today = counter.today()  # readable: the document is never torn
    # every acknowledged charge is there; at most the one in flight was written unacknowledged
    assert today.charges in (len(acked), len(acked) + 1)
    assert today.spent_usd == pytest.approx(today.charges * 0.25)
    # the killed holder's lock is gone: the next charge goes through at once
    after = counter.add(1.0, charge_id=new_charge_id("parent"))
    assert after.charges == today.charges + 1


def test_a_retried_charge_counts_once_and_days_are_apart(spec: dict[str, str]) -> None:
    counter: SpendCounter = open_counter(spec)
    now = datetime(2026, 3, 9, 23, 59, 30, tzinfo=timezone.utc)
    first = counter.add(2.0, charge_id="run-a:1", now=now)
    again = counter.add(2.0, charge_id="run-a:1", now=now)  # the retry of an unanswered write
    assert first.spent_usd == again.spent_usd == 2.0 and again.charges == 1
    tomorrow = counter.add(1.0, charge_id="run-a:2", now=now + timedelta(minutes=1))
    assert tomorrow.day == "2026-03-10" and tomorrow.spent_usd == 1.0
    assert counter.today(now).spent_usd == 2.0
    assert resets_at(utc_day(now)) == datetime(2026, 3, 10, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        counter.add(-1.0, charge_id="run-a:3")


def test_the_document_is_versioned_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    from iterion.store.errors import CorruptDocumentError
    from iterion.store.spend import FileSpendCounter

    counter = FileSpendCounter(tmp_path)
    day = counter.add(1.0, charge_id="x:1")
    raw: dict[str, Any] = json.loads((tmp_path / "spend" / f"{day.day}.json").read_text())
    assert raw["format_version"] == SpendDay.FORMAT_VERSION and raw["spent_usd"] == 1.0
    raw["format_version"] = SpendDay.FORMAT_VERSION + 1
    (tmp_path / "spend" / f"{day.day}.json").write_text(json.dumps(raw))
    with pytest.raises(CorruptDocumentError) as refused:
        counter.today()
    assert "spend" in refused.value.message and "newer iterion" in refused.value.message
    with pytest.raises(CorruptDocumentError):  # never overwritten by a charge either
        counter.add(1.0, charge_id="x:2")
    assert json.loads((tmp_path / "spend" / f"{day.day}.json").read_text())["format_version"] == raw["format_version"]
