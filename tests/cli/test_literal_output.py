"""Terminal output never interprets user text (issue 10, point 2), as real subprocesses.

Node names that are emoji codes (`ok`, `a`, `fire`, `smile` make boundary labels like
`pre:ok:0`), instructions with brackets and `:warning:`, a tool whose stderr holds `[/]` and
`[bold]x[/bold]`, file paths with both: every command prints them byte-for-byte, and the exit
codes are the README's (run/resume: 0 finished, 1 failed, 4 paused, 5 failed_resumable).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import make_checkout, run_cli, write_bot

INSTRUCTIONS = "Deploy to [prod]? :warning:"
STDERR_LINE = "FAILED tests/test_x.py::test_y - AssertionError: [/] [bold]x[/bold] :fire:"
HOT_FILE = "out/[red]hot[bold] :fire:.txt"
NODES = ("ok", "a", "fire", "smile")
# what Rich made of the text above: emoji for :ok: :a: :fire: :smile: :warning:
RENDERED = ("🆗", "🅰", "🔥", "😄", "⚠")

WORKFLOW = f"""
    schema approval:
      approved: bool

    prompt ask:
      {INSTRUCTIONS}

    tool ok:
      command: "echo '{{}}'"

    tool a:
      command: "echo '{{}}'"

    tool fire:
      command: "mkdir -p out && touch '{HOT_FILE}' && echo '{{}}'"

    tool smile:
      command: "echo '{{}}'"

    human gate:
      output: approval
      instructions: ask

    tool boom:
      command: "echo '{STDERR_LINE}' >&2; exit 1"

    workflow w:
      entry: ok
      ok -> a
      a -> fire
      fire -> smile
      smile -> gate
      gate -> boom
      boom -> done
"""


class Out:
    """A finished CLI call: exit code and both streams as the raw bytes the terminal got."""

    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def has(self, text: str, stream: str = "both") -> bool:
        data = {"out": self.out, "err": self.err, "both": self.out + b"\n" + self.err}[stream]
        return text.encode() in data

    def assert_literal(self) -> None:
        text = (self.out + self.err).decode("utf-8")  # strict: nothing mangled into invalid bytes
        for glyph in RENDERED:
            assert glyph not in text, f"{glyph!r} rendered from user text:\n{text}"
        assert "Traceback" not in text and "internal error" not in text, text
        assert "\x1b[" not in text, "colour on a pipe"


def cli(*args: str, cwd: Path, store: Path) -> Out:
    # no NO_COLOR: no colour on a pipe even so
    return Out(run_cli(*args, cwd=cwd, store=store, env={"NO_COLOR": None}, timeout=180, text=False))


def _run_to_gate(tmp_path: Path) -> tuple[Path, Path, str, Out]:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", WORKFLOW)
    p = cli("run", str(bot), cwd=ws, store=store)
    listing = json.loads(cli("inspect", "--json", cwd=ws, store=store).out)
    return ws, store, listing[0]["id"], p


def test_run_progress_and_summary_print_names_and_instructions_literally(tmp_path: Path) -> None:
    _, _, run_id, p = _run_to_gate(tmp_path)
    assert p.code == 4, p.err  # paused (answers needed)
    p.assert_literal()
    for node in NODES:
        assert p.has(f"▶ {node} (tool, iteration 0)\n", "err") and p.has(f"✓ {node} ", "err")
    assert p.has(f"  gate asks: {INSTRUCTIONS}\n", "err")
    assert p.has(f"run {run_id} (", "err") and p.has("): paused_waiting_human\n", "err")


def test_inspect_list_detail_and_events_print_user_text_literally(tmp_path: Path) -> None:
    ws, store, run_id, _ = _run_to_gate(tmp_path)

    listing = cli("inspect", cwd=ws, store=store)
    assert listing.code == 0, listing.err
    listing.assert_literal()
    header, row = listing.out.decode().splitlines()
    assert header.split() == ["ref", "id", "name", "status", "workflow", "age"]  # ref: the short unique prefix
    assert row.split()[1:5] == [run_id, json.loads(cli("inspect", "--json", cwd=ws, store=store).out)[0]["name"],
                               "paused_waiting_human", "w"]

    detail = cli("inspect", "--run-id", run_id, "--boundaries", cwd=ws, store=store)  # every boundary
    assert detail.code == 0, detail.err
    detail.assert_literal()
    labels = " ".join(f"pre:{n}:0 nodes:{n}:0" for n in NODES)
    assert detail.has(f"boundaries: {2 * len(NODES) + 2}: {labels} pre:gate:0 pause:gate:0\n", "out")
    assert detail.has("executed: ok:0 a:0 fire:0 smile:0\n", "out")
    assert detail.has(f"  asks: {INSTRUCTIONS}\n", "out")

    events = cli("inspect", "--run-id", run_id, "--events", "--all", cwd=ws, store=store)  # boundaries too
    assert events.code == 0, events.err
    events.assert_literal()
    for node in NODES:
        assert events.has(f'"label": "pre:{node}:0"', "out") and events.has(f'"label": "nodes:{node}:0"', "out")
    started = [ln.split() for ln in events.out.decode().splitlines() if " node_started " in ln]
    assert [cols[3] for cols in started] == [*NODES, "gate"]  # the node column, as named


def test_stderr_with_markup_fails_resumable_with_exit_5_and_inspect_shows_it(tmp_path: Path) -> None:
    ws, store, run_id, _ = _run_to_gate(tmp_path)
    p = cli("resume", "--run-id", run_id, "--answer", "approved=true", cwd=ws, store=store)
    assert p.code == 5, p.err  # failed_resumable, not 3 (internal error)
    p.assert_literal()
    assert p.has("↻ resuming at gate\n", "err")
    assert p.has(f"✗ boom TOOL_FAILED_PERMANENT: tool boom exited with status 1: {STDERR_LINE}", "err")
    assert p.has("): failed_resumable\n", "err")
    doc = json.loads((store / "runs" / run_id / "run.json").read_text())
    assert doc["status"] == "failed_resumable" and STDERR_LINE in doc["error"]

    detail = cli("inspect", "--run-id", run_id, "--events", cwd=ws, store=store)
    assert detail.code == 0, detail.err  # it crashed on the `[/]` before
    detail.assert_literal()
    assert detail.has(f"failure: TOOL_FAILED_PERMANENT: tool boom exited with status 1: {STDERR_LINE}", "out")
    as_json = cli("inspect", "--run-id", run_id, "--json", cwd=ws, store=store)
    assert as_json.code == 0 and STDERR_LINE in json.loads(as_json.out)["error"]
    listing = cli("inspect", cwd=ws, store=store)
    assert listing.code == 0 and listing.has(f"{run_id}  ", "out") and listing.has("failed_resumable", "out")


def test_rewind_and_resume_print_nodes_and_paths_literally(tmp_path: Path) -> None:
    ws, store, run_id, _ = _run_to_gate(tmp_path)
    assert (ws / HOT_FILE).exists()
    failed = cli("resume", "--run-id", run_id, "--answer", "approved=true", cwd=ws, store=store)
    assert failed.code == 5, failed.err

    r = cli("rewind", "--run-id", run_id, "--node", "fire", cwd=ws, store=store)
    assert r.code == 0, r.err
    r.assert_literal()
    assert r.has(f"rewound run {run_id}: boom -> fire\n", "out")
    assert r.has("dropped outputs: ", "out")
    dropped = next(ln for ln in r.out.decode().splitlines() if ln.startswith("dropped outputs: "))
    assert set(dropped.removeprefix("dropped outputs: ").split(", ")) >= {"fire", "smile", "gate"}
    assert r.has(f"  removed {HOT_FILE}\n", "out")  # the path, brackets and :fire: as they are
    assert not (ws / HOT_FILE).exists()

    again = cli("resume", "--run-id", run_id, cwd=ws, store=store)
    assert again.code == 4, again.err  # replays fire and smile, then the gate asks again
    again.assert_literal()
    assert again.has("↻ resuming at fire\n", "err") and again.has("▶ smile (tool, iteration ", "err")
    assert again.has(f"  gate asks: {INSTRUCTIONS}\n", "err")
    assert (ws / HOT_FILE).exists()


def test_refs_list_of_a_worktree_run_prints_labels_literally(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", """
        tool ok:
          command: "echo '{}'"

        tool fire:
          command: "echo hot > f.txt && echo '{}'"

        workflow w:
          entry: ok
          worktree: auto
          ok -> fire
          fire -> done
    """)
    p = cli("run", str(bot), "--no-auto-merge", cwd=ws, store=store)
    assert p.code == 0, p.err
    p.assert_literal()
    (run,) = json.loads(cli("inspect", "--json", cwd=ws, store=store).out)
    refs = run_cli("refs", "list", "--run-id", run["id"], "--repo", str(ws), cwd=ws, timeout=60, text=False)
    assert refs.returncode == 0, refs.stderr
    labels = [ln.split(b"\t")[0].decode() for ln in refs.stdout.splitlines()]
    assert labels == ["pre:ok:0", "nodes:ok:0", "pre:fire:0", "nodes:fire:0"]
