"""iterion.api: typed results and typed refusals over the engine the CLI runs, on the demo
(script backend), in-process, with the store and the workspace in a temporary directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import iterion
from iterion import api
from tests.conftest import REPO_ROOT, cli_env, store_fingerprint


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "demo"
    shutil.copytree(REPO_ROOT / "fixtures" / "demo", work)
    monkeypatch.chdir(work)
    monkeypatch.delenv("ITERION_NATS_URL", raising=False)
    return work


def test_import_iterion_loads_neither_the_api_nor_the_engine() -> None:
    code = "import json, sys, iterion; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True,
                         check=True).stdout
    loaded = set(json.loads(out))
    assert {"iterion.api", "iterion.engine", "iterion.store", "pydantic"}.isdisjoint(loaded)
    assert "iterion.api" in set(json.loads(subprocess.run(
        [sys.executable, "-c", "import json, sys, iterion; iterion.run; print(json.dumps(sorted(sys.modules)))"],
        env=cli_env(), capture_output=True, text=True, check=True).stdout))


def test_a_parked_run_is_a_run_with_its_question_and_the_store_agrees(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = iterion.run(demo / "demo.bot", workspace=demo, store=store, vars={"topic": "lakes"})
    assert r.status is iterion.RunStatus.PAUSED_WAITING_HUMAN and r.parked and not r.done
    assert r.question is not None and r.question.node == "approve" and "lakes" in (r.question.text or "")
    assert [(f.name, f.type) for f in r.question.fields] == [("approved", "bool"), ("note", "string")]
    assert r.checkpoint_node == "approve" and r.tokens > 0 and r.stored_in == store / "runs" / r.id
    assert r.raise_for_status() is r  # parked on a person is no failure
    assert iterion.inspect(r.name, store=store) == r  # by name; the same snapshot
    [listed] = iterion.runs(store=store)
    assert (listed.id, listed.status, listed.workflow) == (r.id, r.status, "demo")


def _state(store: Path) -> dict[str, str]:
    """The store's documents (a lock file records its last holder: not the run's state)."""
    return {k: v for k, v in store_fingerprint(store).items() if not k.endswith("/lock")}


def test_refusals_are_typed_and_change_nothing(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    before = _state(store)
    with pytest.raises(iterion.RunNotFoundError) as nf:
        iterion.resume("zzzz-no-such-run", store=store)
    assert nf.value.hint and isinstance(nf.value, iterion.RefusedError)
    with pytest.raises(api.RefusedError, match="exactly one"):
        api.rewind(r.id, node="write", auto=True, store=store)
    with pytest.raises(api.RewindRefusedError):
        api.rewind(r.id, node="no_such_node", store=store)
    with pytest.raises(api.RefusedError, match="approve"):  # answers missing a required field's type
        iterion.resume(r.id, answers={"approved": "maybe"}, store=store)
    assert _state(store) == before
    # an edited workflow: refused without force, accepted with it
    bot = demo / "demo.bot"
    bot.write_text(bot.read_text().replace("Publish it to", "Publish it now to"))
    with pytest.raises(iterion.SourceChangedError) as changed:
        iterion.resume(r.id, answers={"approved": True, "note": "n"}, store=store)
    assert "force" in (changed.value.hint or changed.value.message)
    assert iterion.inspect(r.id, store=store).status is iterion.RunStatus.PAUSED_WAITING_HUMAN
    done = iterion.resume(r.id, answers={"approved": True, "note": "n"}, force=True, store=store)
    assert done.status is iterion.RunStatus.FINISHED and done.done
    with pytest.raises(api.RefusedError):
        iterion.resume(r.id, store=store)  # finished: nothing to resume


def test_a_failed_run_is_returned_and_raise_for_status_raises(demo: Path, tmp_path: Path) -> None:
    (demo / "fails.bot").write_text('tool boom:\n  command: "exit 3"\n\nworkflow fails:\n  entry: boom\n'
                                    "  boom -> done\n")
    r = iterion.run(demo / "fails.bot", workspace=demo, store=tmp_path / "store")
    assert r.status in (iterion.RunStatus.FAILED, iterion.RunStatus.FAILED_RESUMABLE) and r.failure_code
    with pytest.raises(iterion.RunFailedError) as failed:
        r.raise_for_status()
    assert failed.value.run is r and r.id in failed.value.message


def test_runs_filters_limits_and_lists_a_corrupt_run(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    parked = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    finished = iterion.run(demo / "demo.bot", workspace=demo, store=store,
                           answers={"approve": {"approved": False, "note": "no"}})
    assert [s.id for s in iterion.runs(store=store)] == [finished.id, parked.id]  # newest first
    assert [s.id for s in iterion.runs(store=store, limit=1)] == [finished.id]
    assert [s.id for s in iterion.runs(store=store, status="paused_waiting_human")] == [parked.id]
    (store / "runs" / parked.id / "run.json").write_text("{not json")
    listing = iterion.runs(store=store)
    assert [(s.id, s.status) for s in listing] == [(finished.id, "finished"), (parked.id, None)]
    assert listing[1].corrupt and "run.json" in listing[1].corrupt
    with pytest.raises(api.StoreProblemError):
        iterion.inspect(parked.id, store=store)


def test_run_and_resume_take_the_request_models_and_both_answers_shapes(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    answer = {"approved": True, "note": "ok"}
    flat = iterion.run(demo / "demo.bot", workspace=demo, store=store, answers=answer)  # one human node
    req = api.LaunchRequest.parse({"file": str(demo / "demo.bot"), "workspace": str(demo),
                                   "answers": {"approve": answer}, "budget": {"max_duration": "1h"}})
    keyed = iterion.run(request=req, store=store)
    assert flat.status is keyed.status is iterion.RunStatus.FINISHED
    assert flat.outputs["approve"] == keyed.outputs["approve"] == answer
    parked = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    done = iterion.resume(parked.id, store=store, request=api.ResumeRequest(answers={"approve": answer}))
    assert done.status is iterion.RunStatus.FINISHED and done.outputs["approve"] == answer
    with pytest.raises(api.RefusedError, match="approved must map fields to values"):  # neither shape
        iterion.run(demo / "demo.bot", workspace=demo, store=store, answers={"approved": True, "approve": {}})


def test_the_cli_verbs_reach_the_engine_only_through_the_api() -> None:
    """One path from a request to the engine: run, resume, rewind, inspect and dev import none of
    the engine's entry points (launch_run, resume_run, rewind_run, the auto-resume loop, the
    operator verbs and their request file)."""
    import ast

    entry_points = {"launch_run", "resume_run", "rewind_run", "undo_rewind", "auto_resume", "answer_at_terminal",
                    "pause_run", "cancel_run", "write_request", "clear_request"}
    for name in ("run.py", "rewind.py", "inspect_cmd.py", "dev.py"):
        tree = ast.parse((REPO_ROOT / "cli" / name).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not imported & entry_points, f"cli/{name} imports {imported & entry_points}"
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not called & entry_points, f"cli/{name} calls {called & entry_points}"


def test_on_question_answers_each_gate_and_none_leaves_the_run_parked(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    asked: list[dict[str, Any]] = []

    def answer(pending: Mapping[str, Any]) -> dict[str, Any]:
        asked.append(dict(pending))
        return {"approved": True, "note": "asked"}

    done = iterion.run(demo / "demo.bot", workspace=demo, store=store, on_question=answer)
    assert done.status is iterion.RunStatus.FINISHED and done.outputs["approve"]["note"] == "asked"
    assert [p["node"] for p in asked] == ["approve"]
    assert [f["name"] for f in asked[0]["fields"]] == ["approved", "note"]
    assert done.result is not None and done.result.to_json()["status"] == "finished"
    left = iterion.run(demo / "demo.bot", workspace=demo, store=store, on_question=lambda p: None)
    assert left.status is iterion.RunStatus.PAUSED_WAITING_HUMAN and left.pending is not None
    assert left.pending["node"] == "approve" and left.question is not None
    with pytest.raises(api.RefusedError, match="waiting for answers"):  # a resume needs the answers given
        iterion.resume(left.id, store=store, on_question=lambda p: {"approved": False, "note": "later"})


def test_a_cancelled_token_cancels_and_the_run_resumes(demo: Path, tmp_path: Path) -> None:
    from iterion.engine.cancel import CancelToken

    store = tmp_path / "store"
    token = CancelToken()
    token.cancel()
    r = iterion.run(demo / "demo.bot", workspace=demo, store=store, token=token)
    assert r.status is iterion.RunStatus.CANCELLED and r.parked and not r.outputs.get("publish")
    # the resume continues, parks at the gate, and on_question answers it there
    r = iterion.resume(r.id, store=store, on_question=lambda p: {"approved": True, "note": "go"})
    assert r.status is iterion.RunStatus.FINISHED and r.outputs["approve"]["note"] == "go"


def test_inspect_detail_is_what_the_cli_prints(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    parked = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    run = iterion.inspect(parked.id, store=store)
    printed = subprocess.run([sys.executable, "-m", "iterion", "inspect", "--run-id", parked.id, "--store-dir",
                              str(store), "--json"], env=cli_env(), cwd=demo, capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    cli = json.loads(printed.stdout)
    assert cli.pop("continue_with").endswith("--answer 'approved=<true|false>' --answer 'note=<text>'")
    cli.pop("duration_s")
    detail = {k: v for k, v in run.detail.items() if k != "duration_s"}
    assert cli == json.loads(json.dumps(detail, default=str))
    assert run.mode == detail["mode"] == "in_place" and run.ended_at is None and run.created_at is not None
    assert run.interrupted_rewind is None and detail["boundaries"] and detail["pending"]["node"] == "approve"


def test_undo_rewind_puts_the_checkpoint_back(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    parked = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    rewound = api.rewind(parked.id, node="write", store=store)
    assert rewound.to_node == "write" and iterion.inspect(parked.id, store=store).checkpoint_node == "write"
    undone = api.undo_rewind(parked.id, store=store)
    assert (undone.to_node, undone.checkpoint_node) == ("write", "approve")
    assert undone.detail["run_id"] == parked.id and undone.status == iterion.inspect(parked.id, store=store).status
    with pytest.raises(api.RewindRefusedError):  # nothing left to undo
        api.undo_rewind(parked.id, store=store)


def test_api_errors_keep_the_layers_kind(demo: Path, tmp_path: Path) -> None:
    from gitrefs.persist.errors import ErrorKind

    with pytest.raises(api.RunNotFoundError) as missing:
        iterion.inspect("no-such-run", store=tmp_path / "store")
    assert missing.value.kind is ErrorKind.BAD_INPUT and missing.value.kind is missing.value.__cause__.kind  # type: ignore[union-attr]
    assert api.RefusedError("x", kind=ErrorKind.REFUSED).kind is ErrorKind.REFUSED
    assert api.RefusedError("x", exit_code=1).kind is ErrorKind.REFUSED  # the older spelling still accepted


def test_the_api_sweeps_orphans_as_the_cli_does_silently(demo: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """One home (iterion/command_store.py) for opening a store and sweeping orphans: a run left
    `running` by a process that is gone is promoted by the API's first call, and nothing is printed."""
    from iterion.store import RunStatus, Store

    store = tmp_path / "store"
    r = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    st = Store(store)
    st.update_run(r.id, lambda d: (setattr(d, "status", RunStatus.RUNNING), setattr(d.owner, "host", "another-host")))
    monkeypatch.setenv("ITERION_STALE_AFTER_S", "0")
    capfd.readouterr()
    promoted = iterion.inspect(r.id, store=store)
    assert promoted.status is RunStatus.FAILED_RESUMABLE and promoted.failure_code == "ORPHANED_RUN"
    assert capfd.readouterr() == ("", "")


SLOW = """\
tool slow:
  command: "sleep 1; printf done > slow.txt"

tool after:
  command: "printf after > after.txt"

workflow w:
  entry: slow
  slow -> after
  after -> done
"""


def test_pause_and_cancel_drive_a_run_another_thread_executes(demo: Path, tmp_path: Path) -> None:
    """``run(run_id=...)`` names the run up front; ``pause`` parks it at the next node boundary (the
    node in progress finishes), ``cancel`` of a parked run is direct; ``withdraw_request`` is a no-op
    without a request, and refuses an unknown run as every call does."""
    import threading
    import time

    from iterion.store.ids import new_id

    store = tmp_path / "store"
    (demo / "slow.bot").write_text(SLOW)
    rid = new_id()
    out: list[iterion.Run] = []
    worker = threading.Thread(target=lambda: out.append(
        iterion.run(demo / "slow.bot", workspace=demo, store=store, run_id=rid)))
    worker.start()
    deadline = time.monotonic() + 60
    while not (store / "runs" / rid / "events.jsonl").is_file() or \
            '"node_started"' not in (store / "runs" / rid / "events.jsonl").read_text():
        assert time.monotonic() < deadline and worker.is_alive()
        time.sleep(0.02)
    paused = api.pause(rid, reason="from a test", store=store)
    worker.join(60)
    assert (paused.run_id, paused.action, paused.status, paused.delivered) == (
        rid, "pause", iterion.RunStatus.PAUSED_OPERATOR, "requested")
    assert paused.checkpoint_node == "after"
    [r] = out
    assert r.id == rid and r.status is iterion.RunStatus.PAUSED_OPERATOR
    assert (demo / "slow.txt").read_text() == "done" and not (demo / "after.txt").exists()  # finished, not killed
    api.withdraw_request(rid, store=store)  # nothing pending: nothing happens
    assert not (store / "runs" / rid / "control.json").exists()
    with pytest.raises(api.RefusedError, match="paused_operator"):
        api.pause(rid, store=store)  # only a running run pauses
    cancelled = api.cancel(rid, store=store)
    assert (cancelled.status, cancelled.delivered) == (iterion.RunStatus.CANCELLED, "direct")
    assert iterion.resume(rid, store=store).status is iterion.RunStatus.FINISHED  # a cancel is resumable
    assert (demo / "after.txt").read_text() == "after"
    with pytest.raises(api.RunNotFoundError):
        api.withdraw_request("no-such-run", store=store)


def test_auto_rewind_refusal_is_typed_and_still_a_rewind_refusal(demo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    before = _state(store)
    with pytest.raises(api.AutoRewindRefusedError) as caught:  # no edit: nothing to rewind to
        api.rewind(r.id, auto=True, store=store)
    assert isinstance(caught.value, api.RewindRefusedError) and caught.value.hint
    assert _state(store) == before
