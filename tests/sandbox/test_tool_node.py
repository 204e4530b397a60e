"""Tool nodes under `sandbox: auto` (bubblewrap): nothing outside the workspace is written, no
network without the opt-in, a private /tmp, the store hidden, `git commit` still works (in place
and in a worktree run), and `--sandbox none` runs without it."""

from __future__ import annotations

import uuid
from pathlib import Path

from iterion.store import RunStatus, Store

from ..conftest import git, write_bot
from ..engine.conftest import launch
from .conftest import Listener, connect_command


def _quote(command: str) -> str:
    return '"' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'


def bot(tmp_path: Path, command: str, sandbox: str = "  sandbox: auto", *, worktree: bool = False) -> Path:
    text = (f"tool t:\n  command: {_quote(command)}\n\nworkflow w:\n{sandbox}\n"
            + ("  worktree: auto\n" if worktree else "") + "  entry: t\n  t -> done\n")
    return write_bot(tmp_path / "src", text)


def stdout(store: Store, run_id: str) -> str:
    out = store.load_checkpoint(run_id)
    assert out is not None
    return str(out.outputs["t"]["stdout"])


def test_a_tool_cannot_write_outside_the_workspace(tmp_path: Path, ws: Path, store: Store, outside: Path) -> None:
    mine = tmp_path / "mine.txt"  # beside the workspace (pytest's tmp dir: /tmp or /dev/shm, private inside)
    mine.write_bytes(b"mine\n")
    before = outside.read_bytes()
    r = launch(store, bot(tmp_path, f"printf x >> {outside} 2>&1; printf x >> {mine} 2>&1; rm -f {outside}; "
                                    f"printf in > inside.txt; echo end"), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert outside.read_bytes() == before and mine.read_bytes() == b"mine\n"
    assert (ws / "inside.txt").read_text() == "in"
    cp = store.load_checkpoint(r.run_id)
    assert cp is not None and cp.outputs["t"]["stdout"] == "end\n"
    assert "Read-only file system" in cp.outputs["t"]["stderr"]


def test_no_network_without_the_opt_in_and_the_host_network_with_it(tmp_path: Path, ws: Path, store: Store,
                                                                   listener: Listener) -> None:
    r = launch(store, bot(tmp_path, connect_command(listener.port)), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert stdout(store, r.run_id).startswith("refused") and listener.accepted == 0
    opened = "  sandbox:\n    mode: auto\n    network:\n      mode: open"
    r = launch(store, bot(tmp_path, connect_command(listener.port), opened), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert stdout(store, r.run_id).strip() == "connected" and listener.accepted == 1


def test_tmp_is_private(tmp_path: Path, ws: Path, store: Store) -> None:
    host_file = Path("/tmp") / f"iterion-sbx-host-{uuid.uuid4().hex}"
    made = Path("/tmp") / f"iterion-sbx-made-{uuid.uuid4().hex}"
    host_file.write_text("host\n")
    try:
        r = launch(store, bot(tmp_path, f"test -e {host_file} && echo seen || echo unseen; echo x > {made}; "
                                        f"cat {made}"), ws)
        assert r.status is RunStatus.FINISHED, r.error
        assert stdout(store, r.run_id) == "unseen\nx\n"
        assert not made.exists()
    finally:
        host_file.unlink()


def test_git_commit_in_a_tool_works_and_the_store_is_out_of_reach(tmp_path: Path, ws: Path) -> None:
    store = Store(ws / ".git" / "iterion" / "store")  # the default place: inside .git, which tools may write
    probe = f"ls -A {store.root} | wc -l; touch {store.root}/x 2>&1 | grep -c Read-only"
    r = launch(store, bot(tmp_path, "printf c > c.txt && git add c.txt && git -c user.name=t -c user.email=t@e "
                                    f"commit -qm sandboxed && echo committed; {probe}"), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert stdout(store, r.run_id).split() == ["committed", "0", "1"]
    assert git(ws, "log", "-1", "--format=%s").strip() == "sandboxed"
    assert not (store.root / "x").exists()


def test_git_commit_in_a_worktree_run(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, bot(tmp_path, "printf w > w.txt && git add w.txt && git -c user.name=t -c user.email=t@e "
                                    "commit -qm in-worktree && echo committed", worktree=True), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert stdout(store, r.run_id) == "committed\n"
    assert "in-worktree" in git(ws, "log", "--all", "--format=%s")


def test_sandbox_none_flag_wins_over_the_workflow(tmp_path: Path, ws: Path, store: Store, outside: Path) -> None:
    r = launch(store, bot(tmp_path, f"printf x >> {outside}"), ws, sandbox="none")
    assert r.status is RunStatus.FINISHED, r.error
    assert outside.read_bytes().endswith(b"x")
    doc = store.load_run(r.run_id)
    assert doc.options["sandbox"]["flag"] == "none" and doc.options["sandbox"]["mode"] == "none"


def test_the_flag_sandboxes_a_workflow_that_declares_nothing(tmp_path: Path, ws: Path, store: Store,
                                                            outside: Path) -> None:
    before = outside.read_bytes()
    r = launch(store, bot(tmp_path, f"printf x >> {outside} 2>&1; true", sandbox=""), ws, sandbox="auto")
    assert r.status is RunStatus.FINISHED, r.error
    assert outside.read_bytes() == before
    started = [e for e in store.read_events(r.run_id) if e.type == "run_started"][0]
    assert started.payload["sandbox"] == {"flag": "auto", "mode": "auto", "driver": "bubblewrap", "nodes": ["t"]}


def test_a_node_may_opt_out_and_a_script_runs_sandboxed(tmp_path: Path, ws: Path, store: Store,
                                                       outside: Path) -> None:
    text = f"""
        tool free:
          command: "printf f >> {outside}"
          sandbox: none

        tool boxed:
          language: python
          script: |
            try:
                open("{outside}", "a").write("b")
            except OSError as exc:
                print(type(exc).__name__)

        workflow w:
          sandbox: auto
          entry: free
          free -> boxed
          boxed -> done
    """
    r = launch(store, write_bot(tmp_path / "src", text), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert outside.read_bytes().endswith(b"f")
    cp = store.load_checkpoint(r.run_id)
    assert cp is not None and cp.outputs["boxed"]["stdout"].strip() == "OSError"
