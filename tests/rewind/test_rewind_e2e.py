"""The bot-author loop through the CLI, in subprocesses, on real repositories:
run -> pause (a person edits) -> failure -> edit the .bot -> rewind --auto -> resume --force."""

from __future__ import annotations

from pathlib import Path

from ..conftest import git
from .rewind_runs import cli, cli_json

from iterion.store import Store

FLOW = """\
## the bot-author loop: node 3's prompt is what the author iterates on
schema verdict:
  approved: bool

schema draft_out:
  note: string

prompt draft_user:
  Write the release note.

prompt gate_text:
  Approve the setup?

tool setup:
  command: "printf 'base\\n' > a.txt && printf 'b\\n' > b.txt"

human gate:
  output: verdict
  instructions: gate_text

agent draft:
  backend: "script"
  output: draft_out
  user: draft_user
  publish: release_note

tool apply:
  command: "printf '%s\\n' '{{outputs.draft.note}}' > c.txt && printf 'applied\\n' >> a.txt{COMMIT} && grep -q good c.txt"

workflow loop:
  entry: setup{WORKTREE}
  setup -> gate
  gate -> draft when approved
  gate -> fail when not approved
  draft -> apply
  apply -> done
"""

COMMIT = " && git add c.txt a.txt && git commit -q -m 'apply: the run commits its work'"


def answer(note: str) -> str:
    return f'draft:\n  "*": {{output: {{note: "{note}"}}}}\n'


def setup_project(repo: Path, *, worktree: bool) -> None:
    text = FLOW.replace("{WORKTREE}", "\n  worktree: auto" if worktree else "")
    text = text.replace("{COMMIT}", COMMIT if worktree else "")
    (repo / "flow.bot").write_text(text)
    (repo / "flow.script.yaml").write_text(answer("bad"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the bot")


def first_attempt(repo: Path, store: Path) -> tuple[str, Path]:
    """Launch, pause at the gate (a person edits meanwhile), resume into the failure."""
    launched = cli_json(repo, store, "run", "flow.bot")
    assert launched["status"] == "paused_waiting_human", launched
    run_id = launched["run_id"]
    ws = Path(launched["workspace"])
    # during the pause: a person edits an unrelated tracked file and creates a new one
    (ws / "README.md").write_text("hello\nedited by a person during the pause\n")
    (ws / "notes.txt").write_text("a person's new file\n")
    failed = cli_json(repo, store, "resume", "--run-id", run_id, "--answer", "approved=true")
    assert failed["status"] == "failed_resumable" and failed["checkpoint_node"] == "apply", failed
    assert (ws / "c.txt").read_text() == "bad\n" and (ws / "a.txt").read_text() == "base\napplied\n"
    return run_id, ws


def edit_prompt(repo: Path) -> None:
    bot = repo / "flow.bot"
    bot.write_text(bot.read_text().replace("Write the release note.", "Write a release note that is good."))
    (repo / "flow.script.yaml").write_text(answer("good"))


def replayed_nodes(store: Path, run_id: str) -> list[str]:
    events = Store(store).read_events(run_id)
    last_rewind = max(i for i, e in enumerate(events) if e.type == "run_rewound")
    return [e.node for e in events[last_rewind:] if e.type == "node_started"]


def test_in_place_bot_author_loop(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    setup_project(repo, worktree=False)
    run_id, ws = first_attempt(repo, store)
    assert ws == repo
    edit_prompt(repo)

    code, out, err = cli(repo, store, "rewind", "--run-id", run_id, "--auto")
    assert code == 0, err
    assert "tombstoned artifacts: release_note v1 (kept on disk)" in out
    # what --auto detected is printed first, before the result
    assert out.index("prompt draft_user") < out.index("rewound run")
    assert "impacts draft" in out and f"rewound run {run_id}: apply -> draft" in out
    # the person's work survives; what node 3 and 4 produced is back to its state before node 3
    assert (repo / "README.md").read_text() == "hello\nedited by a person during the pause\n"
    assert (repo / "notes.txt").read_text() == "a person's new file\n"
    assert (repo / "a.txt").read_text() == "base\n" and (repo / "b.txt").read_text() == "b\n"
    assert not (repo / "c.txt").exists()
    assert "Write a release note that is good." in (repo / "flow.bot").read_text()  # the source is protected

    # the edit is still a source change: a plain resume is refused, --force replays 3 and 4 only
    code, _, err = cli(repo, store, "resume", "--run-id", run_id)
    assert code != 0 and "changed" in err and "Traceback" not in err
    done = cli_json(repo, store, "resume", "--run-id", run_id, "--force")
    assert done["status"] == "finished", done
    assert replayed_nodes(store, run_id) == ["draft", "apply"]
    assert (repo / "c.txt").read_text() == "good\n" and (repo / "a.txt").read_text() == "base\napplied\n"
    assert (repo / "notes.txt").exists()
    # the superseded artifact stays readable beside the replay's new version
    arts = Store(store).artifacts(run_id)
    assert arts.versions("release_note") == [1, 2]
    assert arts.read("release_note", 1).value == {"note": "bad"} and arts.read("release_note", 2).value == {"note": "good"}
    cp = Store(store).load_checkpoint(run_id)
    assert cp is not None and cp.tombstoned_artifacts == {"release_note": [1]}


def test_worktree_bot_author_loop(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    setup_project(repo, worktree=True)
    run_id, ws = first_attempt(repo, store)
    assert ws != repo and (ws / ".git").exists()
    run_commit = git(ws, "rev-parse", "HEAD").strip()
    assert "apply: the run commits its work" in git(ws, "log", "--format=%s")
    # after the failure, before the rewind: untracked work the run never recorded
    (ws / "scratch.txt").write_text("triage notes\n")
    edit_prompt(repo)

    out = cli_json(repo, store, "rewind", "--run-id", run_id, "--auto")
    assert out["to_node"] == "draft" and out["dropped_nodes"] == ["draft", "apply"]
    files = out["files"]
    assert files["mechanism"] == "gitrefs" and files["scope"] == "full" and files["reverted"]
    # a revert, not a reset: the run's own commit is still in git log, under the revert commit
    log = git(ws, "log", "--format=%H %s").splitlines()
    assert log[0].split()[0] == files["revert_commit"]
    assert any(line.startswith(run_commit) for line in log)
    # the bank holds the pre-rewind state, uncommitted and untracked work included
    bank = files["backup_ref"]
    assert bank.startswith(f"refs/iterion/runs/{run_id}/rewind/draft/")
    assert git(ws, "show", f"{bank}:scratch.txt") == "triage notes\n"
    assert git(ws, "show", f"{bank}:notes.txt") == "a person's new file\n"
    assert "edited by a person" in git(ws, "show", f"{bank}:README.md")
    assert git(ws, "show", f"{bank}:c.txt") == "bad\n"
    # `full` reverts the whole tree to what draft started from: the pause-time edits were part of
    # it (the resume captured them before draft ran) and stay; the post-failure scratch file
    # matched neither side of the recorded range, so it is reported as overwritten
    assert (ws / "notes.txt").exists() and "edited by a person" in (ws / "README.md").read_text()
    assert files["overwritten"] == ["scratch.txt"] and not (ws / "scratch.txt").exists()
    assert (ws / "a.txt").read_text() == "base\n" and not (ws / "c.txt").exists()
    # the run_rewound event names the git side of the restore
    ev = [e for e in Store(store).read_events(run_id) if e.type == "run_rewound"][-1].payload
    assert ev["files_revert_commit"] == files["revert_commit"] and ev["files_backup_ref"] == bank
    assert ev["files_ref"] == f"refs/iterion/runs/{run_id}/pre/draft/0"

    done = cli_json(repo, store, "resume", "--run-id", run_id, "--force")
    assert done["status"] == "finished", done
    assert replayed_nodes(store, run_id) == ["draft", "apply"]
    final = Store(store).load_run(run_id).final_commit
    assert not ws.exists() and final  # finished: the worktree is removed, its commits stay
    assert git(repo, "show", f"{final}:c.txt") == "good\n"
