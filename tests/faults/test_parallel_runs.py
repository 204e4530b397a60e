"""Runs in one workspace never clobber each other (issue 11.4), through the CLI, on a real repository.

* one run executes in an in-place workspace at a time: a second `run`/`resume` waits with a
  message naming the holder, `--no-wait` refuses (exit 2, one error line);
* a rewind's produced scope leaves alone what another run of the workspace produced in its own
  recorded intervals, and names that run in files.left_in_place_details;
* the user's index and HEAD stay byte-identical through all of it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

from iterion.store import Store
from tests.conftest import git, run_cli, start_cli, wait_for_file, write_bot

WRITE_AND_PARK = """
schema verdict:
  approved: bool

prompt gate_text:
  Keep it?

tool write:
  command: "sleep 0.3; printf '%s\\n' '{{vars.tag}}' > out-{{vars.tag}}.txt; mkdir -p shared; printf 'x' > shared/{{vars.tag}}.bin"

human gate:
  output: verdict
  instructions: gate_text

workflow parked:
  vars:
    tag: string
  entry: write
  write -> gate
  gate -> done
"""

# `write` blocks until the test creates go-<tag>: the run provably executes while the test acts
BLOCKING = """
schema verdict:
  approved: bool

prompt gate_text:
  Keep it?

tool write:
  command: "touch started-{{vars.tag}}; while [ ! -f go-{{vars.tag}} ]; do sleep 0.05; done; printf '%s\\n' '{{vars.tag}}' > out-{{vars.tag}}.txt"

human gate:
  output: verdict
  instructions: gate_text

workflow blocking:
  vars:
    tag: string
  entry: write
  write -> gate
  gate -> done
"""

TAGS = ["t1", "t2", "t3", "t4", "t5"]


def tree(root: Path) -> dict[str, str]:
    """Every file of the working tree (outside .git) -> sha256 of its bytes."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel == ".git" or rel.startswith(".git/") or not p.is_file():
            continue
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def parked(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str], stdout: str) -> str:
    assert proc.returncode == 4, stdout
    data = json.loads(stdout)
    assert data["status"] == "paused_waiting_human"
    return str(data["run_id"])


def rewind(ws: Path, run_id: str) -> dict:  # type: ignore[type-arg]
    p = run_cli("rewind", "--run-id", run_id, "--node", "write", "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["files"]  # type: ignore[no-any-return]


def details(files: dict) -> dict[str, str | None]:  # type: ignore[type-arg]
    return {d["path"]: d["run_id"] for d in files["left_in_place_details"]}


def test_five_parked_runs_rewinding_one_leaves_the_other_four_untouched_and_named(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", WRITE_AND_PARK)
    index, head = (ws / ".git" / "index").read_bytes(), git(ws, "rev-parse", "HEAD")
    first = run_cli("run", str(bot), "--var", "tag=t1", "--json", cwd=ws)
    ids = {"t1": parked(first, first.stdout)}
    # the other four are launched at once: the workspace lock has them execute one at a time
    procs = {t: start_cli("run", str(bot), "--var", f"tag={t}", "--json", cwd=ws) for t in TAGS[1:]}
    for t, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        ids[t] = parked(proc, out)
    assert sorted(p.name for p in ws.glob("out-*.txt")) == [f"out-{t}.txt" for t in TAGS]
    before = tree(ws)

    # rewind the first run: its own files go, the four others' stay byte-identical and named
    files = rewind(ws, ids["t1"])
    assert sorted(files["removed"]) == ["out-t1.txt", "shared/t1.bin"]
    after = tree(ws)
    assert after == {k: v for k, v in before.items() if k not in ("out-t1.txt", "shared/t1.bin")}
    named = details(files)
    for t in TAGS[1:]:
        assert named[f"out-{t}.txt"] == ids[t] and named[f"shared/{t}.bin"] == ids[t]
        assert f"out-{t}.txt" in files["left_in_place"]
    assert set(files["left_in_place"]) == set(named)

    # rewind the run that executed third: only its own files go, again; the runs that executed
    # after it are named, the one before it is not concerned, and out-t1.txt (removed by the
    # first rewind, after this run's last boundary) is left as it is, without a run to name
    store = Store.open(None, ws)
    order = sorted(TAGS, key=lambda t: store.read_events(ids[t])[0].time)
    assert order[0] == "t1"
    mid = order[2]
    files = rewind(ws, ids[mid])
    assert sorted(files["removed"]) == [f"out-{mid}.txt", f"shared/{mid}.bin"]
    assert tree(ws) == {k: v for k, v in after.items() if k not in (f"out-{mid}.txt", f"shared/{mid}.bin")}
    named = details(files)
    assert {p: r for p, r in named.items() if p.startswith("out-")} == {
        "out-t1.txt": None, **{f"out-{t}.txt": ids[t] for t in order[3:]}}
    # the rewind event records the same names
    event = [e for e in store.read_events(ids[mid]) if e.type == "run_rewound"][-1]
    assert {d["path"]: d["run_id"] for d in event.payload["files_left_in_place_details"]} == named

    # the user's index and HEAD never moved
    assert (ws / ".git" / "index").read_bytes() == index
    assert git(ws, "rev-parse", "HEAD") == head


def wait_for(path: Path, proc: subprocess.Popen[str] | None = None, timeout: float = 60) -> None:
    wait_for_file(path, proc, limit=timeout)


def read_until(proc: subprocess.Popen[str], needle: str, timeout: float = 60) -> str:
    """stderr lines of ``proc`` up to the first holding ``needle`` (the process keeps running)."""
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert time.monotonic() < deadline, seen
        line = proc.stderr.readline()
        assert line, f"{needle!r} never printed; stderr so far: {seen}"
        seen += line
    return seen


def test_a_second_run_waits_for_the_executing_one_and_no_wait_refuses(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", BLOCKING)
    holder = start_cli("run", str(bot), "--var", "tag=a", "--json", cwd=ws)
    wait_for(ws / "started-a", holder)  # run a is executing its node now
    store = Store.open(None, ws)
    holder_id = store.list_runs()[0].id

    # --no-wait: refused at once, one error line naming the holder, nothing created
    refused = run_cli("run", str(bot), "--var", "tag=b", "--no-wait", cwd=ws)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: workspace ") and holder_id in lines[0], refused.stderr
    assert f"pid {holder.pid}" in lines[0] and "Traceback" not in refused.stderr
    assert [r.id for r in store.list_runs()] == [holder_id]

    # without it: waits, saying for whom, and runs once the holder parks
    waiter = start_cli("run", str(bot), "--var", "tag=b", "--json", cwd=ws)
    said = read_until(waiter, "waiting for run")
    assert (f"waiting for run {holder_id} (pid {holder.pid}) which is executing in {ws.resolve()}; "
            "--no-wait to refuse instead") in said
    assert not (ws / "started-b").exists()  # it did not start while run a executes
    (ws / "go-a").touch()
    out, _ = holder.communicate(timeout=60)
    a_id = parked(holder, out)
    wait_for(ws / "started-b", waiter)
    # a rewind of the parked run a that would restore files refuses while run b executes (never waits)
    busy = run_cli("rewind", "--run-id", a_id, "--node", "write", cwd=ws)
    assert busy.returncode == 2 and "busy" in busy.stderr and "--restore-scope none" in busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1 and (ws / "out-a.txt").exists()
    # a resume of the parked run a now waits for run b the same way, and --no-wait refuses it
    refused = run_cli("resume", "--run-id", a_id, "--answer", "approved=true", "--no-wait", cwd=ws)
    assert refused.returncode == 2 and "busy" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    resumer = start_cli("resume", "--run-id", a_id, "--answer", "approved=true", "--json", cwd=ws)
    b_id = next(r.id for r in store.list_runs() if r.id != a_id)
    said = read_until(resumer, "waiting for run")
    assert f"waiting for run {b_id} (pid {waiter.pid})" in said
    (ws / "go-b").touch()
    out, _ = waiter.communicate(timeout=60)
    parked(waiter, out)
    out, err = resumer.communicate(timeout=60)
    assert resumer.returncode == 0, err
    assert json.loads(out)["status"] == "finished"
    assert (ws / "out-a.txt").read_text() == "a\n" and (ws / "out-b.txt").read_text() == "b\n"


def test_runs_in_nested_workspaces_overlap_and_a_rewind_leaves_the_inner_runs_files(tmp_path: Path,
                                                                                    ws: Path) -> None:
    """Runs in `repo` and `repo/sub-*` are different workspaces (different locks), so they can
    execute at the same time; the outer run's recorded interval then holds the inner runs'
    files, and its rewind must leave those in place, named."""
    blocking = write_bot(tmp_path / "src", BLOCKING, name="blocking")
    inner = write_bot(tmp_path / "src", WRITE_AND_PARK, name="inner")
    index = (ws / ".git" / "index").read_bytes()
    outer = start_cli("run", str(blocking), "--var", "tag=outer", "--json", cwd=ws)
    wait_for(ws / "started-outer", outer)
    ids: dict[str, str] = {}
    for t in TAGS[1:]:
        sub = ws / f"sub-{t}"
        sub.mkdir()  # an explicit --workspace must exist (never created)
        p = run_cli("run", str(inner), "--var", f"tag={t}", "--workspace", str(sub), "--json", cwd=ws)
        ids[t] = parked(p, p.stdout)
        assert "waiting" not in p.stderr
    (ws / "go-outer").touch()
    out, _ = outer.communicate(timeout=60)
    outer_id = parked(outer, out)
    before = tree(ws)

    files = rewind(ws, outer_id)
    assert "out-outer.txt" in files["removed"] and (ws / "started-outer").exists() is False
    named = details(files)
    for t in TAGS[1:]:
        assert named[f"sub-{t}/out-{t}.txt"] == ids[t] and named[f"sub-{t}/shared/{t}.bin"] == ids[t]
        assert (ws / f"sub-{t}" / f"out-{t}.txt").read_text() == f"{t}\n"
    gone = {"out-outer.txt", "started-outer", "go-outer"} & set(files["removed"])
    assert tree(ws) == {k: v for k, v in before.items() if k not in gone}
    assert (ws / ".git" / "index").read_bytes() == index


def test_a_run_started_from_a_node_of_the_run_holding_the_workspace_is_refused_not_deadlocked(
        tmp_path: Path, ws: Path) -> None:
    import sys

    inner = write_bot(tmp_path / "src", WRITE_AND_PARK, name="inner")
    outer = write_bot(tmp_path / "src", f"""
        tool nest:
          command: "{sys.executable} -m cli.main run {inner} --var tag=n > nested.out 2> nested.err; echo $? > nested.rc"

        workflow outer:
          entry: nest
          nest -> done
        """, name="outer")
    p = run_cli("run", str(outer), "--json", cwd=ws, timeout=120)
    assert p.returncode == 0, p.stderr
    outer_id = json.loads(p.stdout)["run_id"]
    assert (ws / "nested.rc").read_text().strip() == "2"
    err = (ws / "nested.err").read_text()
    assert err.startswith("error: workspace ") and f"run {outer_id}" in err and "started this process" in err
    assert not (ws / "out-n.txt").exists()
    assert [r.id for r in Store.open(None, ws).list_runs()] == [outer_id]
