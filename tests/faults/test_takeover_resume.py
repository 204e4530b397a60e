"""A crashed run is taken over at once when its owner is provably dead on this host; otherwise the
60-second guard holds, and every refusal names the faster path (which is then taken, and works).

Real subprocesses throughout: `iterion run` is SIGKILLed (its process group and its tool's), and
`iterion resume` follows immediately. No test waits for, or asserts, a duration: a resume that
still applied the 60 s guard would be refused, not slow.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from iterion.store import RunStatus, Store
from iterion.store.liveness import Liveness, owner_liveness, process_start

from ..conftest import write_bot
from .takeover_helpers import (
    cli,
    cli_json,
    crash,
    events,
    move_owner_to_another_host,
    only_run,
    start_run,
    wait_for,
)


def _slow_bot(tmp_path: Path) -> Path:
    """first -> slow (sleeps until go.flag, all markers outside the workspace) -> after."""
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    return write_bot(tmp_path / "src", f"""
        tool first:
          command: "echo first >> first.log"

        tool slow:
          command: "echo $$ > {ctl}/tool.pid; echo up > {ctl}/slow.started; while [ ! -f {ctl}/go.flag ]; do sleep 0.05; done; echo slow >> slow.log"

        tool after:
          command: "echo after >> after.log"

        workflow slowpoke:
          entry: first
          first -> slow
          slow -> after
          after -> done
    """)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _crash_mid_slow(tmp_path: Path, ws: Path, store: Path) -> str:
    proc = start_run(_slow_bot(tmp_path), cwd=ws, store=store)
    wait_for(tmp_path / "ctl" / "slow.started", proc)
    crash(proc, tmp_path / "ctl" / "tool.pid")
    rid = only_run(store)
    assert Store(store).load_run(rid).status is RunStatus.RUNNING  # the crash recorded nothing
    return rid


def test_sigkilled_run_is_taken_over_at_once_by_a_plain_resume(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    rid = _crash_mid_slow(tmp_path, ws, store)
    (tmp_path / "ctl" / "go.flag").write_text("")
    done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)  # no flag, no lowered window
    assert done["_rc"] == 0 and done["status"] == "finished", done
    (taken,) = events(store, rid, "run_taken_over")
    assert taken.payload["how"] == "resume" and taken.payload["label"] == "takeover:slow:0"
    assert "no longer exists" in taken.payload["proof"] or "has exited" in taken.payload["proof"]
    resumed = events(store, rid, "run_resumed")[-1].payload
    assert resumed["from_status"] == "running" and resumed["taken_over"] == "resume"
    # nothing ran twice, nothing was skipped
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)


def test_a_live_owner_is_refused_and_the_named_faster_path_works(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    proc = start_run(_slow_bot(tmp_path), cwd=ws, store=store)
    try:
        wait_for(tmp_path / "ctl" / "slow.started", proc)
        rid = only_run(store)
        for flags in ((), ("--force-stale",)):
            p = cli("resume", "--run-id", rid, *flags, cwd=ws, store=store)
            assert p.returncode == 2, p.stderr
            line = p.stderr.splitlines()[0]
            assert line.startswith(f"error: run {rid} is being executed by another process on host "
                                   f"{socket.gethostname()} (pid {proc.pid}, last event "), p.stderr
            assert f"`iterion cancel --run-id {rid}`" in p.stderr  # the faster path than waiting
        assert Store(store).load_run(rid).status is RunStatus.RUNNING  # the refusals changed nothing
        cancelled = cli_json("cancel", "--run-id", rid, cwd=ws, store=store)  # ... taken
        assert cancelled["_rc"] == 0 and cancelled["status"] == "cancelled", cancelled
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    (tmp_path / "ctl" / "go.flag").write_text("")
    done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)
    assert done["_rc"] == 0 and done["status"] == "finished", done
    assert (_lines(ws / "first.log"), _lines(ws / "after.log")) == (1, 1)


def test_an_owner_recorded_on_another_host_keeps_the_60s_guard(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    rid = _crash_mid_slow(tmp_path, ws, store)
    move_owner_to_another_host(store, rid)

    plain = cli("resume", "--run-id", rid, cwd=ws, store=store)
    assert plain.returncode == 2, plain.stderr
    assert f"run {rid} is running on host another-host" in plain.stderr
    assert "not on this host" in plain.stderr and "--force-stale" in plain.stderr
    assert f"`iterion cancel --run-id {rid}`" in plain.stderr

    forced = cli("resume", "--run-id", rid, "--force-stale", cwd=ws, store=store)
    assert forced.returncode == 2, forced.stderr
    assert "--force-stale takes over only after 60 s without an event" in forced.stderr
    assert "hint: wait " in forced.stderr and f"`iterion cancel --run-id {rid}`" in forced.stderr
    swept = cli("inspect", cwd=ws, store=store)  # the start-up sweep leaves it alone too
    assert swept.returncode == 0 and "promoted" not in swept.stderr
    doc = Store(store).load_run(rid)
    assert doc.status is RunStatus.RUNNING and doc.owner is not None and doc.owner.host == "another-host"
    assert events(store, rid, "run_taken_over") == []

    # past the guard (the test-only window override), --force-stale takes it over
    (tmp_path / "ctl" / "go.flag").write_text("")
    done = cli_json("resume", "--run-id", rid, "--force-stale", cwd=ws, store=store,
                    extra_env={"ITERION_STALE_AFTER_S": "0"})
    assert done["_rc"] == 0 and done["status"] == "finished", done
    (taken,) = events(store, rid, "run_taken_over")
    assert taken.payload["how"] == "force_stale" and "another-host" in taken.payload["proof"]
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)


def test_the_other_host_refusals_faster_path_cancel_works(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    rid = _crash_mid_slow(tmp_path, ws, store)
    move_owner_to_another_host(store, rid)
    cancelled = cli_json("cancel", "--run-id", rid, cwd=ws, store=store)
    assert cancelled["_rc"] == 0 and cancelled["status"] == "cancelled", cancelled
    (taken,) = events(store, rid, "run_taken_over")
    assert taken.payload["how"] == "cancel" and taken.payload["label"] == "takeover:slow:0"
    (tmp_path / "ctl" / "go.flag").write_text("")
    done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)
    assert done["_rc"] == 0 and done["status"] == "finished", done


# -- the proof itself, on real processes ---------------------------------------------------------

def test_owner_liveness_on_real_processes() -> None:
    host = socket.gethostname()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        start = None
        deadline = time.monotonic() + 120
        while start is None and time.monotonic() < deadline:
            start = process_start(child.pid)
        assert start is not None
        assert owner_liveness(child.pid, host, start).liveness is Liveness.ALIVE
        # the same pid with another start time: the pid was reused, the owner is gone
        boot_ns, _, ticks = start.rpartition("/")
        assert owner_liveness(child.pid, host, f"{boot_ns}/{int(ticks) + 1}").liveness is Liveness.DEAD
        # no start time recorded and the pid exists: cannot be told from a reuse
        assert owner_liveness(child.pid, host, None).liveness is Liveness.UNKNOWN
        # another host: never proven from here
        assert owner_liveness(child.pid, "another-host", start).liveness is Liveness.UNKNOWN
        # another boot of this host: unknown too (a host name can be shared by two machines)
        assert owner_liveness(child.pid, host, f"not-this-boot/{start.split('/', 1)[1]}").liveness \
            is Liveness.UNKNOWN
        child.kill()
        deadline = time.monotonic() + 120
        while (Path("/proc") / str(child.pid) / "stat").read_text().rsplit(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)  # killed, not reaped: a zombie holds no file, it is dead
        assert owner_liveness(child.pid, host, start).liveness is Liveness.DEAD
        child.wait()
        assert owner_liveness(child.pid, host, start).liveness is Liveness.DEAD  # reaped: no such pid
        assert owner_liveness(child.pid, host, None).liveness is Liveness.DEAD
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_reused_pid_is_told_from_a_live_owner_by_its_start_time(tmp_path: Path, ws: Path) -> None:
    """The crashed run's recorded owner pid now names a live process: with that process's own start
    time the owner is alive (never taken over, not even with --force-stale past the window, nor
    promoted); with the recorded start time differing, the pid was reused and the run is taken
    over at once."""
    store = tmp_path / "store"
    rid = _crash_mid_slow(tmp_path, ws, store)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        start = process_start(other.pid)
        assert start is not None

        def own(proc_start: str) -> None:
            def edit(doc: object) -> None:
                doc.owner.pid, doc.owner.proc_start = other.pid, proc_start  # type: ignore[attr-defined]
            Store(store).update_run(rid, edit)

        own(start)
        zero = {"ITERION_STALE_AFTER_S": "0"}
        for flags in ((), ("--force-stale",)):
            p = cli("resume", "--run-id", rid, *flags, cwd=ws, store=store, extra_env=zero)
            assert p.returncode == 2 and f"(pid {other.pid} on " in p.stderr and "is alive" in p.stderr, p.stderr
            assert f"`iterion cancel --run-id {rid}`" in p.stderr
        swept = cli("reconcile", cwd=ws, store=store, extra_env=zero)
        assert swept.returncode == 0 and Store(store).load_run(rid).status is RunStatus.RUNNING
        assert events(store, rid, "run_taken_over") == []

        boot_ns, _, ticks = start.rpartition("/")
        own(f"{boot_ns}/{int(ticks) - 1}")  # the recorded owner started earlier: another process
        (tmp_path / "ctl" / "go.flag").write_text("")
        done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)
        assert done["_rc"] == 0 and done["status"] == "finished", done
        (taken,) = events(store, rid, "run_taken_over")
        assert taken.payload["how"] == "resume" and "belongs to another process" in taken.payload["proof"]
        assert other.poll() is None  # the unrelated process was left alone
    finally:
        other.kill()
        other.wait()
