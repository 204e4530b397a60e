"""Building real runs for the rewind tests without the engine: a real store, real boundaries
(gitrefs for worktree runs), a checkpoint written the way the engine writes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from iterion.engine.versioning import open_versioning
from iterion.store import AnchorReason, Checkpoint, RunDoc, RunStatus, Store, WorkspaceMode, WorktreeInfo, new_id

from ..conftest import cli_json as root_cli_json
from ..conftest import git, run_cli

FLOW = """\
## the bot-author loop of the rewind tests
schema verdict:
  approved: bool

schema draft_out:
  text: string

prompt draft_user:
  Write the release note.

prompt gate_text:
  Approve the setup?

tool setup:
  command: "printf 'base\\n' > a.txt"

human gate:
  output: verdict
  instructions: gate_text

agent draft:
  backend: "script"
  output: draft_out
  user: draft_user

tool apply:
  command: "printf '%s\\n' '{{outputs.draft.text}}' > c.txt && printf 'applied\\n' >> a.txt && grep -q good c.txt"

workflow loop:
  entry: setup
  setup -> gate
  gate -> draft when approved
  gate -> fail when not approved
  draft -> apply
  apply -> done
"""

Step = tuple[str, Callable[[Path], None] | None, dict]


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def cli(repo: Path, store: Path, *args: str) -> tuple[int, str, str]:
    """`iterion ARGS --store-dir STORE` run in ``repo``: (exit code, stdout, stderr)."""
    proc = run_cli(*args, cwd=repo, store=store)
    return proc.returncode, proc.stdout, proc.stderr


def cli_json(repo: Path, store: Path, *args: str) -> dict[str, Any]:
    return root_cli_json(*args, cwd=repo, store=store)


def fake_run(store: Store, repo: Path, steps: list[Step], *, status: RunStatus = RunStatus.FAILED_RESUMABLE,
             source: str = FLOW, restart: str | None = None, worktree: bool = True,
             bot_dir: Path | None = None, debris: Callable[[Path], None] | None = None) -> RunDoc:
    """A run whose nodes executed ``steps`` (node, effect on the workspace, output) in order."""
    bot = (bot_dir or repo) / "flow.bot"
    bot.write_text(source)
    doc = RunDoc(id=new_id(), name="loop-test-run", workflow_name="loop", file_path=str(bot), status=status,
                 workflow_source=source, workflow_sources={"flow.bot": source}, workspace_dir=str(repo),
                 workspace_mode=WorkspaceMode.WORKTREE if worktree else WorkspaceMode.IN_PLACE,
                 worktree=WorktreeInfo(path=str(repo), branch="main", base_commit=head(repo)) if worktree else None)
    store.create_run(doc)
    v = open_versioning(worktree=worktree, workspace=repo, run_dir=store.run_dir(doc.id), run_id=doc.id,
                        start=True, watch=False)
    cp = Checkpoint(run_id=doc.id)
    try:
        for node, effect, output in steps:
            it = cp.node_visits.get(node, 0)
            v.mark(BoundaryLabel(BoundaryKind.PRE, node, it))
            if effect is not None:
                effect(repo)
            v.mark(BoundaryLabel(BoundaryKind.NODES, node, it))
            cp.record_executed(node, it)
            cp.set_output(node, output)
        cp.restart_node = restart
        if debris is not None and restart:
            # the restart node started, wrote some files and failed (the engine's failure path)
            it = cp.node_visits.get(restart, 0)
            v.mark(BoundaryLabel(BoundaryKind.PRE, restart, it))
            debris(repo)
            v.mark(BoundaryLabel(BoundaryKind.FAIL, restart, it))
            cp.anchor_reason = AnchorReason.FAILURE
        elif status is RunStatus.FAILED_RESUMABLE and restart:
            v.mark(BoundaryLabel(BoundaryKind.FAIL, restart, cp.node_visits.get(restart, 0)))
    finally:
        v.close()
    store.save_checkpoint(doc.id, cp)
    return store.load_run(doc.id)


def write(path: str, text: str) -> Callable[[Path], None]:
    def effect(root: Path) -> None:
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return effect


def append(path: str, text: str) -> Callable[[Path], None]:
    def effect(root: Path) -> None:
        with open(root / path, "a") as fh:
            fh.write(text)
    return effect


def loop_steps() -> list[Step]:
    return [("setup", write("a.txt", "base\n"), {"exit_code": 0}),
            ("gate", None, {"approved": True}),
            ("draft", None, {"text": "bad"}),
            ("apply", lambda r: (write("c.txt", "bad\n")(r), append("a.txt", "applied\n")(r)), {"exit_code": 0})]
