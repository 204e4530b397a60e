"""The run-store contract (iterion/store/docstore.py), the same tests for every backend."""

from __future__ import annotations

import threading
import time
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
    # polling as --follow does: each read continues after the previous one
    for i in range(5, 8):
        store.append_event(r1, "node_started", node=f"n{i}", payload={"i": i})
    assert [e.seq for e in store.read_events(r1, after_seq=5)] == [6, 7, 8]
    assert store.read_events(r1, after_seq=8) == []
    store.append_event(r1, "node_finished")
    assert [e.seq for e in store.read_events(r1, after_seq=8)] == [9]
    assert [e.seq for e in store.read_events(r1, after_seq=6)] == [7, 8, 9]
    assert [e.payload.get("i") for e in store.read_events(r1)][:8] == list(range(8))


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



def test_listings_leave_out_discarded_runs(facade: Backends) -> None:
    # a discarded run's keys end in delete/purge markers: a listing reads past them, never stops at them
    store = facade.open()
    kept, gone = store.create_run(_doc()), store.create_run(RunDoc(id=new_id(), name="gone-name", workflow_name="w"))
    third = store.create_run(RunDoc(id=new_id(), name="third-name", workflow_name="w"))
    store.discard_new_run(gone.id)
    assert [r.id for r in store.list_runs()] == [kept.id, third.id]
    assert {"third-name", kept.name} <= store.run_names()
    store.discard_new_run(kept.id)
    store.discard_new_run(third.id)
    assert store.list_runs() == []


def test_jetstream_data_survives_a_server_restart(own_nats_server: NatsServer, tmp_path: Path) -> None:
    nats_server = own_nats_server
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


def test_jetstream_name_claims_of_crashed_launches_are_reclaimed_after_a_grace(nats_server: NatsServer,
                                                                            tmp_path: Path) -> None:
    import json

    backend = Backends("jetstream", tmp_path, nats_server)
    try:
        js = backend.open()
        ghost = new_id()  # a launch that claimed names, then died before writing its document
        js._bridge.call(js._names.create("old-name", json.dumps({"run": ghost, "at": time.time() - 3600}).encode()))
        js._bridge.call(js._names.create("young-name", json.dumps({"run": ghost, "at": time.time()}).encode()))
        assert js.create_run(RunDoc(id=new_id(), name="old-name", workflow_name="w")).name == "old-name"
        assert js.create_run(RunDoc(id=new_id(), name="young-name", workflow_name="w")).name == "young-name-2"
    finally:
        backend.close()


def test_jetstream_unreachable_server_is_one_clear_error() -> None:
    from iterion.store.jetstream import JetStreamStore, StoreUnavailableError
    from tests.natsserver import free_port

    with pytest.raises(StoreUnavailableError) as info:
        JetStreamStore(f"nats://127.0.0.1:{free_port()}", timeout_s=2)
    assert "nats-server" in (info.value.hint or "") and info.value.exit_code == 2


# -- names, staleness, listing: every backend --------------------------------------------------------
def test_a_taken_name_gets_a_suffix_and_is_listed(backend: Backends) -> None:
    s1, s2 = backend.open(), backend.open()
    a = s1.create_run(_doc())
    b = s2.create_run(_doc())
    assert a.name == "demo-tidy-otter" and b.name == "demo-tidy-otter-2"
    assert {"demo-tidy-otter", "demo-tidy-otter-2"} <= s1.run_names()
    assert s2.load_run(b.id).name == "demo-tidy-otter-2"


def test_last_flush_time_is_the_last_event(backend: Backends) -> None:
    import time

    store = backend.open()
    doc = store.create_run(_doc())
    assert store.last_flush_time(doc.id) is None
    before = time.time()
    store.append_event(doc.id, "run_started")
    flushed = store.last_flush_time(doc.id)
    assert flushed is not None and before - 2 <= flushed <= time.time() + 2
    assert store.has_checkpoint(doc.id) is False
    store.save_checkpoint(doc.id, Checkpoint(restart_node="a"))
    assert store.has_checkpoint(doc.id) is True


def test_an_unreadable_document_is_listed_as_corrupt(backend: Backends) -> None:
    from iterion.store.docstore import CorruptRun
    from iterion.store.errors import CorruptDocumentError

    store = backend.open()
    good, bad = store.create_run(_doc()).id, store.create_run(_doc()).id
    if backend.jetstream:
        from iterion.store.jetstream.store import run_token

        js = store if not backend.facade else store.docs
        js._bridge.call(js._runs.put(run_token(bad), b'{"id": 42'))
    else:
        (backend.tmp_path / "store" / "runs" / bad / "run.json").write_text('{"id": 42')
    entries = store.list_entries()
    assert [e.id for e in entries] == [good, bad]
    assert isinstance(entries[1], CorruptRun) and entries[1].status == "corrupt"
    assert [r.id for r in store.list_runs()] == [good]
    with pytest.raises(CorruptDocumentError):
        store.load_run(bad)


# -- two processes ---------------------------------------------------------------------------------
def _go_together(backend: Backends, tmp_path: Path, *argsets: list[str]) -> list[str]:
    go = tmp_path / f"go-{len(argsets)}-{argsets[0][0]}"
    procs = [backend.child(*args, str(go)) for args in argsets]
    for p in procs:  # each has opened the store and read what it needs
        assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
    go.touch()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        out.append(stdout.strip())
    return out


def test_two_processes_racing_on_one_version_have_exactly_one_winner(backend: Backends, tmp_path: Path) -> None:
    store = backend.open()
    doc = store.create_run(_doc())
    results = _go_together(backend, tmp_path, ["cas", doc.id, "one"], ["cas", doc.id, "two"])
    assert sorted(results) == ["stale", "won"]
    winner = ["one", "two"][results.index("won")]
    final = store.load_run(doc.id)
    assert final.error == winner and final.version == 2


def test_two_processes_appending_keep_one_gapless_order(backend: Backends, tmp_path: Path) -> None:
    store = backend.open()
    run_id = store.create_run(_doc()).id
    store.append_event(run_id, "run_started")
    assert _go_together(backend, tmp_path, ["append", run_id, "a", "25"], ["append", run_id, "b", "25"]) \
        == ["done", "done"]
    ev = store.read_events(run_id)
    assert [e.seq for e in ev] == list(range(1, 52))
    for tag in ("a", "b"):
        assert [e.payload["i"] for e in ev if e.payload.get("w") == tag] == list(range(25))
    # this process's own appender continues after both (its cached tail is stale: re-read, no clash)
    assert store.append_event(run_id, "run_finished").seq == 52


# -- what only the Store facade offers ----------------------------------------------------------------
def test_artifacts_through_the_facade(facade: Backends) -> None:
    from iterion.store.artifacts import ArtifactNotFoundError

    s1, s2 = facade.open(), facade.open()
    run_id = s1.create_run(_doc()).id
    assert s1.artifacts(run_id).versions("report") == [] and s1.artifacts(run_id).names() == []
    v1 = s1.artifacts(run_id).publish("report", {"text": "one"}, node="write", iteration=0)
    v2 = s2.artifacts(run_id).publish("report", {"text": "two" * 400_000}, node="write", iteration=1)
    s1.artifacts(run_id).publish("notes.md", "n")
    assert (v1.version, v2.version) == (1, 2)
    other = s2.artifacts(run_id)  # on JetStream: another machine's root, the same artifacts
    assert other.versions("report") == [1, 2] and other.names() == ["notes.md", "report"]
    assert other.read("report", 1).value == {"text": "one"} and other.read("report", 1).node == "write"
    latest = other.latest("report", exclude=[2])
    assert latest is not None and latest.version == 1
    assert other.latest("report") is not None and other.latest("report").value["text"].startswith("twotwo")  # type: ignore[union-attr]
    with pytest.raises(ArtifactNotFoundError):
        other.read("report", 3)
    if facade.jetstream:  # nothing of them under either root
        assert not (s1.run_dir(run_id) / "artifacts").exists() and not (s2.run_dir(run_id) / "artifacts").exists()


def test_attachments_through_the_facade(facade: Backends, tmp_path: Path) -> None:
    s1, s2 = facade.open(), facade.open()
    run_id = s1.create_run(_doc()).id
    src = tmp_path / "input.txt"
    src.write_bytes(b"attached \x00 bytes\n")
    rec = s1.attachments(run_id).stage("brief", src)
    assert Path(rec.path).read_bytes() == src.read_bytes() and rec.size == src.stat().st_size
    seen = s2.attachments(run_id).list()  # on JetStream: fetched into the other machine's root
    assert [r.name for r in seen] == ["brief"] and seen[0].sha256 == rec.sha256
    assert Path(seen[0].path).read_bytes() == src.read_bytes()
    assert Path(seen[0].path).is_relative_to(s2.run_dir(run_id))
    got = s2.attachments(run_id).get("brief")
    assert got is not None and got.mime == "text/plain"
    assert s2.attachments(run_id).get("other") is None


def test_staleness_reads_the_last_event_on_every_backend(facade: Backends) -> None:
    import time

    from iterion.store.errors import StatusRefusedError

    store, elsewhere = facade.open(), facade.open()
    run_id = store.create_run(_doc()).id
    store.append_event(run_id, "node_started", node="a")
    with pytest.raises(StatusRefusedError, match="flushed an event"):
        elsewhere.check_stale(run_id)
    elsewhere.check_stale(run_id, now=time.time() + 3600)  # an hour later: ownerless, takeover allowed


def test_a_restart_of_nats_server_mid_sequence_loses_nothing(own_nats_server: NatsServer, tmp_path: Path) -> None:
    nats_server = own_nats_server
    from iterion.store.jetstream import StoreUnavailableError

    backend = Backends("store-jetstream", tmp_path, nats_server)
    try:
        store = backend.open()
        run_id = store.create_run(_doc()).id
        appended: list[int] = []
        stop = threading.Event()
        failures: list[str] = []
        crashed: list[BaseException] = []

        def appender() -> None:
            i = 0
            try:
                while not stop.is_set() or i < 40:
                    try:
                        store.append_event(run_id, "warning", payload={"i": i})
                    except StoreUnavailableError as exc:  # a deadline passed mid-restart: the caller retries
                        failures.append(str(exc))
                        continue
                    appended.append(i)
                    i += 1
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                crashed.append(exc)

        t = threading.Thread(target=appender)
        t.start()
        while len(appended) < 20 and t.is_alive():
            time.sleep(0.001)
        nats_server.restart()
        store.update_run(run_id, lambda d: setattr(d, "error", "after restart"))
        stop.set()
        t.join(120)
        assert not t.is_alive() and not crashed, crashed
        fresh = backend.open()
        events = fresh.read_events(run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))  # gapless, no duplicate seq
        seen = [e.payload["i"] for e in events]
        assert sorted(set(seen)) == appended == list(range(len(appended)))  # every acknowledged append is there
        assert fresh.load_run(run_id).error == "after restart" and fresh.load_run(run_id).version == 2
    finally:
        backend.close()
