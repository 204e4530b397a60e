"""Every node kind executed through the engine API: outputs, events, artifacts, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.store import RunStatus, Store

from .conftest import events, labels, launch, write_bot

# routing, nodes and budgets: versioned in memory (the mechanisms have their own tests)
pytestmark = pytest.mark.usefixtures("memory_versioning")

LINEAR = """
schema sum:
  total: int
  greeting: string

schema verdict:
  approved: bool
  summary: string

tool edit:
  command: "echo '{{vars.word}}' >> notes.txt && echo edited"

compute count:
  output: sum
  expr:
    total: "length(outputs.edit.stdout) * 2"
    greeting: "concat('hi ', vars.word)"

agent review:
  backend: "script"
  output: verdict
  user: "Review {{outputs.count.greeting}} ({{outputs.count.total}})"
  publish: review_report

workflow linear:
  vars:
    word: string = "river"
  entry: edit
  edit -> count
  count -> review
  review -> done
"""


def test_linear_tool_compute_agent_checkpoints_after_every_node(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", LINEAR, {"review": {"*": {"output": {"approved": True, "summary": "fine"},
                                                                  "tokens_in": 7, "tokens_out": 3, "cost_usd": 0.5}}})
    seen: list[tuple[str | None, list[str]]] = []

    def listener(e) -> None:  # read the checkpoint on disk each time one is written
        if e.type == "checkpoint_written":
            cp = store.load_checkpoint(store.list_runs()[-1].id)
            seen.append((cp.restart_node, sorted(cp.outputs)))

    result = launch_run(store, bot, LaunchOptions(workspace=ws, vars={"word": "delta"}, watch=False), listener=listener)

    assert result.status is RunStatus.FINISHED, result.error
    assert (ws / "notes.txt").read_text() == "delta\n"
    # text stdout: `result` (trimmed) beside stdout/stderr/exit_code (dsl.md §2.7, §9)
    assert result.outputs["edit"] == {"result": "edited", "stdout": "edited\n", "stderr": "", "exit_code": 0}
    assert result.outputs["count"] == {"total": 14, "greeting": "hi delta"}
    assert result.outputs["review"] == {"approved": True, "summary": "fine"}
    # the checkpoint after each node names the next node and holds every output so far
    assert seen[0] == ("edit", [])
    assert seen[1] == ("count", ["edit"])
    assert seen[2] == ("review", ["count", "edit"])
    assert seen[-1] == (None, ["count", "edit", "review"])
    cp = store.load_checkpoint(result.run_id)
    assert [(e.node, e.iteration) for e in cp.executed] == [("edit", 0), ("count", 0), ("review", 0)]
    assert cp.accounting.tokens == 10 and cp.accounting.cost_usd == 0.5 and cp.accounting.iterations == 3
    assert cp.vars == {"word": "delta"}
    assert cp.artifact_versions == {"review_report": 1}
    art = store.artifacts(result.run_id).latest("review_report")
    assert art is not None and art.value == {"approved": True, "summary": "fine"} and art.node == "review"
    types = [e.type for e in events(store, result.run_id)]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert types.count("node_started") == 3 and types.count("node_finished") == 3
    assert "artifact_published" in types
    assert labels(store, result.run_id) == ["pre:edit:0", "nodes:edit:0", "pre:count:0", "nodes:count:0",
                                            "pre:review:0", "nodes:review:0"]
    doc = store.load_run(result.run_id)
    assert doc.status is RunStatus.FINISHED and doc.failure_code is None
    assert doc.workflow_source and "workflow linear" in doc.workflow_source


def test_tool_failure_is_typed_with_exit_code_and_output(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        tool build:
          command: "echo compiling; echo 'missing header' >&2; exit 3"

        workflow b:
          entry: build
          build -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE
    assert r.failure_code == "TOOL_FAILED_PERMANENT"
    assert "status 3" in r.error and "missing header" in r.error
    failed = events(store, r.run_id, "node_failed")[0]
    assert failed.payload["exit_code"] == 3 and failed.payload["stdout"] == "compiling\n"
    cp = store.load_checkpoint(r.run_id)
    assert cp.restart_node == "build" and cp.anchor_reason.value == "failure"
    assert labels(store, r.run_id) == ["pre:build:0", "fail:build:0"]


def test_tool_script_with_language_and_json_output(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema probe:
          healthy: bool
          n: int

        tool check:
          language: python
          output: probe
          script:
            import json, os
            print(json.dumps({"healthy": True, "n": len(os.environ["ITERION_RUN_ID"])}))

        tool shell:
          language: sh
          script:
            echo n={{outputs.check.n}}

        workflow s:
          entry: check
          check -> shell
          shell -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["check"] == {"healthy": True, "n": 32}
    assert r.outputs["shell"]["stdout"] == "n=32\n"


def test_tool_output_not_matching_schema_is_a_warning(tmp_path: Path, ws: Path, store: Store) -> None:
    """dsl.md 2.7: "a mismatch (fields missing or of the wrong type) is a `tool_output_mismatch`
    warning event naming them, after which the node goes on with the fields present"."""
    bot = write_bot(tmp_path / "src", """
        schema probe:
          healthy: bool

        tool check:
          command: `echo '{"healthy": "yes"}'`
          output: probe

        workflow s:
          entry: check
          check -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["check"] == {"healthy": "yes"}
    (warned,) = [e for e in events(store, r.run_id, "warning") if e.payload.get("code") == "tool_output_mismatch"]
    assert warned.node == "check" and warned.payload["missing"] == [] and "healthy" in warned.payload["message"]


def test_agent_output_not_matching_schema_is_schema_validation(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema verdict:
          approved: bool

        agent review:
          backend: "script"
          output: verdict
          user: "review"

        workflow s:
          entry: review
          review -> done
    """, {"review": {"*": {"output": {"approved": "maybe"}}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "SCHEMA_VALIDATION"
    assert store.load_checkpoint(r.run_id).restart_node == "review"


def test_compute_runtime_error_is_expression_failed(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema n:
          v: int

        compute divide:
          output: n
          expr:
            v: "vars.a / vars.b"

        workflow c:
          vars:
            a: int = 1
            b: int = 0
          entry: divide
          divide -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "EXPRESSION_FAILED"
    assert "divide" in r.error


def test_unresolvable_references_stay_as_written(tmp_path: Path, ws: Path, store: Store) -> None:
    # dsl.md 5.3 "a missing (null) value leaves the {{...}} marker in place" (a command), "null for
    # missing" (a script); 5.2 "An unresolvable reference ... stays in the text as written" (a with
    # value with text around it), `loop.N.previous_output...` "renders empty on the first round";
    # a with value that is one reference and nothing else is the value itself: null (3.6, 4)
    bot = write_bot(tmp_path / "src", """
        tool t:
          command: "echo {{input.missing}} {{vars.v}}"

        tool s:
          language: python
          script: |
            null = None
            print({{outputs.t.nothing}} is None)

        tool u:
          command: "echo {{input.a}} {{input.b}}"

        workflow c:
          vars:
            v: string = "v1"
          entry: t
          t -> s
          s -> u with { a: "{{outputs.t.nothing}}", b: "x{{outputs.t.nothing}}y{{loop.l.previous_output.f}}", _session_id: "{{outputs.t._session_id}}" }
          u -> u as l(1)
          u -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["t"]["stdout"] == "{{input.missing}} v1\n"
    assert r.outputs["s"]["stdout"] == "True\n"
    assert r.outputs["u"]["stdout"] == "{{input.a}} x{{outputs.t.nothing}}y\n"  # input.a is null
    from iterion.engine.declared import with_value

    # a value that does not exist is absent data (None), not the marker text, for any key
    tpl = "{{outputs.t._session_id}}"
    assert with_value(tpl, {"outputs": {"t": {}}}, {}, "t", "with _session_id on edge t -> u") is None
    assert with_value(tpl, {"outputs": {"t": {}}}, {}, "t", "with sid on edge t -> u") is None
    assert with_value("{{outputs.later.v}}", {"outputs": {}}, {}, "t", "with v on edge t -> u") is None


def test_with_mapping_becomes_the_targets_input(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema target:
          path: string

        tool first:
          command: "echo one"

        tool second:
          input: target
          command: "echo got {{input.path}} > got.txt && cat got.txt"

        workflow w:
          entry: first
          first -> second with { path: "{{outputs.first.stdout}}" }
          second -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["second"]["stdout"] == "got one\n\n"  # the value is one quoted word, newline kept
    assert store.load_checkpoint(r.run_id).node_inputs["second"] == {"path": "one\n"}


def test_builtin_fail_terminal_ends_failed_keeping_the_checkpoint(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema v:
          ok: bool

        compute check:
          output: v
          expr:
            ok: "false"

        workflow f:
          entry: check
          check -> done when ok
          check -> fail when not ok
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED and r.failure_code == "WORKFLOW_FAILED"
    assert store.load_checkpoint(r.run_id) is not None
    assert json.loads(store.paths(r.run_id).run_json.read_text())["status"] == "failed"


def test_vars_presets_and_their_refusals(tmp_path: Path, ws: Path, store: Store) -> None:
    import pytest

    from iterion.engine.errors import EngineError

    bot = write_bot(tmp_path / "src", """
        vars:
          n: int = 1
          name: string

        presets:
          big:
            n: 40

        tool show:
          command: "echo {{vars.n}} {{vars.name}}"

        workflow v:
          entry: show
          show -> done
    """)
    r = launch(store, bot, ws, vars={"name": "x"}, preset="big")
    assert r.outputs["show"]["stdout"] == "40 x\n"
    r = launch(store, bot, ws, vars={"name": "y", "n": "7"}, preset="big")  # --var beats the preset
    assert r.outputs["show"]["stdout"] == "7 y\n" and store.load_run(r.run_id).vars == {"n": 7, "name": "y"}
    runs_before = len(store.list_runs())
    with pytest.raises(EngineError, match="var name has no default"):
        launch(store, bot, ws)
    # "a failed coercion keeps the raw value with a warning" (dsl.md 2.2)
    kept = launch(store, bot, ws, vars={"name": "z", "n": "many"})
    assert kept.outputs["show"]["stdout"] == "many z\n"
    assert [e.payload["message"] for e in events(store, kept.run_id, "warning")] == [
        "--var n='many' is not a valid int; kept as text"]
    runs_before = len(store.list_runs())
    with pytest.raises(EngineError, match="unknown preset 'huge'"):
        launch(store, bot, ws, vars={"name": "z"}, preset="huge")
    assert len(store.list_runs()) == runs_before  # refused before anything was created


def test_attachments_are_staged_and_readable_from_templates(tmp_path: Path, ws: Path, store: Store) -> None:
    import hashlib

    import pytest

    from iterion.engine.errors import EngineError

    bot = write_bot(tmp_path / "src", """
        attachments:
          spec: file
            required: true

        tool read:
          command: "cat {{attachments.spec}} && echo {{attachments.spec.sha256}} {{attachments.spec.size}}"

        workflow a:
          entry: read
          read -> done
    """)
    spec = tmp_path / "spec.md"
    spec.write_text("the spec\n")
    with pytest.raises(EngineError, match="attachment spec is required"):
        launch(store, bot, ws)
    with pytest.raises(EngineError, match="unknown attachment 'other'"):
        launch(store, bot, ws, attachments={"spec": spec, "other": spec})
    r = launch(store, bot, ws, attachments={"spec": spec})
    assert r.status is RunStatus.FINISHED, r.error
    digest = hashlib.sha256(b"the spec\n").hexdigest()
    assert r.outputs["read"]["stdout"] == f"the spec\n{digest} 9\n"
    staged = store.attachments(r.run_id).get("spec")
    assert staged is not None and Path(staged.path).read_text() == "the spec\n"


def test_the_entry_node_input_is_the_run_vars(tmp_path: Path, ws: Path, store: Store) -> None:
    # docs/language.md 2 / 3: "the entry node's input is the run's vars" (defaults overlaid with --var)
    bot = write_bot(tmp_path / "src", """
        vars:
          branch: string = "main"
          n: int = 2

        tool first:
          command: "echo {{input.branch}} {{input.n}}"

        compute count:
          expr:
            twice: "n * 2"

        workflow e:
          entry: first
          first -> count with { n: "{{input.n}}" }
          count -> done
    """)
    r = launch(store, bot, ws, vars={"n": "5"})
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["first"]["stdout"] == "main 5\n" and r.outputs["count"] == {"twice": 10}
