"""`iterion remote runs ...` against a real server: output conventions, the recovery hint, exit codes."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime

from cli import events_view
from cli.remote_cmd import remote_words
from iterion.store import Store
from iterion.store.events import RUN_WORKSPACE_CHECKPOINT, RUN_WORKSPACE_CHECKPOINT_FAILED
from tests.conftest import run_cli
from tests.server.conftest import Server, wait_status


def remote(server: Server, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"ITERION_SERVER": server.url, "ITERION_SERVER_TOKEN": server.token if token is None else token}
    return run_cli("remote", "runs", *args, cwd=server.project, env=env)


def test_remote_verbs_hint_and_exit_codes(server: Server) -> None:
    c = server.client()
    run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
    wait_status(c, run_id, {"paused_waiting_human"})
    # the engine's push appends these (issue 15 point 1); here the real event log records them
    log = Store(server.store).events(run_id)
    ref = f"refs/iterion/runs/{run_id}/checkpoints/1"
    now = datetime.now(UTC).isoformat()
    log.append(RUN_WORKSPACE_CHECKPOINT, payload={"ref": ref, "commit": "a" * 40, "remote": "origin", "time": now})
    log.append(RUN_WORKSPACE_CHECKPOINT_FAILED, payload={"ref": ref.replace("/1", "/2"), "remote": "origin",
                                                         "error": "remote unwritable", "time": now})

    listed = remote(server, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)["runs"]] == [run_id]

    got = remote(server, "get", run_id[:10])
    assert got.returncode == 0, got.stderr
    assert f"{run_id} (" in got.stdout and "paused_waiting_human" in got.stdout
    assert f"workspace checkpoint: {ref} at {'a' * 40}" in got.stdout  # the last SUCCESS, not the failure
    assert f"git fetch origin {ref}" in got.stdout and f"git rev-parse FETCH_HEAD  # must print {'a' * 40}" in got.stdout

    commits = remote(server, "commits", run_id)
    assert commits.returncode == 0
    assert commits.stdout.splitlines()[0] == "commit list unavailable: in_place"
    assert f"git fetch origin {ref}" in commits.stdout

    events = remote(server, "events", run_id, "--follow", "--all")  # a parked run: prints all, then ends
    assert events.returncode == 0, events.stderr
    assert "human_input_requested" in events.stdout and "run_workspace_checkpoint" in events.stdout
    assert f"run {run_id}: paused_waiting_human" in events.stderr

    preview = remote(server, "rewind", run_id, "--node", "write", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert preview.stdout.startswith(f"dry run: would rewind run {run_id}: approve -> write")

    # a rewind and its undo over HTTP print what the local verb prints; the undo restores the files
    draft = server.project / "demo-out" / "draft.md"
    made = draft.read_text()
    rewound = remote(server, "rewind", run_id, "--node", "write")
    assert rewound.returncode == 0, rewound.stderr
    assert "  removed demo-out/draft.md" in rewound.stdout and not draft.exists()
    assert f"undo this rewind with: iterion remote runs rewind {run_id} --undo" in rewound.stdout
    offered = remote(server, "get", run_id)
    assert f"last rewind (to write) can be undone: iterion remote runs rewind {run_id} --undo" in offered.stdout
    undone = remote(server, "rewind", run_id[:10], "--undo")
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.startswith(f"undid the rewind of run {run_id} to write: checkpoint back at approve, "
                                    "status paused_waiting_human")
    assert "  put back demo-out/draft.md" in undone.stdout and draft.read_text() == made
    again = remote(server, "rewind", run_id, "--undo")
    assert again.returncode == 2 and "has no rewind to undo" in again.stderr
    # the server's hint names the local verb; said by `remote` it names the remote one
    assert "hint: `iterion remote runs events --run-id RUN` shows its rewinds" in again.stderr

    missing = remote(server, "get", "0123456789abcdef")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith("error: run 0123456789abcdef not found")
    assert "hint: list runs with `iterion remote runs list`\n" in missing.stderr and "--store-dir" not in missing.stderr
    wrong = remote(server, "list", token="not-the-token-0000000000")
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: missing or wrong token")
    bad = remote(server, "resume", run_id, "--answer", "approved=maybe", "--answer", "note=x")
    assert bad.returncode == 2 and bad.stderr.splitlines()[0] == "error: answer approved='maybe' is not a bool (true/false)"

    done = remote(server, "resume", run_id, "--answer", "approved=true", "--answer", "note=ok", "--max-duration", "4h")
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} (" in done.stdout and "finished" in done.stdout
    assert server.run_json(run_id)["budget"]["max_duration_s"] == 14400.0
    refused = remote(server, "cancel", run_id)
    assert refused.returncode == 2 and refused.stderr.startswith("error: ")  # a refusal: exit 2


def test_remote_speaks_the_local_dialect(server: Server) -> None:
    """Issue 34 point 4: `--run-id` as well as the positional id, `inspect --events`'s filters and
    bookkeeping filter, no silent cut of a long line, hints naming `remote` verbs."""
    c = server.client()
    run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
    wait_status(c, run_id, {"paused_waiting_human"})
    long_text = "x" * 300 + " THE-END"
    Store(server.store).events(run_id).append("warning", node="write", payload={"message": long_text})

    # --run-id wherever the positional id is, the same answer
    for verb in ("get", "events", "commits"):
        by_arg = remote(server, verb, run_id[:10])
        by_opt = remote(server, verb, "--run-id", run_id[:10])
        assert by_arg.returncode == by_opt.returncode == 0, by_opt.stderr
        assert by_arg.stdout == by_opt.stdout, verb
    preview = remote(server, "rewind", "--run-id", run_id, "--node", "write", "--dry-run")
    assert preview.returncode == 0 and preview.stdout.startswith(f"dry run: would rewind run {run_id}")
    both = remote(server, "get", run_id, "--run-id", "someotherrun")
    assert both.returncode == 2 and both.stderr.startswith("error: two runs named")
    neither = remote(server, "events")
    assert neither.returncode == 2 and neither.stderr.startswith("error: no run named")
    assert "iterion remote runs list" in neither.stderr

    # the bookkeeping filter: hidden by default, shown with --all or when its type is named
    def types(*args: str) -> list[str]:
        p = remote(server, "events", "--run-id", run_id, *args)
        assert p.returncode == 0, p.stderr
        return [ln.split()[2] for ln in p.stdout.splitlines()]

    default, everything = types(), types("--all")
    assert "checkpoint_written" in everything and "checkpoint_written" not in default
    assert not set(default) & set(events_view.BOOKKEEPING)
    assert set(types("--type", "checkpoint_written")) == {"checkpoint_written"}
    assert types("--follow") == default  # the live view filters alike
    local = run_cli("inspect", "--run-id", run_id, "--events", cwd=server.project, env={"ITERION_STORE_DIR": None})
    assert [ln.split()[2] for ln in local.stdout.splitlines() if ln[:4].strip().isdigit()] == default
    by_node = remote(server, "events", run_id, "--node", "write", "--json")
    assert {e["node"] for e in json.loads(by_node.stdout)} == {"write"}
    typo = remote(server, "events", run_id, "--type", "node_fail")
    assert typo.returncode == 2 and typo.stderr.startswith("error: --type node_fail is not an event type")
    assert "did you mean node_failed" in typo.stderr

    # no silent cut: into a pipe the line is whole; fitted to a terminal it says so with `…`
    whole = remote(server, "events", run_id, "--type", "warning", "--node", "write")
    assert whole.stdout.rstrip().endswith('THE-END"}'), whole.stdout
    env = {"ITERION_SERVER": server.url, "ITERION_SERVER_TOKEN": server.token, "COLUMNS": "80"}
    narrow = run_cli("remote", "runs", "events", run_id, "--type", "warning", "--node", "write", cwd=server.project, env=env)
    [line] = narrow.stdout.splitlines()
    assert len(line) == 80 and line.endswith("…")


def test_remote_words_name_the_remote_verbs() -> None:
    assert remote_words("finish it with `iterion rewind --run-id R`") == \
        "finish it with `iterion remote runs rewind --run-id R`"
    assert remote_words("`iterion resume --run-id R --force-stale`") == "`iterion remote runs resume --run-id R --force-stale`"
    assert remote_words("`iterion inspect --run-id R --events --all`") == "`iterion remote runs events --run-id R --all`"
    assert remote_words("see `iterion inspect --run-id R`") == "see `iterion remote runs get --run-id R`"
    assert remote_words("(`iterion inspect` lists them)") == "(`iterion remote runs list` lists them)"
    assert remote_words("fix it first (`iterion validate a.bot`)") == "fix it first (`iterion validate a.bot`)"
