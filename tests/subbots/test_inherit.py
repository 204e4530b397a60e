"""A child run is never less restricted than its parent: it runs under the parent's permission
layers, ``--sandbox`` and daily-cap override, at launch and when a resume of the parent (with its
own overrides) reattaches it (docs/technical/subbots.md)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.permissions import flags_layer, layer_to_json
from iterion.store import RunStatus, Store
from tests.claw.scripted_server import ScriptedLLM

SECRET = "the-secret-value-3b1f"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLM]:
    with ScriptedLLM([]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        for var in ("ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_SCRIPT_FILE"):
            monkeypatch.delenv(var, raising=False)
        yield server


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the workspace and outside /tmp (the sandbox's /tmp is private)."""
    base = Path.home() / ".cache" / "iterion-subbot-tests" / uuid.uuid4().hex
    base.mkdir(parents=True)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _launch(store: Store, path: Path, ws: Path, **kw: Any) -> Any:
    return launch_run(store, path, LaunchOptions(workspace=ws, watch=False, **kw))


def _resume(store: Store, run_id: str, **kw: Any) -> Any:
    return resume_run(store, run_id, ResumeOptions(watch=False, **kw))


def _child(store: Store, parent: str) -> str:
    return store.load_run(parent).subbot_children["kid"]


def _deny(rule: str, source: str = "launch") -> dict[str, Any]:
    return layer_to_json(flags_layer(source, None, deny=[rule]))


AGENT = '''agent {name}:
  backend: claw
  model: "test-model"
  provider: openai
  user: "Read the key."
'''


def _reads_secret() -> list[dict[str, Any]]:
    """The scripted model: read secrets/key.txt, then answer."""
    return [{"tool_calls": [{"name": "read_file", "arguments": {"path": "secrets/key.txt"}}]}, {"text": "done"}]


def test_a_launch_deny_rule_refuses_the_childs_agent_as_it_refuses_the_parents(
        project: Path, store: Store, llm: ScriptedLLM) -> None:
    (project / "secrets").mkdir()
    (project / "secrets" / "key.txt").write_text(SECRET)
    (project / "bots" / "child.bot").write_text("vars:\n  task: string\n" + AGENT.format(name="reader")
                                                + "workflow child:\n  entry: reader\n  reader -> done\n")
    (project / "p.bot").write_text(AGENT.format(name="own") + 'subbot kid:\n  source: "bots/child.bot"\n'
                                   '  with: { task: "t" }\nworkflow p:\n  entry: own\n  own -> kid\n  kid -> done\n')
    llm.add(*_reads_secret(), *_reads_secret())
    r = _launch(store, project / "p.bot", project, permission=_deny("read_file(secrets/**)"))
    assert r.status is RunStatus.FINISHED, r.error
    child = _child(store, r.run_id)

    def decisions(run_id: str) -> list[dict[str, Any]]:
        return [{k: e.payload.get(k) for k in ("tool", "decision", "rule", "source", "resolved")}
                for e in store.read_events(run_id) if e.type == "permission_decided"]

    refused = {"tool": "read_file", "decision": "deny", "rule": "read_file(secrets/**)", "source": "launch",
               "resolved": "secrets/key.txt"}
    assert decisions(r.run_id) == [refused]
    assert decisions(child) == [refused]  # the parent's rule, decided the same way in the child
    assert store.load_run(child).options["permission_layers"] == [_deny("read_file(secrets/**)")]
    # the refusal reached each model as the tool's error; the key's bytes reached neither
    assert len(llm.requests) == 4
    assert all(SECRET not in json.dumps(req["body"]) for req in llm.requests)


TOOL_CHILD = '''vars:
  task: string
tool escape:
  command: "printf x > {target} 2>&1 && echo wrote || echo refused"
workflow child:
  entry: escape
  escape -> done
'''


def test_a_child_of_a_sandboxed_launch_runs_sandboxed(project: Path, store: Store, outside: Path) -> None:
    assert shutil.which("bwrap"), "this test needs bubblewrap: apt-get install bubblewrap (.ci/run installs it)"
    target = outside / "escaped.txt"
    (project / "bots" / "child.bot").write_text(TOOL_CHILD.format(target=target))
    own = TOOL_CHILD.format(target=outside / "own.txt").split("tool ", 1)[1].split("workflow", 1)[0]
    (project / "p.bot").write_text(f'tool {own}subbot kid:\n  source: "bots/child.bot"\n  with: {{ task: "t" }}\n'
                                   'workflow p:\n  entry: escape\n  escape -> kid\n  kid -> done\n')
    r = _launch(store, project / "p.bot", project, sandbox="auto")
    assert r.status is RunStatus.FINISHED, r.error
    child = _child(store, r.run_id)
    cp, parent_cp = store.load_checkpoint(child), store.load_checkpoint(r.run_id)
    # the child's tool is refused exactly as the parent's own is
    assert parent_cp is not None and parent_cp.outputs["escape"]["stdout"] == "refused\n"
    assert cp is not None and cp.outputs["escape"]["stdout"] == "refused\n"
    assert not target.exists() and not (outside / "own.txt").exists()  # nothing escaped either sandbox
    assert store.load_run(child).options["sandbox"]["flag"] == "auto"
    assert store.load_run(child).options["sandbox"]["mode"] == "auto"
    # the same child without the flag writes there: what the sandbox stopped was real
    r2 = _launch(store, project / "p.bot", project)
    assert r2.status is RunStatus.FINISHED, r2.error
    assert target.read_text() == "x"


def test_a_child_of_a_sandboxed_subbot_node_runs_sandboxed_without_any_flag(
        project: Path, store: Store, outside: Path) -> None:
    assert shutil.which("bwrap"), "this test needs bubblewrap: apt-get install bubblewrap (.ci/run installs it)"
    target = outside / "escaped.txt"
    (project / "bots" / "child.bot").write_text(TOOL_CHILD.format(target=target))
    (project / "p.bot").write_text('subbot kid:\n  source: "bots/child.bot"\n  with: { task: "t" }\n'
                                   'workflow p:\n  sandbox: auto\n  entry: kid\n  kid -> done\n')
    r = _launch(store, project / "p.bot", project)
    assert r.status is RunStatus.FINISHED, r.error
    child = _child(store, r.run_id)
    assert store.load_checkpoint(child).outputs["escape"]["stdout"] == "refused\n"  # type: ignore[union-attr]
    assert not target.exists()


def test_a_resume_of_the_parent_gives_its_overrides_to_the_reattached_child(project: Path, store: Store) -> None:
    assert shutil.which("bwrap"), "this test needs bubblewrap: apt-get install bubblewrap (.ci/run installs it)"
    launch_rule = _deny("read_file(secrets/**)")
    r = _launch(store, project / "parent.bot", project, permission=launch_rule, model="m1")
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    child = _child(store, r.run_id)
    assert store.load_run(child).options["permission_layers"] == [launch_rule]
    assert store.load_run(child).options.get("model") == "m1"

    resume_rule = _deny("bash", "resume")
    done = _resume(store, r.run_id, answers={"ok": True}, permission=resume_rule, sandbox="auto", model="m2",
                   backend="script", max_daily_cost_usd=7.5)
    assert done.status is RunStatus.FINISHED, done.error
    assert _child(store, r.run_id) == child  # reattached, not relaunched
    doc = store.load_run(child)
    assert doc.status is RunStatus.FINISHED
    assert doc.options["permission_layers"] == [launch_rule, resume_rule]  # the parent's, in its order
    assert doc.options["sandbox"]["flag"] == "auto"
    assert (doc.options.get("model"), doc.options.get("backend")) == ("m2", "script")
    resumed = [e.payload for e in store.read_events(child) if e.type == "run_resumed"][-1]
    assert resumed["daily_cap_usd"] == 7.5 and resumed["sandbox"]["flag"] == "auto"
    assert (resumed["model"], resumed["backend"]) == ("m2", "script")


def test_a_rule_given_to_the_parents_resume_answers_the_childs_permission_question(
        project: Path, store: Store, llm: ScriptedLLM) -> None:
    (project / "notes.txt").write_text("hello\n")
    (project / "bots" / "child.bot").write_text("vars:\n  task: string\n" + AGENT.format(name="reader")
                                                + "workflow child:\n  entry: reader\n  reader -> done\n")
    (project / "p.bot").write_text('subbot kid:\n  source: "bots/child.bot"\n  with: { task: "t" }\n'
                                   'workflow p:\n  entry: kid\n  kid -> done\n')
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}, {"text": "done"})
    ask = layer_to_json(flags_layer("launch", "ask"))
    r = _launch(store, project / "p.bot", project, permission=ask)
    # the launch's mode asks, in the child too: both park on the child's permission question
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    assert r.pending is not None and r.pending["permission"]["tool"] == "read_file"
    child = _child(store, r.run_id)
    assert store.load_run(child).status is RunStatus.PAUSED_WAITING_HUMAN

    allow = layer_to_json(flags_layer("resume", None, allow=["read_file(notes.txt)"]))
    done = _resume(store, r.run_id, permission=allow)  # no answer: the new rule decides
    assert done.status is RunStatus.FINISHED, done.error
    decided = [e.payload for e in store.read_events(child) if e.type == "permission_decided"]
    assert [(d["decision"], d["source"]) for d in decided] == [("ask", "launch"), ("allow", "resume")]
    assert store.load_run(child).options["permission_layers"] == [ask, allow]
    assert len(llm.requests) == 2
