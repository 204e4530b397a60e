"""The one opener (iterion/store/opener.py): --nats beats $ITERION_NATS_URL beats the files."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store.opener import NatsUrlError, nats_url, open_store
from tests.natsserver import NatsServer


def test_precedence_flag_then_env_then_files() -> None:
    env = {"ITERION_NATS_URL": "nats://env:4222"}
    assert nats_url("nats://flag:4222", env) == "nats://flag:4222"
    assert nats_url(None, env) == "nats://env:4222"
    assert nats_url(None, {}) is None
    for off in ("off", "OFF", "", "  "):
        assert nats_url(off, env) is None  # --nats off: the files, whatever the environment says
    assert nats_url(None, {"ITERION_NATS_URL": "off"}) is None
    assert nats_url(" nats://a:1 , tls://b:2 ", {}) == "nats://a:1,tls://b:2"


@pytest.mark.parametrize("bad", ["http://h:4222", "nats://", "nats://h:99999", "nats://h:4222/path", "h:4222",
                                 "nats://a:1,,nats://b:2", "nats://h:4222?x=1"])
def test_a_bad_url_is_refused_naming_its_source(bad: str) -> None:
    with pytest.raises(NatsUrlError) as info:
        nats_url(bad, {})
    assert info.value.message.startswith("--nats ") and "nats://127.0.0.1:4222" in (info.value.hint or "")
    with pytest.raises(NatsUrlError, match=r"^\$ITERION_NATS_URL "):
        nats_url(None, {"ITERION_NATS_URL": bad})


def test_open_store_gives_files_or_jetstream(nats_server: NatsServer, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ITERION_NATS_URL", raising=False)
    monkeypatch.setenv("ITERION_NATS_PREFIX", "opener1")
    files = open_store(tmp_path / "s", cwd=tmp_path)
    assert not files.shared and files.root == tmp_path / "s"
    shared = open_store(tmp_path / "s", nats=nats_server.url, cwd=tmp_path)
    try:
        assert shared.shared and shared.root == tmp_path / "s" and "prefix opener1" in shared.where()
    finally:
        shared.close()
    monkeypatch.setenv("ITERION_NATS_PREFIX", "bad prefix")
    from iterion.store.errors import StoreError

    with pytest.raises(StoreError, match="ITERION_NATS_PREFIX"):
        open_store(tmp_path / "s", nats=nats_server.url, cwd=tmp_path)


def test_inspect_on_files_never_imports_the_nats_client(tmp_path: Path) -> None:
    from tests.cli.test_startup import _modules_after

    modules = _modules_after("from cli.main import main\nmain()", ["inspect", "--store-dir", str(tmp_path / "s")])
    assert "cli.inspect_cmd" in modules and not [m for m in modules if m == "nats" or m.startswith("nats.")]


def test_printed_commands_name_the_shared_store(nats_server: NatsServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.parked import resume_command, store_args

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ITERION_NATS_URL", raising=False)
    monkeypatch.setenv("ITERION_NATS_PREFIX", "opener2")
    store = open_store(tmp_path / "s", nats=nats_server.url, cwd=tmp_path)
    try:
        args = store_args(store)
        assert args == ["--nats", nats_server.url, "--store-dir", str(tmp_path / "s")]
        assert f"--nats {nats_server.url}" in resume_command("r1", None, None, args)
        monkeypatch.setenv("ITERION_NATS_URL", nats_server.url)  # implied by the environment: not repeated
        assert store_args(store) == ["--store-dir", str(tmp_path / "s")]
    finally:
        store.close()


def test_inspect_on_jetstream_loads_no_document_model(nats_server: NatsServer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The run list on JetStream reads summaries only: neither typer's pydantic coercion (--nats is
    answered by cli/startup.py plain_inspect) nor the document models load; its output is typer's."""
    import json
    import os
    import subprocess
    import sys

    from iterion.store import RunDoc, new_id
    from tests.cli.test_startup import _TYPER_ONLY, _modules_after
    from tests.conftest import REPO_ROOT

    monkeypatch.delenv("ITERION_NATS_URL", raising=False)
    monkeypatch.setenv("ITERION_NATS_PREFIX", "opener3")
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO_ROOT)}
    store = open_store(tmp_path / "s", nats=nats_server.url, cwd=tmp_path, prefix="opener3")
    try:
        rid = store.create_run(RunDoc(id=new_id(), name="listed", workflow_name="wf", workspace_dir="/w")).id
    finally:
        store.close()
    argv = ["iterion", "inspect", "--nats", nats_server.url, "--store-dir", str(tmp_path / "s")]
    outs = []
    for code in ("from cli.main import main\nmain()", _TYPER_ONLY):
        proc = subprocess.run([sys.executable, "-c", f"import sys\nsys.argv = {[*argv, '--json']!r}\n{code}"],
                              cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append([{**r, "age": None} for r in json.loads(proc.stdout)])  # (two processes a second apart)
    assert outs[0] == outs[1] and [r["id"] for r in outs[0]] == [rid]
    modules = _modules_after("from cli.main import main\nmain()", argv[1:], cwd=tmp_path)
    assert "nats" in modules and "cli.inspect_cmd" in modules
    for heavy in ("pydantic", "iterion.store.run_doc", "iterion.store.checkpoint", "iterion.store.events",
                  "iterion.budget"):
        assert heavy not in modules, heavy
