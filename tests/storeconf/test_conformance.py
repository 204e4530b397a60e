"""The run-store contract (iterion/store/docstore.py), the same tests for every backend."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from iterion.store.checkpoint import Checkpoint
from iterion.store.errors import RunExistsError, RunNotFoundError, StaleWriteError
from iterion.store.ids import new_id
from iterion.store.run_doc import RunDoc
from tests.natsserver import NatsServer
from tests.storeconf.conftest import Backends


def _doc(run_id: str | None = None) -> RunDoc:
    return RunDoc(id=run_id or new_id(), name="demo-tidy-otter", workflow_name="demo")


def test_create_then_load_gives_version_1(backend: Backends) -> None:
    store = backend.open()
    doc = store.create_run(_doc())
    loaded = store.load_run(doc.id)
    assert loaded.version == 1 and loaded.name == "demo-tidy-otter" and store.exists(doc.id)


def test_create_refuses_an_existing_id(backend: Backends) -> None:
    store = backend.open()
    doc = store.create_run(_doc())
    with pytest.raises(RunExistsError):
        store.create_run(_doc(doc.id))
    assert store.load_run(doc.id).version == 1


def test_unknown_run_is_not_found(backend: Backends) -> None:
    store = backend.open()
    with pytest.raises(RunNotFoundError):
        store.load_run(new_id())
    assert not store.exists(new_id())


def test_save_is_a_compare_and_swap(backend: Backends) -> None:
    store = backend.open()
    doc = store.create_run(_doc())
    a, b = store.load_run(doc.id), store.load_run(doc.id)
    a.error = "a wins"
    store.save_run(a, 1)
    assert a.version == 2
    b.error = "b is stale"
    with pytest.raises(StaleWriteError):
        store.save_run(b, 1)
    assert store.load_run(doc.id).error == "a wins"


def test_two_stores_racing_on_one_version_have_exactly_one_winner(backend: Backends) -> None:
    s1, s2 = backend.open(), backend.open()  # two clients, as two processes would be
    doc = s1.create_run(_doc())
    results: list[str] = []
    barrier = threading.Barrier(2)

    def writer(store: object, tag: str) -> None:
        d = store.load_run(doc.id)  # type: ignore[attr-defined]
        d.error = tag
        barrier.wait()
        try:
            store.save_run(d, 1)  # type: ignore[attr-defined]
            results.append(tag)
        except StaleWriteError:
            results.append("stale")

    threads = [threading.Thread(target=writer, args=(s, t)) for s, t in ((s1, "one"), (s2, "two"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results).count("stale") == 1
    winner = next(r for r in results if r != "stale")
    assert s1.load_run(doc.id).error == winner and s2.load_run(doc.id).version == 2


def test_update_run_loses_no_increment_under_contention(backend: Backends) -> None:
    stores = [backend.open() for _ in range(3)]
    doc = stores[0].create_run(_doc())

    def bump(store: object) -> None:
        for _ in range(5):
            store.update_run(doc.id, lambda d: d.vars.__setitem__("n", d.vars.get("n", 0) + 1),  # type: ignore[attr-defined]
                             attempts=100)

    threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = stores[0].load_run(doc.id)
    assert final.vars["n"] == 15 and final.version == 16


def test_list_runs_oldest_first(backend: Backends) -> None:
    store = backend.open()
    ids = [store.create_run(_doc()).id for _ in range(3)]
    assert [r.id for r in store.list_runs()] == ids


def test_checkpoint_round_trip(backend: Backends) -> None:
    store = backend.open()
    doc = store.create_run(_doc())
    assert store.load_checkpoint(doc.id) is None
    cp = Checkpoint(restart_node="gate", outputs={"draft": {"text": "héllo\x00 ' \" $(x)"}})
    store.save_checkpoint(doc.id, cp)
    loaded = store.load_checkpoint(doc.id)
    assert loaded is not None and loaded.restart_node == "gate"
    assert loaded.outputs == {"draft": {"text": "héllo\x00 ' \" $(x)"}} and loaded.run_id == doc.id


def test_large_checkpoint_round_trip(backend: Backends) -> None:
    store = backend.open()
    doc = store.create_run(_doc())
    big = "x" * (3 * 1024 * 1024)  # over the NATS default message size
    store.save_checkpoint(doc.id, Checkpoint(restart_node="n", outputs={"n": {"blob": big}}))
    loaded = store.load_checkpoint(doc.id)
    assert loaded is not None and loaded.outputs["n"]["blob"] == big
    store.save_checkpoint(doc.id, Checkpoint(restart_node="m"))  # a small one replaces a large one
    again = store.load_checkpoint(doc.id)
    assert again is not None and again.restart_node == "m" and again.outputs == {}


def test_events_are_ordered_and_numbered_per_run(backend: Backends) -> None:
    store = backend.open()
    r1, r2 = store.create_run(_doc()).id, store.create_run(_doc()).id
    for i in range(5):
        store.append_event(r1, "node_started", node=f"n{i}", iteration=0, payload={"i": i})
        store.append_event(r2, "node_finished", node=f"m{i}")
    ev = store.read_events(r1)
    assert [e.seq for e in ev] == [1, 2, 3, 4, 5] and [e.payload["i"] for e in ev] == [0, 1, 2, 3, 4]
    assert all(e.type == "node_started" for e in ev)
    assert [e.seq for e in store.read_events(r1, after_seq=3)] == [4, 5]
    assert [e.node for e in store.read_events(r2)] == [f"m{i}" for i in range(5)]
    assert store.read_events(new_id()) == []


def test_concurrent_appenders_never_share_a_seq(backend: Backends) -> None:
    stores = [backend.open() for _ in range(3)]
    run_id = stores[0].create_run(_doc()).id

    def append(store: object, tag: int) -> None:
        for i in range(10):
            store.append_event(run_id, "warning", payload={"w": tag, "i": i})  # type: ignore[attr-defined]

    threads = [threading.Thread(target=append, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ev = stores[0].read_events(run_id)
    assert [e.seq for e in ev] == list(range(1, 31))
    for tag in range(3):  # each appender's own events keep their order
        assert [e.payload["i"] for e in ev if e.payload["w"] == tag] == list(range(10))


def test_run_ids_that_are_not_plain_tokens(backend: Backends) -> None:
    store = backend.open()
    doc = store.create_run(_doc("my.run-été"))
    store.append_event(doc.id, "run_started")
    assert store.load_run("my.run-été").name == "demo-tidy-otter"
    assert [e.type for e in store.read_events("my.run-été")] == ["run_started"]
    assert "my.run-été" in [r.id for r in store.list_runs()]



def test_jetstream_data_survives_a_server_restart(nats_server: NatsServer, tmp_path: Path) -> None:
    backend = Backends("jetstream", tmp_path, nats_server)
    try:
        store = backend.open()
        doc = store.create_run(_doc())
        store.append_event(doc.id, "run_started")
        store.save_checkpoint(doc.id, Checkpoint(restart_node="a"))
        nats_server.restart()
        # the same client reconnects by itself; a fresh one sees the same data
        store.update_run(doc.id, lambda d: setattr(d, "error", "after restart"))
        store.append_event(doc.id, "run_resumed")
        fresh = backend.open()
        assert fresh.load_run(doc.id).error == "after restart"
        assert [e.seq for e in fresh.read_events(doc.id)] == [1, 2]
        cp = fresh.load_checkpoint(doc.id)
        assert cp is not None and cp.restart_node == "a"
    finally:
        backend.close()


def test_jetstream_unreachable_server_is_one_clear_error() -> None:
    from iterion.store.jetstream import JetStreamStore, StoreUnavailableError
    from tests.natsserver import free_port

    with pytest.raises(StoreUnavailableError) as info:
        JetStreamStore(f"nats://127.0.0.1:{free_port()}", timeout_s=2)
    assert "nats-server" in (info.value.hint or "") and info.value.exit_code == 2
