"""A person's answer or a model's output substituted into a tool command stays data (dsl.md 5.3).

Each case runs the CLI on a real workflow whose tool passes the hostile text to a recorder: the
command must receive the exact text as one argument, and nothing in it may run (no marker file).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import attack_vectors, events, only_run, outputs, recorded, run_cli, tool_vars, write_bot

VECTORS = attack_vectors(Path("/MARKERS"))  # ids only; each test builds them under its own dir

GATE = """
    vars:
      py: string
      rec: string

    schema approval:
      note: string

    human gate:
      output: approval
      instructions: "Anything to add?"

    tool use:
      command: "{{vars.py}} {{vars.rec}} {{outputs.gate.note}} && echo recorded"

    workflow w:
      entry: gate
      gate -> use
      use -> done
"""

AGENT = """
    vars:
      py: string
      rec: string

    schema draft:
      text: string

    agent write:
      model: "m"
      backend: "script"
      output: draft
      user: "write something"

    tool use:
      command: "{{vars.py}} {{vars.rec}} {{outputs.write.text}} && echo recorded"

    workflow w:
      entry: write
      write -> use
      use -> done
"""


def _paused_gate(tmp_path: Path, ws: Path, rec: Path) -> tuple[Path, str]:
    bot = write_bot(tmp_path / "src", GATE)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), *tool_vars(rec), cwd=ws)
    assert p.returncode == 4, p.stderr  # paused for the answer
    return store, only_run(store)


@pytest.mark.parametrize("vector", [v for v in VECTORS if v != "everything"])  # that one: the file test
def test_human_answer_given_with_answer_flag_is_one_literal_argument(
        vector: str, tmp_path: Path, ws: Path, rec: Path, markers: Path) -> None:
    payload = attack_vectors(markers)[vector]
    store, run_id = _paused_gate(tmp_path, ws, rec)
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answer", f"note={payload}", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert list(markers.iterdir()) == []  # nothing the answer says ran
    assert outputs(store, run_id)["gate"] == {"note": payload}
    assert recorded(ws) == [payload.encode()]  # the command got the text itself, as one word


def test_human_answers_file_with_every_vector_reaches_the_command_literally(
        tmp_path: Path, ws: Path, rec: Path, markers: Path) -> None:
    payload = attack_vectors(markers)["everything"]
    store, run_id = _paused_gate(tmp_path, ws, rec)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"note": payload}))  # resume: the paused node's answers
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answers-file", str(answers), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert list(markers.iterdir()) == []
    assert recorded(ws) == [payload.encode()]


def test_the_issue_example_echo_of_an_answer_prints_it_and_runs_nothing(
        tmp_path: Path, ws: Path, markers: Path) -> None:
    # `command: "echo {{outputs.gate.note}}"` with the answer `x; touch /tmp/pwned`, from the issue
    bot = write_bot(tmp_path / "src", """
        schema approval:
          note: string

        human gate:
          output: approval
          instructions: "Note?"

        tool say:
          command: "echo {{outputs.gate.note}}"

        workflow w:
          entry: gate
          gate -> say
          say -> done
    """)
    store = tmp_path / "store"
    payload = f"x; touch {markers}/pwned"
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"gate": {"note": payload}}))
    p = run_cli("run", str(bot), "--store-dir", str(store), "--answers-file", str(answers), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert not (markers / "pwned").exists()
    assert outputs(store, only_run(store))["say"]["stdout"] == payload + "\n"


@pytest.mark.parametrize("vector", list(VECTORS))
def test_agent_output_through_the_script_backend_is_one_literal_argument(
        vector: str, tmp_path: Path, ws: Path, rec: Path, markers: Path) -> None:
    payload = attack_vectors(markers)[vector]
    bot = write_bot(tmp_path / "src", AGENT, {"write": {"*": {"output": {"text": payload}}}})
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), *tool_vars(rec), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert list(markers.iterdir()) == []
    assert recorded(ws) == [payload.encode()]
    run_id = only_run(store)
    assert outputs(store, run_id)["use"]["stdout"] == "recorded\n"


def test_agent_output_in_the_demos_save_draft_step_is_written_not_run(tmp_path: Path, ws: Path,
                                                                      markers: Path) -> None:
    """The demo itself (fixtures/demo): a hostile draft lands in draft.md byte for byte."""
    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
    src = tmp_path / "demo"
    shutil.copytree(demo, src)
    payload = attack_vectors(markers)["everything"]
    script = yaml.safe_load((src / "demo.script.yaml").read_text())
    script["write"] = {"*": {"output": {"text": payload}}}
    (src / "demo.script.yaml").write_text(yaml.safe_dump(script))
    store = tmp_path / "store"
    p = run_cli("run", str(src / "demo.bot"), "--store-dir", str(store),
                "--answers-file", str(src / "answers.json"), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert list(markers.iterdir()) == []
    assert (ws / "demo-out" / "draft.md").read_bytes() == payload.encode() + b"\n"
    assert (ws / "demo-out" / "published.md").read_bytes() == payload.encode() + b"\n"
    run_id = only_run(store)
    out = outputs(store, run_id)
    assert out["save_draft"]["stdout"] == "saved\n" and out["publish"]["stdout"] == "published: ship it\n"
    assert [e["type"] for e in events(store, run_id)][-1] == "run_finished"
