"""cli/output.py stays the only printer, so no later command can reintroduce markup (issue 10, point 2).

A static check over the project's own source: no module imports rich (Typer renders its own
--help and usage errors with it, escaped), and no cli module other than cli/output.py prints by
itself (typer.echo, click.echo, print, console.print, sys.stdout.write ...). Plus the helper's
own contract, in process: literal text, colour only around it, a plain table, a gone reader.
"""

from __future__ import annotations

import ast
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from cli import output
from tests.conftest import REPO_ROOT, iterion_cmd, make_checkout, write_bot

PACKAGES = ("gitrefs", "workspacetrack", "iterion", "cli")
HELPER = REPO_ROOT / "cli" / "output.py"


def violations(source: str, *, printer_rules: bool) -> list[str]:
    """What ``source`` does that only cli/output.py may do (``printer_rules``: the cli ones too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] == "rich"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rich":
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.ImportFrom) and node.module in ("typer", "click") and printer_rules:
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name in ("echo", "secho")]
        elif isinstance(node, ast.Call) and printer_rules:
            f = node.func
            if isinstance(f, ast.Name) and f.id in ("print", "rprint"):
                found.append(f"{f.id}(...) at line {node.lineno}")
            elif isinstance(f, ast.Attribute):
                owner = ast.unparse(f.value)
                if f.attr in ("echo", "secho") and owner in ("typer", "click"):
                    found.append(f"{owner}.{f.attr}(...) at line {node.lineno}")
                elif f.attr in ("print", "log", "print_json", "rule"):
                    found.append(f"{owner}.{f.attr}(...) at line {node.lineno}")  # a rich Console
                elif f.attr == "write" and owner in ("sys.stdout", "sys.stderr"):
                    found.append(f"{owner}.write(...) at line {node.lineno}")
    return found


def test_the_checker_catches_what_it_forbids() -> None:
    bad = """
import typer
from rich.console import Console
from rich import print as rprint
from typer import echo
console = Console()
console.print(f"[bold]{name}[/]")
typer.echo("x")
print("x")
sys.stderr.write("x")
"""
    assert sorted(violations(bad, printer_rules=True)) == sorted([
        "from rich.console import ...", "from rich import ...", "from typer import echo",
        "console.print(...) at line 7", "typer.echo(...) at line 8", "print(...) at line 9",
        "sys.stderr.write(...) at line 10"])
    assert violations("import rich.markup\n", printer_rules=False) == ["import rich.markup"]
    assert violations("print('engine line', file=sys.stderr)\n", printer_rules=False) == []


def test_no_module_but_cli_output_prints_or_imports_rich() -> None:
    checked, problems = 0, []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if path == HELPER:
                continue
            checked += 1
            in_cli = path.parent == REPO_ROOT / "cli"
            problems += [f"{path.relative_to(REPO_ROOT)}: {v}"
                         for v in violations(path.read_text(), printer_rules=in_cli)]
    assert checked > 50 and not problems, "print through cli/output.py (echo/echo_err/echo_json):\n" + "\n".join(problems)


def test_helper_prints_literally_and_colours_only_around_text(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = "[bold]x[/] :ok: [/]"
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stdout", plain)
    output.echo(output.styled(text, "red"), " ", text)
    assert plain.getvalue() == f"{text} {text}\n"

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    output.echo_err(output.styled(text, "red"), " ", text)
    assert tty.getvalue() == f"\x1b[31m{text}\x1b[0m {text}\n"
    monkeypatch.setenv("NO_COLOR", "1")
    output.echo_err(output.styled(text, "bold"))
    assert tty.getvalue().endswith(f"\n{text}\n")


def test_table_is_plain_aligned_text() -> None:
    lines = output.table(("id", "name"), [("r1", "[bold]x[/]"), ("run-22", None), ("r3", "界:ok:")])
    assert lines == ["id      name", "r1      [bold]x[/]", "run-22", "r3      界:ok:"]


def test_a_gone_reader_silences_the_stream_without_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    class Gone(io.StringIO):
        writes = 0

        def write(self, s: str) -> int:
            Gone.writes += 1
            raise BrokenPipeError(32, "Broken pipe")

    gone = Gone()
    monkeypatch.setattr(sys, "stdout", gone)
    output.echo("one")
    output.echo_json({"two": 2})
    assert Gone.writes == 1  # stopped writing after the first failure


def test_colour_on_a_terminal_surrounds_literal_names(tmp_path: Path) -> None:
    """On a real pseudo-terminal the progress is coloured, the node name still literal; NO_COLOR
    turns every escape off."""
    ws = make_checkout(tmp_path / "ws")
    bot = write_bot(tmp_path / "src", """
        tool ok:
          command: "echo '{}'"

        workflow w:
          entry: ok
          ok -> done
    """)
    seen = {}
    for no_color in ("", "1"):
        env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
        if no_color:
            env["NO_COLOR"] = no_color
        master, slave = pty.openpty()
        proc = subprocess.Popen(iterion_cmd("run", str(bot), "--store-dir", str(tmp_path / f"store{no_color}")),
                                cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        assert proc.wait(timeout=120) == 0
        seen[no_color] = b"".join(chunks).decode()
    assert "\x1b[36m▶\x1b[0m ok \x1b[2m(tool, iteration 0)\x1b[0m" in seen[""]
    assert "🆗" not in seen[""]
    assert "\x1b[" not in seen["1"] and "▶ ok (tool, iteration 0)" in seen["1"]
