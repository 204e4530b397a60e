"""Fixtures of the claw tests: the scripted LLM server (both wire formats), a store, a workspace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.result import RunResult
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.store import Event, Store

from ..conftest import write_bot
from .scripted_server import ScriptedLLM


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLM]:
    with ScriptedLLM([]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        # what would choose the backend or the model for a node naming none (iterion/backends/choice.py)
        for var in ("ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_SCRIPT_FILE",
                    "ITERION_DEFAULT_SUPERVISOR_MODEL"):
            monkeypatch.delenv(var, raising=False)
        yield server


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    """Each scenario runs over both wire formats."""
    return str(request.param)


def launch(store: Store, path: Path, workspace: Path, **kw: Any) -> RunResult:
    kw.setdefault("watch", False)
    return launch_run(store, path, LaunchOptions(workspace=workspace, **kw))


def resume(store: Store, run_id: str, **kw: Any) -> RunResult:
    kw.setdefault("watch", False)
    return resume_run(store, run_id, ResumeOptions(**kw))


def events(store: Store, run_id: str, type: str | None = None) -> list[Event]:
    return [e for e in store.read_events(run_id) if type is None or e.type == type]


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    """tool-use id -> the result text a recorded request carried (either wire format)."""
    out: dict[str, str] = {}
    for m in request["body"].get("messages", []):
        if m.get("role") == "tool":
            out[m["tool_call_id"]] = m["content"]
        elif m.get("role") == "user" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    content = b["content"]
                    out[b["tool_use_id"]] = content if isinstance(content, str) else json.dumps(content)
    return out


def tool_errors(request: dict[str, Any]) -> set[str]:
    """The tool-use ids whose result is an error in a recorded request."""
    errs: set[str] = set()
    for tid, text in tool_results(request).items():
        if text.startswith("error:"):
            errs.add(tid)
    return errs


def agent_bot(directory: Path, provider: str, *, tools: str = "", extra: str = "", workflow_extra: str = "",
              output: bool = True, head: str = "", gate: bool = False) -> Path:
    """A one-agent workflow (``gate``: a human review gate after it, so the run parks there and
    can be rewound)."""
    lines = [head, "schema result:", "  summary: string", "", "agent coder:", "  backend: claw",
             '  model: "test-model"', f"  provider: {provider}", '  user: "Fix the greeting in greet.txt."']
    if output:
        lines.append("  output: result")
    if tools:
        lines.append(f"  tools: {tools}")
    if extra:
        lines += ["  " + ln for ln in extra.strip().splitlines()]
    lines += ["", "workflow w:", "  entry: coder"]
    if workflow_extra:
        lines += ["  " + ln for ln in workflow_extra.strip().splitlines()]
    if gate:
        lines[1:1] = ["schema ok:", "  approved: bool", "", "human review:", "  output: ok",
                      '  instructions: "Look at the change."', ""]
        lines += ["  coder -> review", "  review -> done", ""]
    else:
        lines += ["  coder -> done", ""]
    return write_bot(directory, "\n".join(lines))


def final(summary: str = "done") -> dict[str, Any]:
    return {"text": json.dumps({"summary": summary})}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}
