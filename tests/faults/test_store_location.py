"""The store is out of harm's way and found like git finds its repository (issue 11.5).

Real repositories, real subprocesses (the CLI): the default store lives in the repository's git
directory, so a node running `git clean -fdx` cannot touch it; it is found from any
subdirectory (and linked worktree); a store inside the working tree is refused unless the
user's own ignore rules exclude it; iterion never writes a .gitignore; a store from before
the move (``.iterion/`` at the repository root) keeps working without flags.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from tests.conftest import git, run_cli, write_bot

CLEANING = """
schema verdict:
  approved: bool

prompt gate_text:
  Ship it?

tool one:
  command: "printf 'one\\n' > one.txt; mkdir -p build; printf 'obj' > build/out.o"

tool clean:
  command: "git clean -fdxq"

tool two:
  command: "printf 'two\\n' > two.txt"

human gate:
  output: verdict
  instructions: gate_text

workflow cleaning:
  entry: one
  one -> clean
  clean -> two
  two -> gate
  gate -> done
"""

WRITE_AND_PARK = """
schema verdict:
  approved: bool

prompt gate_text:
  Keep it?

tool write:
  command: "printf 'made\\n' > made.txt"

human gate:
  output: verdict
  instructions: gate_text

workflow parked:
  entry: write
  write -> gate
  gate -> done
"""


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the .git directory included) -> sha256 of its bytes."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def gitignores(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".gitignore") if ".git" not in p.relative_to(root).parts[:1])


def inspect(cwd: Path, run_id: str, *extra: str) -> dict:  # type: ignore[type-arg]
    p = run_cli("inspect", "--run-id", run_id, "--json", *extra, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def test_git_clean_in_a_node_leaves_the_store_and_the_run_finishes_with_inspect_intact(tmp_path: Path,
                                                                                      ws: Path) -> None:
    bot = write_bot(tmp_path / "src", CLEANING)
    index = (ws / ".git" / "index").read_bytes()
    p = run_cli("run", str(bot), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    store = ws / ".git" / "iterion" / "store"
    assert json.loads(p.stdout)["stored_in"] == str(store.resolve() / "runs" / run_id)
    # the node's `git clean -fdx` removed the untracked files, and nothing of the store
    assert not (ws / "one.txt").exists() and not (ws / "build").exists() and (ws / "two.txt").exists()
    run_dir = store / "runs" / run_id
    for piece in ("run.json", "checkpoint.json", "events.jsonl", "track"):
        assert (run_dir / piece).exists(), piece
    detail = inspect(ws, run_id, "--events")
    assert detail["status"] == "paused_waiting_human" and detail["checkpoint_node"] == "gate"
    assert detail["executed"] == ["one:0", "clean:0", "two:0"]
    labels = [b["label"] for b in detail["boundaries"]]
    assert labels[:6] == ["pre:one:0", "nodes:one:0", "pre:clean:0", "nodes:clean:0", "pre:two:0", "nodes:two:0"]
    assert [e["type"] for e in detail["events"]].count("node_finished") == 3

    # the snapshots survived too: rewinding to `clean` brings back what it cleaned, byte for byte
    rw = run_cli("rewind", "--run-id", run_id, "--node", "clean", "--json", cwd=ws)
    assert rw.returncode == 0, rw.stderr
    files = json.loads(rw.stdout)["files"]
    assert sorted(files["restored"]) == ["build/out.o", "one.txt"] and files["removed"] == ["two.txt"]
    assert (ws / "one.txt").read_text() == "one\n" and (ws / "build" / "out.o").read_bytes() == b"obj"

    # the run replays the cleaning node (git clean -fdx again) and finishes
    p = run_cli("resume", "--run-id", run_id, "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    p = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert f"stored in: {store.resolve() / 'runs' / run_id}" in p.stderr
    detail = inspect(ws, run_id)
    assert detail["status"] == "finished" and detail["executed"][-1] == "gate:0"
    assert detail["boundaries"][-1]["label"] == "nodes:gate:0"
    assert (ws / ".git" / "index").read_bytes() == index
    assert gitignores(ws) == []


def test_the_store_is_found_from_a_subdirectory_and_a_linked_worktree(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", WRITE_AND_PARK)
    deep = ws / "a" / "b"
    deep.mkdir(parents=True)
    p = run_cli("run", str(bot), "--workspace", str(ws), "--json", cwd=deep)
    assert p.returncode == 4, p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    assert (ws / ".git" / "iterion" / "store" / "runs" / run_id / "run.json").is_file()
    assert not (deep / ".iterion").exists() and not (ws / ".iterion").exists()
    listed = run_cli("inspect", "--json", cwd=ws)
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
    git(ws, "worktree", "add", "-q", str(tmp_path / "linked"), "HEAD")
    for where in (deep, ws / "a", tmp_path / "linked"):
        listed = run_cli("inspect", "--json", cwd=where)
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == [run_id], where
    # ...and operated on from there: a rewind and a resume from the subdirectory
    rw = run_cli("rewind", "--run-id", run_id, "--node", "write", "--json", cwd=deep)
    assert rw.returncode == 0, rw.stderr
    assert json.loads(rw.stdout)["files"]["removed"] == ["made.txt"] and not (ws / "made.txt").exists()
    p = run_cli("resume", "--run-id", run_id, cwd=deep)
    assert p.returncode == 4, p.stderr
    p = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", cwd=deep)
    assert p.returncode == 0, p.stderr
    assert (ws / "made.txt").read_text() == "made\n"


def test_a_store_inside_the_workspace_is_refused_unless_the_user_ignores_it(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", WRITE_AND_PARK)
    (ws / "src").mkdir()
    (ws / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    git(ws, "add", "src/main.c")
    git(ws, "commit", "-q", "-m", "src")
    status = git(ws, "status", "--porcelain", "--untracked-files=all", "--ignored")
    before = tree(ws)
    for how in (("--store-dir", "src"), ("--store-dir", str(ws / "runs-here"))):
        p = run_cli("run", str(bot), *how, cwd=ws)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, p.stderr
        assert lines[0].startswith("error: the run store ") and "inside the working tree" in lines[0]
        assert ".git/info/exclude" in lines[0] and "drop --store-dir" in lines[0]
    p = run_cli("run", str(bot), cwd=ws / "src", env={"ITERION_STORE_DIR": "."})
    assert p.returncode == 2 and "is the run store itself" in p.stderr and "$ITERION_STORE_DIR" in p.stderr
    # refused before anything was written: not a file of the tree (or .git) changed
    assert tree(ws) == before
    assert git(ws, "status", "--porcelain", "--untracked-files=all", "--ignored") == status
    assert not (ws / "src" / ".gitignore").exists() and not (ws / "src" / "runs").exists()

    # the user's own ignore rule makes the same kind of placement acceptable, written as it was
    with open(ws / ".git" / "info" / "exclude", "a") as fh:
        fh.write("/iterion-runs/\n")
    p = run_cli("run", str(bot), "--store-dir", "iterion-runs", "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    assert json.loads(p.stdout)["stored_in"].startswith(str((ws / "iterion-runs").resolve()))
    # a store outside the working tree needs nothing
    p = run_cli("run", str(bot), "--store-dir", str(tmp_path / "elsewhere"), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    # iterion never wrote an ignore rule anywhere
    assert gitignores(ws) == [] and gitignores(tmp_path / "elsewhere") == []
    assert (ws / ".git" / "info" / "exclude").read_text().endswith("/iterion-runs/\n")
    assert git(ws, "status", "--porcelain", "--untracked-files=all") == "?? made.txt\n"


def test_a_store_from_before_the_move_still_lists_resumes_and_rewinds(tmp_path: Path, ws: Path) -> None:
    """The pre-move layout: ``.iterion/`` at the repository root, carrying the ``*`` .gitignore the
    pre-move iterion wrote into it, holding runs."""
    bot = write_bot(tmp_path / "src", WRITE_AND_PARK)
    legacy = ws / ".iterion"
    legacy.mkdir()
    (legacy / ".gitignore").write_text("# iterion's run store: never part of a workspace snapshot\n*\n")
    p = run_cli("run", str(bot), "--store-dir", ".iterion", "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    assert (legacy / "runs" / run_id / "run.json").is_file()

    # no flags from here on: found from the root and from a subdirectory
    (ws / "sub").mkdir()
    hints = []
    for where in (ws, ws / "sub"):
        listed = run_cli("inspect", "--json", cwd=where)
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
        hints.append(listed.stderr)
    # a one-time hint says where stores live now; the second command is quiet
    assert "using the existing run store" in hints[0] and ".git/iterion/store" in hints[0] and hints[1] == ""
    rw = run_cli("rewind", "--run-id", run_id, "--node", "write", "--json", cwd=ws / "sub")
    assert rw.returncode == 0, rw.stderr
    assert json.loads(rw.stdout)["files"]["removed"] == ["made.txt"] and not (ws / "made.txt").exists()
    p = run_cli("resume", "--run-id", run_id, cwd=ws)
    assert p.returncode == 4, p.stderr
    assert f"stored in: {legacy.resolve() / 'runs' / run_id}" in p.stderr
    p = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert inspect(ws, run_id)["status"] == "finished" and (ws / "made.txt").read_text() == "made\n"
    # a new run keeps using that store (one place for the project's runs), nothing moves into .git
    p = run_cli("run", str(bot), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    assert (legacy / "runs" / json.loads(p.stdout)["run_id"]).is_dir()
    assert not (ws / ".git" / "iterion" / "store").exists()


def test_a_copied_pre_move_store_keeps_working_where_it_is_found(tmp_path: Path, ws: Path) -> None:
    """A real store made elsewhere and copied in as ``.iterion/`` (the way a user carries a
    project's runs around) is found and read; its runs list and inspect."""
    bot = write_bot(tmp_path / "src", WRITE_AND_PARK)
    outside = tmp_path / "made-elsewhere"
    p = run_cli("run", str(bot), "--store-dir", str(outside), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    shutil.copytree(outside, ws / ".iterion")
    (ws / ".iterion" / ".gitignore").write_text("*\n")  # as the pre-move iterion left it
    listed = run_cli("inspect", "--json", cwd=ws)
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
    assert inspect(ws, run_id)["executed"] == ["write:0"]
