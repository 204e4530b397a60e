"""Built-in tools run through the CLI (issue 28 point 4; dsl.md 2.7, builtin-tools.md): a
one-word ``command:`` naming a registered built-in is called in-process with the node input;
the workspace tools are claw's, confined the same way; an unknown one-word name is refused by
``iterion validate`` with a hint listing the built-ins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iterion.builtins.registry import NAMES

from ..conftest import run_cli, write_bot

WORKFLOWS = Path(__file__).resolve().parents[2] / "fixtures" / "workflows"


def _run(bot: Path, store: Path, ws: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    p = run_cli("run", str(bot), "--store-dir", str(store), *extra, cwd=ws)
    assert "Traceback" not in p.stderr, p.stderr
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    detail = json.loads(run_cli("inspect", "--run-id", run["id"], "--store-dir", str(store), "--json", "--events",
                                cwd=ws).stdout)
    return p.returncode, detail


def test_workspace_tools_run_in_process(tmp_path: Path, ws: Path) -> None:
    code, detail = _run(WORKFLOWS / "run_builtin_workspace.bot", tmp_path / "store", ws)
    assert code == 0, detail.get("error")
    out = detail["outputs"]
    assert (ws / "notes" / "a.txt").read_text() == "beta needle"
    assert out["put"] == {"result": "wrote 11 bytes to notes/a.txt"}
    assert out["get"] == {"result": "beta needle"}
    assert out["ls"] == {"result": ["a.txt"], "truncated": False}
    assert out["find"] == {"result": "notes/a.txt:1:beta needle"}
    assert out["match"] == {"result": ["notes/a.txt"], "truncated": False}
    # the declared schema matches: no tool_output_mismatch warning
    assert not [e for e in detail["events"] if e["type"] == "warning"]


@pytest.mark.parametrize("path, why", [
    ("../outside.txt", "outside the workspace"),
    ("/etc/hostname", "outside the workspace"),
    (".git/config", "protected"),
])
def test_workspace_tools_are_confined_like_claws(tmp_path: Path, ws: Path, path: str, why: str) -> None:
    bot = write_bot(tmp_path / "src", f"""
        tool start:
          command: "true"

        tool get:
          command: "read_file"

        workflow confined:
          entry: start
          start -> get with {{ path: "{path}" }}
          get -> done
    """)
    code, detail = _run(bot, tmp_path / "store", ws)
    assert code != 0
    assert detail["status"] in ("failed", "failed_resumable")
    assert detail["failure_code"] == "TOOL_FAILED_PERMANENT"
    assert f"tool get: read_file: {path!r}" in detail["error"] and why in detail["error"]
    assert "get" not in detail["outputs"]


def test_a_write_outside_is_refused_and_writes_nothing(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool start:
          command: "true"

        tool put:
          command: "write_file"

        workflow confined:
          entry: start
          start -> put with { path: "../escaped.txt", content: "x" }
          put -> done
    """)
    code, detail = _run(bot, tmp_path / "store", ws)
    assert code != 0 and "outside the workspace" in detail["error"]
    assert not (ws.parent / "escaped.txt").exists()


def test_tool_output_mismatch_applies_to_a_builtin(tmp_path: Path, ws: Path) -> None:
    (ws / "f.txt").write_text("hi\n")
    bot = write_bot(tmp_path / "src", """
        schema wants:
          result: string
          lines: int

        tool start:
          command: "true"

        tool get:
          command: "read_file"
          output: wants

        workflow mismatch:
          entry: start
          start -> get with { path: "f.txt" }
          get -> done
    """)
    code, detail = _run(bot, tmp_path / "store", ws)
    assert code == 0, detail.get("error")
    warns = [e["payload"] for e in detail["events"] if e["type"] == "warning"]
    assert [w["missing"] for w in warns if w.get("code") == "tool_output_mismatch"] == [["lines"]]


def test_an_unknown_one_word_command_is_refused_at_validation(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool scrub:
          command: "privacy_filterr"

        workflow typo:
          entry: scrub
          scrub -> done
    """)
    p = run_cli("validate", str(bot), "--json", cwd=ws)
    assert p.returncode != 0
    diags = json.loads(p.stdout)["files"][0]["diagnostics"]
    (d,) = [d for d in diags if d["code"] == "C004"]
    assert "'privacy_filterr' is neither a built-in tool nor a program on PATH" in d["message"]
    assert all(name in d["hint"] for name in NAMES)


@pytest.mark.parametrize("command", ["ls", "true", ":", "read_file", "./missing.sh", "nothere {{vars.x}}"])
def test_programs_builtins_and_non_words_validate(tmp_path: Path, ws: Path, command: str) -> None:
    bot = write_bot(tmp_path / "src", f"""
        vars:
          x: string = "a"

        tool t:
          command: "{command}"

        workflow ok:
          entry: t
          t -> done
    """)
    p = run_cli("validate", str(bot), "--json", cwd=ws)
    assert p.returncode == 0, p.stdout


@pytest.mark.parametrize("where", ["node", "workflow"])
def test_under_a_sandbox_the_program_is_the_images_business(tmp_path: Path, ws: Path, where: str) -> None:
    node_sb = "  sandbox:\n    mode: auto\n" if where == "node" else ""
    wf_sb = "  sandbox:\n    mode: auto\n" if where == "workflow" else ""
    bot = tmp_path / "sb.bot"
    bot.write_text(f'tool t:\n  command: "only_in_the_image"\n{node_sb}\nworkflow sb:\n  entry: t\n{wf_sb}'
                   "  t -> done\n")
    p = run_cli("validate", str(bot), "--json", cwd=ws)
    assert p.returncode == 0, p.stdout
