"""The workspace tools: confinement, edit_file's uniqueness, glob/grep/list_dir, and bash's
timeout (process group killed) and output cap."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from iterion.backends.claw.tools import OUTPUT_CAP, ToolError, Workspace
from iterion.store import RunStatus, Store

from .conftest import agent_bot, calls, events, final, launch, tool_errors, tool_results
from .scripted_server import ScriptedLLM


@pytest.fixture
def w(tmp_path: Path) -> Workspace:
    root = tmp_path / "w"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "a.py").write_text("def f():\n    return 1\n")
    (root / "src" / "b.py").write_text("x = 1\nx = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "out").symlink_to(tmp_path)
    return Workspace(root)


def test_edit_file_needs_one_exact_unique_occurrence(w: Workspace) -> None:
    with pytest.raises(ToolError, match="occurs 2 times"):
        w.call("edit_file", {"path": "src/b.py", "old": "x = 1", "new": "x = 2"})
    with pytest.raises(ToolError, match="does not occur"):
        w.call("edit_file", {"path": "src/b.py", "old": "y", "new": "z"})
    assert w.call("edit_file", {"path": "src/b.py", "old": "x = 1\nx = 1\n", "new": "x = 3\n"}) == "edited src/b.py"
    assert (w.root / "src" / "b.py").read_text() == "x = 3\n"


def test_confinement_and_git_dir(w: Workspace, tmp_path: Path) -> None:
    for path in ("../x", "/etc/passwd", "out/x", "src/../../x"):
        with pytest.raises(ToolError, match="outside the workspace"):
            w.call("write_file", {"path": path, "content": "x"})
    with pytest.raises(ToolError, match=r"is protected \(inside a git dir, .git/\)"):
        w.call("write_file", {"path": ".git/hooks/pre-commit", "content": "x"})
    with pytest.raises(ToolError, match="needs argument 'content'"):
        w.call("write_file", {"path": "a"})
    with pytest.raises(ToolError, match="takes no argument 'mode'"):
        w.call("read_file", {"path": "src/b.py", "mode": "r"})
    assert not (tmp_path / "x").exists()


def test_listing_tools(w: Workspace) -> None:
    assert w.call("list_dir", {}) == "out/\nsrc/"  # .git is not listed; the symlink is a dir entry
    assert w.call("glob", {"pattern": "**/*.py"}) == "src/b.py\nsrc/pkg/a.py"
    assert w.call("grep", {"pattern": r"return \d", "path": "src"}) == "src/pkg/a.py:2:    return 1"
    with pytest.raises(ToolError, match="relative glob"):
        w.call("glob", {"pattern": "../*"})


def test_bash_timeout_kills_the_process_group_and_output_is_capped(tmp_path: Path, ws: Path, store: Store,
                                                                   llm: ScriptedLLM) -> None:
    bot = agent_bot(tmp_path / "src", "openai")
    llm.add(calls(("bash", {"command": "sleep 60 & echo $! > child.pid; sleep 60", "timeout_s": 1}),
                  ("bash", {"command": "head -c 200000 /dev/zero | tr '\\\\0' a"})),
            final("ok"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    results = tool_results(llm.requests[1])
    timeout_id, big_id = list(results)
    assert tool_errors(llm.requests[1]) == {timeout_id}
    assert "timed out after 1s (the command's process group was killed)" in results[timeout_id]
    child = int((ws / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.1)
    assert not _alive(child)
    assert "bytes cut" in results[big_id] and len(results[big_id]) < OUTPUT_CAP + 200
    sizes = [e.payload["result_bytes"] for e in events(store, r.run_id, "tool_called")]
    assert sizes[1] < OUTPUT_CAP + 200


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its (gone) parent's reaper is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
