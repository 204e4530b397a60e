"""A run's processes die with it (issue 27, point 1).

A tool deletes a person's file, then waits; iterion (the process alone, not its group) is
SIGKILLed while it waits. The tool is gone within a second (by pid: the launcher of
iterion/engine/tether.py ends its group), it never writes again, the takeover resume runs the
node only once the orphan is gone, and a rewind of the node brings the person's file back. The
same for a fake agent CLI (claude, codex) on `iterion cancel` and on SIGTERM (SIGTERM first, the
grace, then SIGKILL), and for an MCP server hanging at its start when the process that started
it is SIGKILLed. And the second barrier: a group recorded in the run document and still alive
when a takeover comes is ended before the takeover's boundary is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store
from iterion.store.liveness import process_start, this_host
from iterion.store.run_doc import ChildGroup

from ..conftest import cli_env, start_cli, wait_for_file, write_bot
from ..faults.takeover_helpers import TIMEOUT, _overlay, cli, cli_json, events, only_run, start_run

PERSON = "person.txt"
PERSON_BYTES = b"the person's own notes\n"


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return True


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _tool_bot(tmp_path: Path) -> Path:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    # `work` deletes the person's file, records its pid (and whether an earlier execution of it
    # is still alive, not a zombie: concurrency), waits for go.flag ("sleeps"), then writes
    return write_bot(tmp_path / "src", f"""
        schema ok:
          approved: bool

        tool work:
          command: "for p in $(cat {ctl}/pids 2>/dev/null); do s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); [ x$s != x ] && [ x$s != xZ ] && echo $p >> {ctl}/concurrent; done; echo $$ >> {ctl}/pids; rm -f {PERSON}; echo $$ > {ctl}/tool.pid; sleep 30 & echo $! > {ctl}/child.pid; echo up > {ctl}/work.started; while [ ! -f {ctl}/go.flag ]; do sleep 0.05; done; echo late > late.txt"

        human approve:
          output: ok

        workflow w:
          entry: work
          work -> approve
          approve -> done
    """)


def test_a_sigkilled_runs_tool_dies_and_the_takeover_and_rewind_are_clean(tmp_path: Path, ws: Path) -> None:
    store, ctl = tmp_path / "store", tmp_path / "ctl"
    (ws / PERSON).write_bytes(PERSON_BYTES)
    proc = start_run(_tool_bot(tmp_path), cwd=ws, store=store)
    wait_for_file(ctl / "work.started", proc, limit=TIMEOUT)
    assert not (ws / PERSON).exists()
    tool, child = int((ctl / "tool.pid").read_text()), int((ctl / "child.pid").read_text())
    rid = only_run(store)
    recorded = Store(store).load_run(rid).children
    assert len(recorded) == 1 and recorded[0].what == "tool work"  # the live group, in run.json

    os.kill(proc.pid, signal.SIGKILL)  # iterion alone: the tool runs in its own session
    proc.communicate(timeout=TIMEOUT)
    assert _gone_within(tool, 1.0), "the tool outlived the iterion process that ran it"
    assert _gone_within(child, 1.0), "the tool's background child outlived the run"
    (ctl / "go.flag").write_text("")
    assert not (ws / "late.txt").exists()  # the orphan never wrote after the crash

    done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)
    assert done["status"] == "paused_waiting_human", done
    assert not (ctl / "concurrent").exists(), "the takeover ran the node while the orphan lived"
    assert len((ctl / "pids").read_text().split()) == 2  # the dead execution and the resumed one
    assert (ws / "late.txt").read_text() == "late\n"  # written by the resumed execution
    assert Store(store).load_run(rid).children == []  # nothing of the run is left running

    rewound = cli_json("rewind", "--run-id", rid, "--node", "work", cwd=ws, store=store)
    assert rewound["_rc"] == 0, rewound
    assert (ws / PERSON).read_bytes() == PERSON_BYTES  # the node's deletion undone
    assert not (ws / "late.txt").exists()


@pytest.mark.parametrize("how", ["resume", "reconcile", "cancel"])
def test_a_takeover_ends_a_recorded_group_still_alive_before_its_boundary(tmp_path: Path, ws: Path, how: str) -> None:
    """The second barrier: the launcher could not act (here: a group the run recorded that is
    not under it), so the takeover ends the group, verified by its leader's start time."""
    store, ctl = tmp_path / "store", tmp_path / "ctl"
    proc = start_run(_tool_bot(tmp_path), cwd=ws, store=store)
    wait_for_file(ctl / "work.started", proc, limit=TIMEOUT)
    rid = only_run(store)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    marker = ws / "stray.txt"
    stray = subprocess.Popen(["sh", "-c", f"sleep 30; echo stray > {marker}"], start_new_session=True)
    reused = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        def record(doc: object) -> None:
            assert hasattr(doc, "children")
            doc.children = [ChildGroup(pgid=stray.pid, proc_start=process_start(stray.pid), host=this_host(),
                                       what="tool work"),
                            # a pid whose recorded start is not its own: reused, never touched
                            ChildGroup(pgid=reused.pid, proc_start=_shifted(process_start(reused.pid)),
                                       host=this_host(), what="tool old")]
        Store(store).update_run(rid, record)
        (ctl / "go.flag").write_text("")
        if how == "resume":
            done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)
            assert done["status"] == "paused_waiting_human", done
        else:  # the orphan sweep, and `iterion cancel` of a run no process executes
            out = cli(*(["reconcile"] if how == "reconcile" else ["cancel", "--run-id", rid]), cwd=ws, store=store)
            assert out.returncode == 0, out.stdout + out.stderr
            want = RunStatus.FAILED_RESUMABLE if how == "reconcile" else RunStatus.CANCELLED
            assert Store(store).load_run(rid).status is want
        assert stray.wait(timeout=5) == -signal.SIGKILL
        assert reused.poll() is None  # the verification spared the process that merely has the pid
        (taken,) = events(store, rid, "run_taken_over")
        actions = {e["pgid"]: e["action"] for e in taken.payload["ended_processes"]}
        assert actions == {stray.pid: "killed", reused.pid: "reused"}
        assert Store(store).load_run(rid).children == []
        assert not marker.exists()
    finally:
        for p in (stray, reused):
            p.kill()
            p.wait()


def _shifted(proc_start: str | None) -> str:
    assert proc_start is not None
    head, _, ticks = proc_start.rpartition("/")
    return f"{head}/{int(ticks) - 7}"


# a fake agent CLI: deletes the person's file, starts a child, records SIGTERM and IGNORES it
# (so iterion must escalate to SIGKILL after the grace), then waits for go.flag and writes
FAKE_CLI = f"""#!{sys.executable}
import os, signal, subprocess, sys, time
ctl = os.environ["FAKE_CTL"]
def term(signum, frame):
    with open(os.path.join(ctl, "term"), "a") as f:
        f.write("TERM\\n")
signal.signal(signal.SIGTERM, term)
os.remove("{PERSON}")
child = subprocess.Popen(["sleep", "30"])
with open(os.path.join(ctl, "cli.pid"), "w") as f:
    f.write(f"{{os.getpid()}} {{child.pid}}")
with open(os.path.join(ctl, "cli.started"), "w") as f:
    f.write("up")
while not os.path.exists(os.path.join(ctl, "go.flag")):
    time.sleep(0.05)
with open("late.txt", "w") as f:
    f.write("late")
"""


def _agent_bot(tmp_path: Path, backend: str) -> Path:
    return write_bot(tmp_path / "src", f"""
        agent edit:
          backend: {backend}
          user: "Edit the files."

        workflow w:
          entry: edit
          edit -> done
    """)


@pytest.mark.parametrize("backend", ["claude_code", "codex"])
@pytest.mark.parametrize("how", ["cancel", "sigterm"])
def test_an_agent_cli_is_ended_on_cancel_and_sigterm(tmp_path: Path, ws: Path, backend: str, how: str) -> None:
    store, ctl = tmp_path / "store", tmp_path / "ctl"
    ctl.mkdir()
    exe = tmp_path / "bin" / ("claude" if backend == "claude_code" else "codex")
    exe.parent.mkdir()
    exe.write_text(FAKE_CLI)
    exe.chmod(0o755)
    (ws / PERSON).write_bytes(PERSON_BYTES)
    var = "ITERION_CLAUDE_BIN" if backend == "claude_code" else "ITERION_CODEX_BIN"
    extra = {var: str(exe), "FAKE_CTL": str(ctl), "ITERION_AGENT_CLI_GRACE_S": "0.5",
             "ANTHROPIC_API_KEY": None, "OPENAI_API_KEY": None}
    proc = start_cli("run", str(_agent_bot(tmp_path, backend)), "--json", cwd=ws, store=store,
                     env=_overlay(extra), start_new_session=True)
    wait_for_file(ctl / "cli.started", proc, limit=TIMEOUT)
    cli_pid, child = (int(x) for x in (ctl / "cli.pid").read_text().split())
    rid = only_run(store)
    assert [c.what for c in Store(store).load_run(rid).children] == [f"{backend} edit"]
    if how == "cancel":
        out = cli("cancel", "--run-id", rid, cwd=ws, store=store)
        assert out.returncode == 0, out.stdout + out.stderr
    else:
        os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=TIMEOUT)
    assert _gone(cli_pid) and _gone(child), "the agent CLI outlived the run's stop"
    assert (ctl / "term").read_text() == "TERM\n"  # asked first, then killed after the grace
    (ctl / "go.flag").write_text("")
    doc = Store(store).load_run(rid)
    assert doc.status is RunStatus.CANCELLED and doc.children == []
    assert not (ws / "late.txt").exists()
    # the stop was recorded after the CLI ended: its fail: boundary holds the deletion, so a
    # rewind of the node brings the file back
    rewound = cli_json("rewind", "--run-id", rid, "--node", "edit", cwd=ws, store=store)
    assert rewound["_rc"] == 0, rewound
    assert (ws / PERSON).read_bytes() == PERSON_BYTES


HANGING_MCP = """
import os, sys, time
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
time.sleep(600)  # never answers `initialize`
"""

STARTER = """
import sys
from pathlib import Path
from iterion.backends.claw.host import AgentHost
from iterion.backends.claw.mcp import McpPool

script, pidfile, ws = sys.argv[1:4]
host = AgentHost(workspace=Path(ws), emit=lambda t, p: None, charge=lambda *a: None, check=lambda: None,
                 conversations_dir=Path(ws) / "conv",
                 mcp_declarations={"hang": {"command": sys.executable, "args": [script, pidfile]}},
                 mcp_servers=("hang",))
McpPool(host).start(("hang",))
"""


def test_an_mcp_server_hanging_at_start_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    server, starter, pidfile = tmp_path / "hang.py", tmp_path / "starter.py", tmp_path / "mcp.pid"
    server.write_text(HANGING_MCP)
    starter.write_text(STARTER)
    proc = subprocess.Popen([sys.executable, str(starter), str(server), str(pidfile), str(tmp_path)],
                            env=cli_env({"ITERION_MCP_START_TIMEOUT": "600"}), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_file(pidfile, proc, limit=TIMEOUT)
    while not pidfile.read_text():
        time.sleep(0.02)
    pid = int(pidfile.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    assert _gone_within(pid, 1.0), "the MCP server outlived the process that started it"


def test_the_launcher_reports_what_the_command_did(tmp_path: Path) -> None:
    """Under the launcher a command's exit status, signal and output are its own."""
    from iterion.engine.tether import tethered

    assert subprocess.run(tethered(["sh", "-c", "exit 3"])).returncode == 3
    assert subprocess.run(tethered(["sh", "-c", "kill -TERM $$"])).returncode == -signal.SIGTERM
    out = subprocess.run(tethered(["sh", "-c", "yes | head -c 4; cat"]), input=b"in", capture_output=True)
    assert (out.returncode, out.stdout) == (0, b"y\ny\nin")  # SIGPIPE default again: `yes` ends
    with pytest.raises(FileNotFoundError):
        tethered([str(tmp_path / "missing")])
    assert json.loads(subprocess.run(tethered([sys.executable, "-c", "import os,json; print(json.dumps(os.getcwd()))"]),
                                     cwd=tmp_path, capture_output=True, text=True).stdout) == str(tmp_path)


def test_the_duration_cap_ends_an_agent_cli_before_the_failure_propagates(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine abandons the call (here: its check raises, as the run's duration cap does); the
    CLI's group gets SIGTERM, its grace, SIGKILL, and is gone when the failure reaches the node."""
    from iterion.backends import BackendRequest
    from iterion.backends.codex import CodexBackend
    from iterion.engine.cancel import CancelToken, call_cancellable
    from iterion.engine.children import CallProcesses

    ctl, ws = tmp_path / "ctl", tmp_path / "ws"
    ctl.mkdir()
    ws.mkdir()
    (ws / PERSON).write_bytes(PERSON_BYTES)
    exe = tmp_path / "codex"
    exe.write_text(FAKE_CLI)
    exe.chmod(0o755)
    monkeypatch.setenv("ITERION_CODEX_BIN", str(exe))
    monkeypatch.setenv("FAKE_CTL", str(ctl))
    monkeypatch.setenv("ITERION_AGENT_CLI_GRACE_S", "0.3")

    class CapReached(Exception):
        pass

    def cap() -> None:
        if (ctl / "cli.started").exists():
            raise CapReached()

    procs = CallProcesses(CancelToken())
    request = BackendRequest(node_id="edit", user="hi", workspace_dir=str(ws), processes=procs)
    with pytest.raises(CapReached):
        call_cancellable(lambda: CodexBackend({}).complete(request), procs.token, check=cap, on_abandon=procs.stop)
    cli_pid, child = (int(x) for x in (ctl / "cli.pid").read_text().split())
    assert _gone(cli_pid) and _gone(child)  # already gone when the failure propagated
    assert (ctl / "term").read_text() == "TERM\n"


def test_a_leaderless_recorded_group_loses_its_members() -> None:
    """The group's leader (a tool's shell) exited; a background child remains in the group: the
    takeover kills the members that started after the recorded leader."""
    from iterion.engine.children import end_child
    from iterion.engine.procgroup import group_pids

    shell = subprocess.Popen(["sh", "-c", "sleep 30 >/dev/null & echo $!; read x"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert shell.stdout is not None
    member = int(shell.stdout.readline())
    record = ChildGroup(pgid=shell.pid, proc_start=process_start(shell.pid), host=this_host(), what="tool t")
    shell.communicate("\n")  # the leader exits and is reaped; its child stays in the group
    try:
        assert group_pids(shell.pid) == [member]
        done = end_child(record)
        assert done["action"] == "killed" and done["pids"] == [member] and done["gone"]
        assert _gone(member)
        assert end_child(record)["action"] == "gone"
        elsewhere = record.model_copy(update={"host": "another-host"})
        assert end_child(elsewhere)["action"] == "unverifiable"
    finally:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
