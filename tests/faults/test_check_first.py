"""Commands that change state check first, then change (issue 10, deliver point 8; issue 11.2).

rewind, resume and cancel validate what they need - the event log, the objects of the restore,
the pivot, the checkpoint, the workspace - before they touch the workspace or the run document.
Each case below: real run, real CLI subprocess, one `error:` line, and the workspace and the
whole store byte-identical before and after the refusal.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from workspacetrack.tracker import Tracker

from ..conftest import git, make_checkout, write_bot
from .faultlib import cli, cli_json, error_lines, restore_template, save_template, store_hash, tree_hash

FLOW = """\
tool change:
  command: "printf 'changed by the node\\n' > a.txt && printf 'new\\n' > b.txt && rm c.txt"

tool check:
  command: "test -f {allow}"

workflow small:
  entry: change
  change -> check
  check -> done
"""


@dataclass
class Run:
    ws: Path
    store: Path
    run_id: str
    allow: Path

    @property
    def run_dir(self) -> Path:
        return self.store / "runs" / self.run_id

    def state(self) -> tuple[str, str]:
        return tree_hash(self.ws), store_hash(self.store)


@pytest.fixture(scope="module")
def _template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """The failed run, built once per module and worker: (template, live, the run at live)."""
    base = tmp_path_factory.mktemp("check-first")
    live = base / "live"
    live.mkdir()
    ws = make_checkout(live / "ws")
    (ws / "a.txt").write_text("the person's a\n")
    (ws / "c.txt").write_text("the person's c\n")
    # a.txt stays untracked: git has no blob of it, so its content lives in iterion's own object
    # store (workspacetrack/gitsource.py), where the missing-object test deletes it
    git(ws, "add", "c.txt")
    git(ws, "commit", "-q", "-m", "files")
    allow = live / "allow"
    bot = write_bot(live / "src", FLOW.format(allow=allow))
    store = live / "store"
    out = cli_json(ws, store, "run", str(bot))
    assert out["status"] == "failed_resumable", out
    assert (ws / "a.txt").read_text() == "changed by the node\n"
    save_template(live, base / "template")
    return base / "template", live, Run(ws, store, out["run_id"], allow)


@pytest.fixture
def run(_template: tuple[Path, Path, Run]) -> Run:
    """A fresh byte-identical copy of that run at the paths it recorded."""
    template, live, r = _template
    restore_template(template, live)
    return r


def _refused(proc, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    errors = error_lines(proc.stderr)
    assert len(errors) == 1, proc.stderr
    return errors[0]


def _object_of(r: Run, label: str, path: str) -> Path:
    tracker = Tracker(r.run_dir / "track", r.ws, r.run_id)
    digest = tracker.manifest(label).entries[path][0]
    return tracker.store.objects.path_for(digest)


# -- rewind -------------------------------------------------------------------------------------

def test_rewind_with_a_missing_object_refuses_before_anything_changes(run: Run) -> None:
    _object_of(run, "pre:change:0", "a.txt").unlink()  # the person's a.txt, which the restore writes back
    run_json = (run.run_dir / "run.json").read_bytes()
    before = run.state()
    line = _refused(cli(run.ws, run.store, "rewind", "--run-id", run.run_id, "--node", "change"))
    assert "lacks the content of a.txt" in line and "nothing was changed" in line, line
    assert run.state() == before
    assert (run.run_dir / "run.json").read_bytes() == run_json
    assert not (run.run_dir / "rewind-intent.json").exists()
    # the same refusal for a dry run; --restore-scope none still moves the checkpoint alone
    _refused(cli(run.ws, run.store, "rewind", "--run-id", run.run_id, "--node", "change", "--dry-run"))
    assert run.state() == before
    ok = cli(run.ws, run.store, "rewind", "--run-id", run.run_id, "--node", "change", "--restore-scope", "none")
    assert ok.returncode == 0, ok.stderr
    assert (run.ws / "a.txt").read_text() == "changed by the node\n"


def test_rewind_unknown_node_changes_nothing(run: Run) -> None:
    before = run.state()
    line = _refused(cli(run.ws, run.store, "rewind", "--run-id", run.run_id, "--node", "nope"))
    assert "has no node 'nope'" in line
    assert run.state() == before


def test_rewind_with_an_unreadable_event_log_changes_nothing(run: Run) -> None:
    log = run.run_dir / "events.jsonl"
    kept = run.run_dir.parent / "events.kept"
    shutil.move(log, kept)
    log.mkdir()  # a directory where the log should be: reading it fails (EISDIR), even as root
    before = run.state()
    line = _refused(cli(run.ws, run.store, "rewind", "--run-id", run.run_id, "--node", "change"))
    assert "event log" in line and "cannot be read" in line, line
    assert run.state() == before


def test_rewind_with_a_missing_workspace_changes_nothing(run: Run, tmp_path: Path) -> None:
    gone = tmp_path / "ws-moved"
    run.ws.rename(gone)
    before = (tree_hash(gone), store_hash(run.store))
    line = _refused(cli(tmp_path, run.store, "rewind", "--run-id", run.run_id, "--node", "change"))
    assert "does not exist" in line, line
    assert (tree_hash(gone), store_hash(run.store)) == before and not run.ws.exists()


def test_rewind_without_pivot_and_nothing_to_finish_is_usage_error(run: Run) -> None:
    before = run.state()
    line = _refused(cli(run.ws, run.store, "rewind", "--run-id", run.run_id))
    assert "--node NODE or --auto" in line
    assert run.state() == before


# -- resume ---------------------------------------------------------------------------------------

def test_resume_with_a_missing_checkpoint_changes_nothing(run: Run) -> None:
    (run.run_dir / "checkpoint.json").unlink()
    before = run.state()
    line = _refused(cli(run.ws, run.store, "resume", "--run-id", run.run_id))
    assert "checkpoint missing: nothing to resume from" in line, line
    assert run.state() == before


def test_resume_with_a_missing_workspace_changes_nothing(run: Run, tmp_path: Path) -> None:
    gone = tmp_path / "ws-moved"
    run.ws.rename(gone)
    before = (tree_hash(gone), store_hash(run.store))
    line = _refused(cli(tmp_path, run.store, "resume", "--run-id", run.run_id))
    assert f"the workspace {run.ws} of run {run.run_id} does not exist" in line, line
    assert (tree_hash(gone), store_hash(run.store)) == before and not run.ws.exists()


def test_resume_with_an_unreadable_event_log_changes_nothing(run: Run) -> None:
    log = run.run_dir / "events.jsonl"
    log.unlink()
    log.mkdir()
    run.allow.write_text("")
    before = run.state()
    _refused(cli(run.ws, run.store, "resume", "--run-id", run.run_id))
    assert run.state() == before


# -- cancel ---------------------------------------------------------------------------------------

def test_cancel_with_an_unreadable_event_log_changes_nothing(run: Run) -> None:
    log = run.run_dir / "events.jsonl"
    log.unlink()
    log.mkdir()
    before = run.state()
    line = _refused(cli(run.ws, run.store, "cancel", "--run-id", run.run_id))
    assert "event log" in line, line
    assert run.state() == before
    assert json.loads((run.run_dir / "run.json").read_text())["status"] == "failed_resumable"


def test_cancel_with_an_unreadable_run_document_changes_nothing(run: Run) -> None:
    (run.run_dir / "run.json").write_text("{ not json\n")
    before = run.state()
    line = _refused(cli(run.ws, run.store, "cancel", "--run-id", run.run_id), code=2)  # damaged store: 2
    assert "run.json" in line, line
    assert run.state() == before


def test_the_checks_do_not_refuse_a_healthy_run(run: Run) -> None:
    """The control: the same run, untouched, rewinds and resumes to the end."""
    run.allow.write_text("")
    assert cli(run.ws, run.store, "rewind", "--run-id", run.run_id, "--node", "change").returncode == 0
    assert (run.ws / "a.txt").read_text() == "the person's a\n" and not (run.ws / "b.txt").exists()
    assert (run.ws / "c.txt").read_text() == "the person's c\n"
    done = cli(run.ws, run.store, "resume", "--run-id", run.run_id)
    assert done.returncode == 0, done.stderr
