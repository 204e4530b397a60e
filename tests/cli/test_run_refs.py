"""Short, unique run references through the CLI (issue 14 point 3): a unique id prefix of 4+
characters, a unique friendly name or the full id names a run for every command taking
`--run-id` (refs and track included); a shared prefix says how many runs share it, a shorter one
says "too short"; listings show each id's shortest unique prefix; hints print the name."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

from iterion.store import RunDoc, RunStatus, Store
from tests.conftest import REPO_ROOT, iterion_cmd, make_checkout, run_cli, write_bot

A = "01a2b3c4d5e6f7000000000000000001"
B = "01a2b3c4d5e6f7100000000000000002"
C = "01a2b3c4d5e6f8000000000000000003"
D = "9fffaaaa000000000000000000000004"


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    store = Store(root)
    for rid, name in ((A, "wf-calm-otter"), (B, "wf-calm-heron"), (C, "wf-bold-lynx"), (D, "wf-keen-wren")):
        store.create_run(RunDoc(id=rid, name=name, workflow_name="wf", status=RunStatus.PAUSED_OPERATOR))
    return root


def _inspect(store: Path, ref: str) -> subprocess.CompletedProcess[str]:
    return run_cli("inspect", "--run-id", ref, "--json", "--store-dir", str(store))


def test_prefix_name_and_id_resolve_and_errors_say_what_to_do(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for ref, rid in (("9fff", D), ("9FFF", D), ("01a2b3c4d5e6f8", C), ("01a2b3c4d5e6f70", A), (B, B),
                     ("wf-calm-heron", B)):
        p = _inspect(store, ref)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["id"] == rid, ref

    p = _inspect(store, "01a2")
    assert p.returncode == 2
    first = p.stderr.splitlines()[0]
    assert first == "error: ambiguous: 3 runs start with 01a2; type more"
    # the hint shows the prefixes that do tell them apart
    assert "01a2b3c4d5e6f70" in p.stderr and "01a2b3c4d5e6f8" in p.stderr

    p = _inspect(store, "9ff")
    assert p.returncode == 2 and p.stderr.startswith("error: run id prefix 9ff is too short: type at least 4")

    p = _inspect(store, "abcd")
    assert p.returncode == 2 and "not found" in p.stderr and "Traceback" not in p.stderr


def test_listing_shows_each_shortest_unique_prefix(tmp_path: Path) -> None:
    store = _store(tmp_path)
    rows = json.loads(run_cli("inspect", "--json", "--store-dir", str(store)).stdout)
    short = {r["id"]: r["short_id"] for r in rows}
    assert short == {A: "01a2b3c4d5e6f70", B: "01a2b3c4d5e6f71", C: "01a2b3c4d5e6f8", D: "9fff"}
    # off a terminal: a plain `ref` column carries the prefix; every shown prefix resolves
    text = run_cli("inspect", "--store-dir", str(store), env={"COLUMNS": "200"}).stdout
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["ref", "id"]
    assert any(ln.split()[:2] == ["9fff", D] for ln in lines)
    for rid, prefix in short.items():
        assert json.loads(_inspect(store, prefix).stdout)["id"] == rid


def test_listing_on_a_terminal_highlights_the_prefix(tmp_path: Path) -> None:
    store = _store(tmp_path)
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm", COLUMNS="200")
    proc = subprocess.Popen(iterion_cmd("inspect", "--store-dir", str(store)), stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0
    os.close(master)
    text = out.decode()
    # bold prefix, dim remainder, as jj shows change ids
    assert "\x1b[1m9fff\x1b[0m\x1b[2maaaa000000000000000000000004\x1b[0m" in text
    assert "\x1b[1m01a2b3c4d5e6f8\x1b[0m" in text


def test_refs_and_track_accept_names_and_prefixes(tmp_path: Path) -> None:
    store = _store(tmp_path)
    repo = make_checkout(tmp_path / "repo")
    env = {"ITERION_STORE_DIR": str(store)}
    p = run_cli("refs", "start", "--run-id", "wf-keen-wren", "--repo", str(repo), "--json", env=env)
    assert p.returncode == 0, p.stderr
    listed = run_cli("refs", "runs", "--repo", str(repo), "--json", env=env)
    assert D in listed.stdout and "wf-keen-wren" not in listed.stdout  # recorded under the run's id
    p = run_cli("refs", "list", "--run-id", "9fff", "--repo", str(repo), "--json", env=env)
    assert p.returncode == 0, p.stderr
    p = run_cli("refs", "list", "--run-id", "01a2", "--repo", str(repo), env=env)
    assert p.returncode == 2 and "ambiguous: 3 runs start with 01a2" in p.stderr

    track = Path(store) / "runs" / C / "track"
    p = run_cli("track", "capture", "--store", str(track), "--workspace", str(repo), "--run-id", "wf-bold-lynx",
                "--label", "nodes:a:0", "--json")
    assert p.returncode == 0, p.stderr
    p = run_cli("track", "list", "--store", str(track), "--workspace", str(repo), "--run-id", "01a2b3c4d5e6f8",
                "--json")
    assert p.returncode == 0, p.stderr
    assert "nodes:a:0" in p.stdout  # the chain captured under the name is the one the prefix names


def test_names_stay_unique_under_concurrent_creation(tmp_path: Path) -> None:
    root = tmp_path / "store"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from iterion.store import RunDoc, Store, new_id
        store = Store(sys.argv[1])
        for _ in range(12):
            store.create_run(RunDoc(id=new_id(), name="wf-calm-otter", workflow_name="wf"))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(root)]) for _ in range(3)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    names = [r.name for r in Store(root).list_runs()]
    assert len(names) == 36 and len(set(names)) == 36
    assert "wf-calm-otter" in names and "wf-calm-otter-2" in names


GATE = """
    schema approval:
      approved: bool

    prompt ask:
      Ship it?

    human gate:
      output: approval
      instructions: ask

    workflow w:
      entry: gate
      gate -> done
"""


def test_hints_print_the_name_and_it_works_when_pasted(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", GATE)
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws)
    doc = Store(store).list_runs()[0]
    hint = next(ln for ln in p.stderr.splitlines() if "answer with:" in ln)
    assert f"--run-id {doc.name} " in hint
    p = run_cli("resume", "--run-id", doc.name, "--answer", "approved=true", "--store-dir", str(store), "--json",
                cwd=ws)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "finished"
