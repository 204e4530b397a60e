"""Where the push setting comes from (flag > env > workflow), what is refused up front, what
resume keeps and replaces, and --push-every."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.engine.checkpoint_push import OPTION_KEY, PushSetting, resolve_setting
from iterion.engine.errors import EngineError
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.store import RunStatus, Store
from iterion.store import events as ev
from iterion.workspace_checkpoint import recovery_hint

from .conftest import GATE, git, index_digest, make_checkout, run_cli, write_bot

THREE = """
tool one:
  command: "echo one > one.txt"

tool two:
  command: "echo two > two.txt"

tool three:
  command: "echo three > three.txt"

workflow three:
  entry: one
  one -> two
  two -> three
  three -> done
"""


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ITERION_PUSH_CHECKPOINTS", raising=False)
    monkeypatch.delenv("ITERION_PUSH_EVERY", raising=False)


def test_precedence_flag_over_env_over_workflow(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_setting(None, None, "wf-remote", 3) == PushSetting("wf-remote", 3, "workflow")
    assert resolve_setting(None, None, None, 0) is None
    monkeypatch.setenv("ITERION_PUSH_CHECKPOINTS", "env-remote")
    monkeypatch.setenv("ITERION_PUSH_EVERY", "2")
    assert resolve_setting(None, None, "wf-remote", 3) == PushSetting("env-remote", 2, "env")
    assert resolve_setting("flag-remote", 5, "wf-remote", 3) == PushSetting("flag-remote", 5, "flag")
    # an empty value turns pushing off rather than falling through to a lower source
    assert resolve_setting("", None, "wf-remote", 0) is None
    monkeypatch.setenv("ITERION_PUSH_CHECKPOINTS", "")
    assert resolve_setting(None, None, "wf-remote", 0) is None
    monkeypatch.setenv("ITERION_PUSH_EVERY", "often")
    with pytest.raises(EngineError, match="ITERION_PUSH_EVERY"):
        resolve_setting("origin", None, None)
    monkeypatch.delenv("ITERION_PUSH_EVERY")
    with pytest.raises(EngineError, match="needs a remote"):
        resolve_setting(None, 3, None)


def _launch(store: Store, bot: Path, ws: Path, **kw: object) -> object:
    return launch_run(store, bot, LaunchOptions(workspace=ws, watch=False, **kw))  # type: ignore[arg-type]


def test_workflow_setting_is_used_and_persisted_for_resume(tmp_path: Path, ws: Path, origin: Path,
                                                           store: Store) -> None:
    text = GATE.replace("  entry: make\n", "  entry: make\n  push_checkpoints: origin\n")
    r = launch_run(store, write_bot(tmp_path / "src", text), LaunchOptions(workspace=ws, watch=False))
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    assert store.load_run(r.run_id).options[OPTION_KEY] == {"remote": "origin", "every": 0, "source": "workflow"}
    first = recovery_hint(store, r.run_id)
    assert first is not None and first["ref"].endswith("/checkpoints/1")
    r = resume_run(store, r.run_id, ResumeOptions(answers={"approved": True}, watch=False))
    assert r.status is RunStatus.FINISHED
    last = recovery_hint(store, r.run_id)
    assert last is not None and last["ref"].endswith("/checkpoints/2")  # the end of the run, same setting
    assert git(origin, "rev-parse", last["ref"]).strip() == last["commit"]
    assert git(origin, "show", f"{last['commit']}:after.txt") == "after\n"


def test_resume_override_replaces_and_stops_pushing(tmp_path: Path, ws: Path, origin: Path, store: Store) -> None:
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    bot = write_bot(tmp_path / "src", GATE.replace('approve?"', 'approve?"\n  interaction: human'))
    r = launch_run(store, bot, LaunchOptions(workspace=ws, watch=False, push_checkpoints="origin"))
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    with pytest.raises(EngineError, match="no-such-remote"):  # refused before anything is claimed
        resume_run(store, r.run_id, ResumeOptions(answers={"approved": True}, watch=False,
                                                  push_checkpoints="no-such-remote"))
    assert store.load_run(r.run_id).status is RunStatus.PAUSED_WAITING_HUMAN
    r = resume_run(store, r.run_id, ResumeOptions(answers={"approved": False}, watch=False,
                                                  push_checkpoints=str(other)))
    assert r.status is RunStatus.FAILED  # the gate said no: the fail terminal
    opts = store.load_run(r.run_id).options[OPTION_KEY]
    assert opts == {"remote": str(other), "every": 0, "source": "resume"}
    hint = recovery_hint(store, r.run_id)
    assert hint is not None and hint["remote"] == str(other)
    assert git(other, "rev-parse", hint["ref"]).strip() == hint["commit"]


def test_push_every_n_nodes(tmp_path: Path, ws: Path, origin: Path, store: Store) -> None:
    r = launch_run(store, write_bot(tmp_path / "src", THREE),
                   LaunchOptions(workspace=ws, watch=False, push_checkpoints="origin", push_every=1))
    assert r.status is RunStatus.FINISHED
    pushes = [e for e in store.read_events(r.run_id) if e.type == ev.RUN_WORKSPACE_CHECKPOINT]
    # the end state is the last node's: already on the remote, so no fourth ref
    assert [p.payload["reason"] for p in pushes] == ["every_nodes", "every_nodes", "every_nodes"]
    assert [p.payload.get("label") for p in pushes[:3]] == ["nodes:one:0", "nodes:two:0", "nodes:three:0"]
    refs = git(origin, "for-each-ref", "--format=%(refname)", f"refs/iterion/runs/{r.run_id}/checkpoints")
    assert len(refs.split()) == len(pushes)
    assert git(origin, "show", f"{pushes[0].payload['commit']}:one.txt") == "one\n"
    assert "two.txt" not in git(origin, "ls-tree", "--name-only", pushes[0].payload["commit"])


def test_refused_up_front_nothing_created(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", THREE)
    with pytest.raises(EngineError, match="no remote 'upstream'"):
        launch_run(store, bot, LaunchOptions(workspace=ws, watch=False, push_checkpoints="upstream"))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(EngineError, match="not inside a git repository"):
        launch_run(store, bot, LaunchOptions(workspace=plain, watch=False, push_checkpoints="origin"))
    assert not store.runs_dir.exists() or not list(store.runs_dir.iterdir())  # no run was created
    proc = run_cli("run", str(bot), "--push-checkpoints", "upstream", "--workspace", str(ws),
                   "--store-dir", str(tmp_path / "s2"), cwd=ws)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 2, proc.stderr
    assert "--push-checkpoints upstream: no remote 'upstream'" in proc.stderr
    assert "hint: configured remotes: origin" in proc.stderr


def test_unreachable_remote_never_fails_the_run(tmp_path: Path, store: Store) -> None:
    ws = make_checkout(tmp_path / "w")
    gone = tmp_path / "gone.git"
    git(ws, "remote", "add", "origin", str(gone))  # configured, but nothing there
    index0 = index_digest(ws)
    r = launch_run(store, write_bot(tmp_path / "src", THREE),
                   LaunchOptions(workspace=ws, watch=False, push_checkpoints="origin"))
    assert r.status is RunStatus.FINISHED
    failed = [e for e in store.read_events(r.run_id) if e.type == ev.RUN_WORKSPACE_CHECKPOINT_FAILED]
    assert len(failed) == 1 and failed[0].payload["remote"] == "origin" and failed[0].payload["error"]
    assert recovery_hint(store, r.run_id) is None  # no success: no hint, no invented ref
    assert index_digest(ws) == index0


def test_cancelled_worktree_run_and_failed_in_place_run_bank_and_push(tmp_path: Path, ws: Path, origin: Path,
                                                                      store: Store) -> None:
    from iterion.engine.cancel import CancelToken
    from iterion.store import Event

    token = CancelToken()

    def cancel_at_two(e: Event) -> None:
        if e.type == ev.NODE_STARTED and e.node == "two":
            token.cancel("operator")

    wt = THREE.replace("  entry: one\n", "  entry: one\n  worktree: auto\n")
    r = launch_run(store, write_bot(tmp_path / "wt", wt), LaunchOptions(workspace=ws, watch=False,
                                                                        push_checkpoints="origin"),
                   token=token, listener=cancel_at_two)
    assert r.status is RunStatus.CANCELLED
    doc = store.load_run(r.run_id)
    assert doc.final_branch == doc.worktree.branch and doc.final_commit  # type: ignore[union-attr]
    assert git(origin, "show", f"{doc.final_commit}:one.txt") == "one\n"
    hint = recovery_hint(store, r.run_id)
    assert hint is not None and hint["commit"] == doc.final_commit
    pushed = [e for e in store.read_events(r.run_id) if e.type == ev.RUN_WORKSPACE_CHECKPOINT]
    assert pushed[-1].payload["reason"] == "cancel"

    failing = THREE.replace('echo two > two.txt"', 'echo two > two.txt && exit 7"')
    r = launch_run(store, write_bot(tmp_path / "ip", failing), LaunchOptions(workspace=ws, watch=False,
                                                                             push_checkpoints="origin"))
    assert r.status is RunStatus.FAILED_RESUMABLE
    doc = store.load_run(r.run_id)
    hint = recovery_hint(store, r.run_id)
    assert hint is not None and doc.final_branch is None and doc.final_commit == hint["commit"]
    assert git(origin, "show", f"{hint['commit']}:two.txt") == "two\n"  # the failed node's debris too


def test_workflow_properties_compile_and_are_checked(tmp_path: Path) -> None:
    from iterion.engine.source import InvalidWorkflow, compile_source

    ok = write_bot(tmp_path / "a", THREE.replace("  entry: one\n", '  entry: one\n  push_checkpoints: "up"\n'
                                                                   "  push_every: 2\n"))
    wf = compile_source(ok).workflow
    assert (wf.push_checkpoints, wf.push_every) == ("up", 2)
    bad = write_bot(tmp_path / "b", THREE.replace("  entry: one\n", "  entry: one\n  push_every: 0\n"))
    with pytest.raises(InvalidWorkflow) as caught:
        compile_source(bad)
    assert any(d.code == "C103" and "push_every" in d.message for d in caught.value.diagnostics)
