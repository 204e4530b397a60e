"""Issue 12 at run time, through the CLI and the script backend: cursors reach the system prompt,
a failing `when` skips its edge with a warning, a failing compute is EXPRESSION_FAILED, a loop
bound comes from a template, a tool's text output carries `result`, and a declared block the
engine does not execute is announced once as a `feature_not_enforced` warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..conftest import run_cli
from .conftest import write_bot


def _run(tmp_path: Path, ws: Path, text: str, script: dict[str, Any] | None = None,
         env: dict[str, str] | None = None) -> dict[str, Any]:
    bot = write_bot(tmp_path / "src", text, script)
    store = str(tmp_path / "store")
    p = run_cli("run", str(bot), "--store-dir", store, cwd=ws, env=env)
    assert "Traceback" not in p.stderr, p.stderr
    (run,) = json.loads(run_cli("inspect", "--store-dir", store, "--json", cwd=ws).stdout)
    detail = json.loads(run_cli("inspect", "--run-id", run["id"], "--store-dir", store, "--json", "--events", "--all",
                                cwd=ws).stdout)
    detail["returncode"] = p.returncode
    return detail


def _warnings(detail: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [e for e in detail["events"] if e["type"] == "warning" and e["payload"].get("code") == code]


def test_cursor_fragments_are_appended_to_the_system_prompt(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        cursor scrutiny:
          bands:
            "0.0..0.4": "Check the changed lines only."
            "0.41..1.0": "Also read every caller."

        cursor tone:
          values:
            terse: "One line per finding."
            detailed: "Explain each finding."

        prompt sys:
          You audit a change.

        agent audit:
          model: "m"
          backend: script
          system: sys
          user: sys
          cursors:
            tone: terse
            scrutiny: "${AUDIT_SCRUTINY:-0.1}"

        agent plain:
          model: "m"
          backend: script
          system: sys
          user: sys
          cursors:
            enabled: false
            tone: detailed

        workflow w:
          entry: audit
          audit -> plain
          plain -> done
    """, {"audit": {"*": {"echo": True}}, "plain": {"*": {"echo": True}}}, env={"AUDIT_SCRUTINY": "0.9"})
    assert detail["status"] == "finished", detail
    assert detail["outputs"]["audit"]["system"] == (
        "You audit a change.\n\n## Calibration\n**scrutiny:** Also read every caller.\n**tone:** One line per finding.")
    assert detail["outputs"]["plain"]["system"] == "You audit a change."  # enabled: false


def test_a_when_that_fails_skips_its_edge_with_a_warning(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        tool t:
          command: "python3 -c 'import json; print(json.dumps(dict(n=chr(120), ok=True)))'"

        tool yes:
          command: "echo yes"

        tool no:
          command: "echo no"

        workflow w:
          entry: t
          t -> yes when "n * 2 > 1"
          t -> no when "ok and n == 'x'"
          t -> done
          yes -> done
          no -> done
    """)
    assert detail["status"] == "finished", detail
    assert "yes" not in detail["outputs"] and detail["outputs"]["no"]["result"] == "no"
    (warning,) = _warnings(detail, "when_failed")
    assert warning["node"] == "t" and warning["payload"]["to"] == "yes" and "needs two numbers" in warning["payload"]["message"]


def test_a_failing_compute_expression_is_expression_failed(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        vars:
          zero: int = 0

        schema out:
          ratio: int

        compute c:
          output: out
          expr:
            ratio: "10 / vars.zero"

        workflow w:
          entry: c
          c -> done
    """)
    assert detail["returncode"] != 0
    assert detail["status"] in ("failed", "failed_resumable")
    assert detail["failure_code"] == "EXPRESSION_FAILED", detail


def test_a_loop_bound_from_a_template_is_resolved_at_run_time(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        schema plan_out:
          rounds: string

        tool plan:
          command: "python3 -c 'import json; print(json.dumps(dict(rounds=str(3))))'"
          output: plan_out

        tool polish:
          command: "echo pass >> polish.log"

        tool never:
          command: "echo never >> never.log"

        workflow w:
          entry: plan
          plan -> polish
          polish -> polish when "true" as passes("{{outputs.plan.rounds}}")
          polish -> never
          never -> never when "true" as zero("{{outputs.never.count}}")
          never -> done
    """)
    assert detail["status"] == "finished", detail
    assert (ws / "polish.log").read_text() == "pass\n" * 4  # the first pass, then 3 loop crossings
    assert (ws / "never.log").read_text() == "never\n"  # nothing resolves: bound 0, never taken


def test_a_tool_text_output_carries_result_beside_stdout(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        tool say:
          command: "echo '  hello world  '"

        tool obj:
          command: "python3 -c 'import json; print(json.dumps(dict(k=1)))'"

        workflow w:
          entry: say
          say -> obj
          obj -> done
    """)
    assert detail["status"] == "finished", detail
    assert detail["outputs"]["say"] == {"result": "hello world", "stdout": "  hello world  \n", "stderr": "",
                                        "exit_code": 0}
    assert detail["outputs"]["obj"] == {"k": 1}  # stdout that is one JSON object is the output


def test_blocks_the_engine_does_not_execute_are_announced_once(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        mcp_server tracker:
          transport: http
          url: "https://mcp.example.org/v1"

        tool build:
          command: "echo built"
          sandbox: none

        tool again:
          command: "echo again"

        workflow w:
          entry: build
          compaction:
            threshold: 0.9
          build -> again
          again -> build when "false" as twice(2)
          again -> done
    """)
    assert detail["status"] == "finished", detail
    gaps = _warnings(detail, "feature_not_enforced")
    got = sorted((g["payload"]["feature"], g["node"]) for g in gaps)
    # sandbox: is executed now (iterion/sandbox), so it is not announced
    assert got == [("compaction", None), ("mcp_server", None)]


def test_with_values_are_typed_or_rendered_as_section_3_6_says(tmp_path: Path, ws: Path) -> None:
    detail = _run(tmp_path, ws, """
        schema shown:
          total: int
          size: int
          text: string
          literal: string

        tool obj:
          command: "python3 -c 'import json; print(json.dumps(dict(k=1, items=[1, 2])))'"

        compute show:
          output: shown
          expr:
            total: "n + 1"
            size: "length(whole.items)"
            text: "text"
            literal: "literal"

        workflow w:
          entry: obj
          obj -> show with { whole: "{{outputs.obj}}", n: "{{input.k}}", literal: "as written", text: "k={{outputs.obj.k}} and {{outputs.obj.items}}" }
          show -> done
    """)
    assert detail["status"] == "finished", detail
    # one reference alone: the value itself (1 stays a number, the map a map); text around or
    # several references: the rendered string; no reference: the string as written
    assert detail["outputs"]["show"] == {"total": 2, "size": 2, "text": "k=1 and [1,2]",
                                         "literal": "as written"}


def test_models_are_expanded_when_the_node_runs(tmp_path: Path, ws: Path) -> None:
    """`${N:-default}` never reaches a backend as text; a model-answered human uses its
    interaction_model; an llm router without model falls back to the default supervisor."""
    detail = _run(tmp_path, ws, """
        schema answer:
          ok: bool

        agent unset:
          model: "${RT_UNSET_MODEL:-anthropic/fallback}"
          user: "go"

        agent chosen:
          model: "${RT_EMPTY:-${RT_CHOSEN:-nope}}"
          user: "go"

        human gate:
          model: "m-main"
          interaction: llm
          interaction_model: "${RT_ANSWER_MODEL:-m-answer}"
          output: answer

        router pick:
          mode: llm
          user: "choose"

        workflow w:
          entry: unset
          unset -> chosen
          chosen -> gate
          gate -> pick
          pick -> done
          pick -> fail
    """, {"unset": {"*": {"text": "a"}}, "chosen": {"*": {"text": "b"}}, "gate": {"*": {"output": {"ok": True}}},
          "pick": {"*": {"select": "done"}}},
        env={"RT_EMPTY": "", "RT_CHOSEN": "anthropic/chosen", "ITERION_DEFAULT_SUPERVISOR_MODEL": ""})
    assert detail["status"] == "finished", detail
    models = {e["node"]: e["payload"]["model"] for e in detail["events"] if e["type"] == "backend_call"}
    assert models == {"unset": "anthropic/fallback", "chosen": "anthropic/chosen", "gate": "m-answer",
                      "pick": "anthropic/claude-sonnet-4-6"}
