"""Write the golden files of the CURRENT format versions that are missing, from real runs.

    .venv/bin/python tests/golden/make_goldens.py          # adds missing v<N> goldens, prints them
    .venv/bin/python tests/golden/make_goldens.py --check  # lists what is missing, writes nothing

Run it after bumping a model's ``FORMAT_VERSION`` (``test_golden.py`` fails until the new
version has a golden). It drives the same scenarios the existing goldens came from, with the
code as it is now: a demo run paused at its gate, rewound by a rewind SIGKILLed right after its
commit point, resumed, answered and finished (in place); a worktree run paused at its gate,
pushed to an accepting and a rejecting remote, and rewound the same way; a control request,
an attachment; a tracker capture of names that are not UTF-8; the claw agent (against the
scripted LLM server, tests/claw/scripted_server.py) parked on ask_user in a git workspace that
pushes its checkpoints (the export's blob cache). Each document is copied as the
code wrote it. An existing golden is NEVER overwritten: a golden records what an older iterion
wrote, which is the point. A new format needs a registry entry and, here, the line that picks
its document out of the scenarios (``collect``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gitrefs.persist import VersionedModel  # noqa: E402
from tests.golden.registry import EVENT_LINE_VERSION, FORMATS, GOLDEN, Format  # noqa: E402

ENV = dict(os.environ, GIT_AUTHOR_NAME="iterion-goldens", GIT_AUTHOR_EMAIL="goldens@iterion.invalid",
           GIT_COMMITTER_NAME="iterion-goldens", GIT_COMMITTER_EMAIL="goldens@iterion.invalid",
           GIT_CONFIG_NOSYSTEM="1")
ENV.pop("ITERION_STORE_DIR", None)
ENV.pop("ITERION_TEST_KILL_AT", None)
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_PUSH_CHECKPOINTS",
             "ITERION_PUSH_EVERY"):
    ENV.pop(_key, None)


def sh(*args: Any, cwd: Path, ok: tuple[int, ...] = (0, 4), extra: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          env={**ENV, **(extra or {})})
    if ok and proc.returncode not in ok:
        raise SystemExit(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def iterion(*args: Any, cwd: Path, ok: tuple[int, ...] = (0, 4), extra: dict[str, str] | None = None) -> str:
    return sh(sys.executable, "-m", "cli.main", *args, cwd=cwd, ok=ok, extra={"PYTHONPATH": str(REPO), **(extra or {})})


def git_repo(path: Path, file: str) -> Path:
    path.mkdir(parents=True)
    sh("git", "init", "-q", "-b", "main", cwd=path)
    (path / file).write_text("x\n")
    sh("git", "add", "-A", cwd=path)
    sh("git", "commit", "-qm", "init", cwd=path)
    return path


WORKTREE_BOT = """schema ok:
  approved: bool

prompt ask:
  Go on?

tool touch:
  command: "echo hi > b.txt && echo done"

tool again:
  command: "echo more >> b.txt && echo done"

human gate:
  output: ok
  instructions: ask

workflow wt:
  entry: touch
  worktree: auto
  touch -> again
  again -> gate
  gate -> done
"""


CLAW_BOT = """schema result:
  summary: string

prompt coder_system:
  You maintain a tiny project in the workspace. Use the tools, ask when unsure, then answer
  with the JSON the instructions ask for.

agent coder:
  backend: claw
  provider: openai
  model: "golden-model"
  system: coder_system
  user: "Fix the greeting in greet.txt."
  output: result
  interaction: human

workflow claw_golden:
  entry: coder
  coder -> done
"""


def scenarios(work: Path) -> dict[str, list[tuple[str, bytes]]]:
    """format name -> [(variant, document bytes)] (variant "" is the plain ``v<N>`` golden)."""
    out: dict[str, list[tuple[str, bytes]]] = {}

    def take(name: str, data: bytes | Path, variant: str = "") -> None:
        out.setdefault(name, []).append((variant, data.read_bytes() if isinstance(data, Path) else data))

    def take_json(name: str, obj: Any, variant: str = "") -> None:
        take(name, (json.dumps(obj, indent=2) + "\n").encode(), variant)

    # -- in place: the demo, paused, rewound (killed at the commit point, then finished), finished
    ws = git_repo(work / "ws", "README")
    store = work / "store"
    for f in ("demo.bot", "demo.script.yaml"):
        shutil.copy(REPO / "fixtures" / "demo" / f, work / f)
    run = json.loads(iterion("run", work / "demo.bot", "--workspace", ws, "--store-dir", store, "--json", cwd=ws))["run_id"]
    rd = store / "runs" / run
    take("checkpoint", rd / "checkpoint.json")
    take("interaction", next((rd / "interactions").glob("*.json")))
    iterion("rewind", "--run-id", run, "--node", "write", "--store-dir", store, cwd=ws, ok=(),
            extra={"ITERION_TEST_KILL_AT": "rewind-intent:1"})
    intent = json.loads((rd / "rewind-intent.json").read_bytes())
    take("rewind_intent", rd / "rewind-intent.json")
    take_json("track_planned_restore", intent["files"]["tracked"])
    iterion("rewind", "--run-id", run, "--store-dir", store, cwd=ws)
    take("rewind_undo", rd / "rewind-undo.json")  # the finished rewind's record for --undo
    iterion("resume", "--run-id", run, "--store-dir", store, "--json", cwd=ws)
    iterion("resume", "--run-id", run, "--store-dir", store, "--answer", "approved=true", "--answer", "note=ship it",
            "--json", cwd=ws)
    take("run", rd / "run.json")
    take("event_line", rd / "events.jsonl")
    take("artifact", next((rd / "artifacts").rglob("*.json")))
    take("checkpoint", next((rd / "turns").rglob("*.json")), "turn")
    # the tracker's files, found the way the engine finds them (its layout may change)
    from iterion.engine.versioning import TrackVersioning, open_run_versioning
    from iterion.store import Store

    s = Store(store)
    versioning = open_run_versioning(s, s.load_run(run), start=False, watch=False)
    assert isinstance(versioning, TrackVersioning)  # an in-place run: its tracker's own files
    track = versioning.tracker.store
    versioning.close()
    state_path = track.run_dir / "state.json"
    state = json.loads(state_path.read_bytes())
    take("track_state", state_path)
    take("track_state_log", track.run_dir / "state.log")  # the commits after state.json, one a line
    take("track_statcache", track.run_dir / "statcache.json")
    take_json("track_snapshot_record", state["snapshots"][state["head"]])
    take_json("track_chain_link", state["chain"][0])

    def manifest(digest: str) -> bytes:
        return bytes(track.objects.read(digest))

    # every snapshot, state.json and state.log folded together by the tracker's own reader
    loaded = track.load_state()
    assert loaded is not None
    for snap in loaded.snapshots.values():  # a delta manifest, and the full one it is based on
        body = json.loads(manifest(snap.manifest))
        if body.get("base") and not json.loads(manifest(body["base"])).get("base"):
            take("track_manifest", manifest(body["base"]))
            take("track_manifest", manifest(snap.manifest), "delta")
            break

    # -- control request and attachment, through their writers
    from iterion.engine.control import Action, write_request

    write_request(s, run, Action.PAUSE, "paused by operator (iterion pause)")
    take("control_request", rd / "control.json")
    (work / "spec.md").write_text("# spec\n")
    s.attachments(run).stage("spec", work / "spec.md")
    take("attachment", next((rd / "attachments").glob("*.json")))

    # -- names that are not UTF-8, captured by the real tracker
    from gitrefs.boundary import BoundaryKind, BoundaryLabel
    from workspacetrack.tracker import Tracker

    nu = work / "nonutf8"
    (nu / "ws").mkdir(parents=True)
    raw = os.fsencode(nu / "ws")
    (nu / "ws" / "plain.txt").write_text("a\n")
    os.makedirs(raw + b"/d\xe9")
    Path(os.fsdecode(raw + b"/d\xe9/caf\xe9.txt")).write_bytes(b"x\n")
    os.symlink(b"caf\xe9.txt", raw + b"/d\xe9/link")
    tracker = Tracker(nu / "track", nu / "ws", run)
    rec = tracker.capture(BoundaryLabel(BoundaryKind.NODES, "n", 0))
    take("track_manifest", bytes(tracker.store.objects.read(rec.manifest)), "nonutf8")
    take("track_statcache", tracker.store.run_dir / "statcache.json", "nonutf8")
    tracker.close()

    # -- a worktree run: gitrefs records, private index state, pushes, a revert plan
    from gitrefs import RunRefs
    from gitrefs.errors import PushFailed

    repo = git_repo(work / "repo", "a.txt")
    (work / "wt.bot").write_text(WORKTREE_BOT)
    wrun = json.loads(iterion("run", work / "wt.bot", "--workspace", repo, "--json", cwd=repo))["run_id"]
    gitdir = repo / ".git"
    take("gitrefs_run", gitdir / "iterion" / "runs" / wrun / "run.json")
    take("gitrefs_index_state", next(gitdir.glob(f"worktrees/*/iterion/runs/{wrun}/index-state.json")))
    wrd = gitdir / "iterion" / "store" / "runs" / wrun
    worktree = Path(json.loads((wrd / "run.json").read_bytes())["worktree"]["path"])
    good, bad = work / "good.git", work / "bad.git"
    sh("git", "init", "-q", "--bare", good, cwd=work)
    sh("git", "init", "-q", "--bare", bad, cwd=work)
    hook = bad / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'rejected by policy' >&2\nexit 1\n")
    hook.chmod(0o755)
    refs = RunRefs(worktree, wrun)
    refs.push(str(good), "nodes:touch:0")
    try:
        refs.push(str(bad), "nodes:again:0")
    except PushFailed:
        pass
    pushes = gitdir / "iterion" / "runs" / wrun / "pushes.json"
    take("gitrefs_push_log", pushes)
    take_json("gitrefs_push_attempt", json.loads(pushes.read_bytes())["attempts"][0])
    iterion("rewind", "--run-id", wrun, "--node", "again", cwd=repo, ok=(), extra={"ITERION_TEST_KILL_AT": "rewind-intent:1"})
    wintent = json.loads((wrd / "rewind-intent.json").read_bytes())
    take("rewind_intent", wrd / "rewind-intent.json", "worktree")
    take_json("gitrefs_revert_plan", wintent["files"]["revert"])
    iterion("rewind", "--run-id", wrun, cwd=repo)
    take("rewind_undo", wrd / "rewind-undo.json", "worktree")

    # -- the claw agent parked on ask_user (its conversation saved with the pending call), in a
    # git workspace pushing its checkpoints: the pause exports the tracker's snapshot (gitblobs.json)
    from tests.claw.scripted_server import ScriptedLLM

    cws = git_repo(work / "cws", "greet.txt")
    (cws / "greet.txt").write_text("helo\n")
    remote = work / "checkpoints.git"
    sh("git", "init", "-q", "--bare", remote, cwd=work)
    (work / "claw.bot").write_text(CLAW_BOT)
    steps = [{"text": "Let me look at the workspace first.", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
             {"tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "greeting: ?\n"}}]},
             {"text": "Two spellings are possible.",
              "tool_calls": [{"name": "ask_user", "arguments": {"question": "Which greeting should I use?"}},
                             {"name": "read_file", "arguments": {"path": "greet.txt"}}]}]
    with ScriptedLLM(steps) as llm:
        crun = json.loads(iterion("run", work / "claw.bot", "--workspace", cws, "--store-dir", store,
                                  "--push-checkpoints", remote, "--json", cwd=cws,
                                  extra={"OPENAI_BASE_URL": llm.openai_url, "ANTHROPIC_BASE_URL": llm.url,
                                         # priced: each call charges the store's daily spend counter
                                         "ITERION_MODEL_PRICES": json.dumps({"golden-model": [1, 2]})}))
    assert crun["status"] == "paused_waiting_human", crun
    crd = store / "runs" / crun["run_id"]
    conv_path = next((crd / "conversations").glob("*.json"))
    take("claw_conversation", conv_path)
    take_json("claw_pending_call", json.loads(conv_path.read_bytes())["pending"])
    take("track_blob_cache", crd / "track" / "gitblobs.json")
    take("spend_day", next((store / "spend").glob("*.json")))
    return out


def current_version(fmt: Format) -> int:
    cls = fmt.cls()
    if not issubclass(cls, VersionedModel):  # the event line: versioned in the registry, not in the model
        return EVENT_LINE_VERSION
    return int(cls.FORMAT_VERSION)


def target(fmt: Format, variant: str) -> Path:
    suffix = ".jsonl" if fmt.lines else ".json"
    return GOLDEN / fmt.name / f"v{current_version(fmt)}{'-' + variant if variant else ''}{suffix}"


def missing() -> list[Format]:
    return [f for f in FORMATS if not target(f, "").exists()]


def main(argv: list[str]) -> int:
    todo = missing()
    if not todo:
        print("every registered format has a golden for its current version")
        return 0
    for fmt in todo:
        print(f"missing: {target(fmt, '').relative_to(REPO)} ({fmt.model})")
    if "--check" in argv:
        return 1
    with tempfile.TemporaryDirectory(prefix="iterion-goldens-") as tmp:
        docs = scenarios(Path(tmp))
    for fmt in todo:
        found = docs.get(fmt.name)
        if not found:
            print(f"no scenario writes {fmt.name}: add one to collect it in {Path(__file__).name}", file=sys.stderr)
            continue
        for variant, data in found:
            path = target(fmt, variant)
            if not path.exists():  # never overwrite: a golden records what an older iterion wrote
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
