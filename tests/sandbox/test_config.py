"""How `sandbox:` and `--sandbox` resolve per node, what is refused (containers, per-host network
rules, a bad flag) and what bwrap is asked for (the argv a plan becomes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.sandbox import Role, RunSandbox, SandboxConfigError, resolve
from iterion.sandbox.bubblewrap import BubblewrapDriver
from iterion.sandbox.config import Mount


def test_precedence_flag_then_node_then_workflow() -> None:
    assert resolve(None, None).mode == "none"
    assert resolve(None, "auto").mode == "auto"
    assert resolve(None, "auto", "none").mode == "none"
    assert resolve(None, None, {"mode": "auto"}).source == "node"
    assert resolve("none", "auto", {"mode": "auto"}).mode == "none"
    assert resolve("auto", None, "none").mode == "auto" and resolve("auto", None).source == "flag"


@pytest.mark.parametrize("block, words", [
    ("inline", "container"),
    ({"image": "python:3.11"}, "container"),
    ({"mode": "auto", "image": "x"}, "image:"),
    ({"mode": "auto", "build": {"dockerfile": "Dockerfile"}}, "build:"),
    ({"mode": "auto", "post_create": "make"}, "post_create:"),
    ({"mode": "auto", "network": {"mode": "allowlist", "rules": ["github.com"]}}, "cannot filter by host"),
    ({"mode": "auto", "network": {"preset": "pypi"}}, "cannot filter by host"),
])
def test_what_this_engine_cannot_run_is_refused(block: object, words: str) -> None:
    with pytest.raises(SandboxConfigError) as err:
        resolve(None, block, where="workflow")
    assert words in err.value.message
    assert "sandbox: auto" in (err.value.hint or "") or "mode: open" in (err.value.hint or "")


def test_a_bad_flag_is_refused() -> None:
    with pytest.raises(SandboxConfigError, match="expected auto or none"):
        resolve("docker", None)


def test_network_and_mounts() -> None:
    assert not resolve(None, {"mode": "auto"}).network
    assert resolve(None, {"mode": "auto", "network": {"mode": "open"}}).network
    assert resolve(None, {"mode": "auto", "network": {"mode": "denylist"}}).network
    assert not resolve(None, {"mode": "auto", "network": {"mode": "allowlist"}}).network
    box = resolve(None, {"mode": "auto", "mounts": [".git:rw", "/opt/x:ro", "~/c"]})
    assert box.mounts == (Mount(".git", True), Mount("/opt/x", False), Mount("~/c", True))


def test_the_argv_keeps_the_workspace_writable_and_hides_the_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    store = ws / ".iterion"
    box = RunSandbox.for_workflow(ws, store, None, {"sandbox": "auto"}, {"t": {}}, driver=BubblewrapDriver())
    argv = box.wrap(["sh", "-c", "true"], "t", Role.TOOL)
    s = " ".join(argv)
    for part in ("--ro-bind / /", "--tmpfs /tmp", f"--bind {ws.resolve()} {ws.resolve()}", "--unshare-net",
                 "--unshare-pid", "--die-with-parent", f"--tmpfs {store.resolve()}", f"--remount-ro {store.resolve()}",
                 f"--chdir {ws.resolve()} -- sh -c true"):
        assert part in s, part
    # the store is hidden after the workspace is bound (a bind would uncover it)
    assert s.index(f"--bind {ws.resolve()} ") < s.index(f"--tmpfs {store.resolve()}")
    assert box.wrap(["true"], "unlisted", Role.TOOL)[0].endswith("bwrap")  # the workflow's sandbox applies
    unboxed = RunSandbox.for_workflow(ws, store, None, {}, {"t": {}})
    assert unboxed.wrap(["sh", "-c", "true"], "t", Role.TOOL) == ["sh", "-c", "true"] and not unboxed.active
