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
