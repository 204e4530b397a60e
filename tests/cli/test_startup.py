"""Start-up imports only what a command uses; help is plain, complete and readable (issue 14, points 9, 10).

Module names, never times: `import cli.main`, `--version` and `--help` must not import the
engine, the DSL compiler, httpx or pygit2, and the static command table must agree with what
each module registers (so `--help` lists every command with its real one-line summary).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_cli

HEAVY = ("iterion.engine", "iterion.dsl", "httpx", "pygit2", "rich", "nats")


def _modules_after(code: str, argv: list[str] | None = None) -> set[str]:
    """The modules loaded once ``code`` ran (with ``sys.argv`` = ``argv``), from a fresh interpreter."""
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: sys.__stderr__.write('MODULES' + json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = {json.dumps(['iterion', *(argv or [])])}\n" + code
    )
    proc = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, "COLUMNS": "80"})
    assert "MODULES" in proc.stderr, proc.stderr
    return set(json.loads(proc.stderr.split("MODULES", 1)[1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_import_cli_main_imports_no_engine_dsl_httpx_or_pygit2() -> None:
    modules = _modules_after("import cli.main")
    assert "cli.main" in modules
    assert _heavy(modules) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"], ["inspct"]])
def test_version_help_and_typos_import_no_engine(argv: list[str]) -> None:
    modules = _modules_after("from cli.main import main\nmain()", argv)
    assert _heavy(modules) == []
    if argv[0].startswith("-"):  # not even the persisted formats (typer's own parsing of a typo may)
        assert "pydantic" not in modules


def test_a_command_loads_its_module_only_when_it_runs() -> None:
    modules = _modules_after("from cli.main import main\nmain()", ["validate", "--help"])
    assert "cli.validate" in modules and "cli.run" not in modules and "cli.refs" not in modules


def test_the_command_table_matches_what_the_modules_register() -> None:
    from cli.lazy import load_module_commands
    from cli.main import COMMANDS

    by_module: dict[str, set[str]] = {}
    for spec in COMMANDS:
        by_module.setdefault(spec.module, set()).add(spec.name)
        cmd = load_module_commands(spec.module)[spec.name]
        real = cmd.short_help or (cmd.help or "").strip().split("\n\n")[0].replace("\n", " ")
        assert real == spec.summary, f"{spec.name}: table says {spec.summary!r}, module says {real!r}"
    for module, names in by_module.items():
        assert set(load_module_commands(module)) == names, module
    assert len({s.name for s in COMMANDS}) == len(COMMANDS)


def test_help_lists_every_command_with_its_summary_and_h_is_help() -> None:
    from cli.main import COMMANDS

    long = run_cli("--help", env={"COLUMNS": "200"})
    short = run_cli("-h", env={"COLUMNS": "200"})
    assert long.returncode == 0 and long.stdout == short.stdout
    for spec in COMMANDS:
        assert any(line.split() == [spec.name, *spec.summary.split()] for line in long.stdout.splitlines()), spec.name
    sub = run_cli("inspect", "-h")
    assert sub.returncode == 0 and "Usage:" in sub.stdout and "--run-id" in sub.stdout
    grouped = run_cli("refs", "list", "-h")
    assert grouped.returncode == 0 and "--run-id" in grouped.stdout


def _all_command_paths() -> list[list[str]]:
    from cli.lazy import load_module_commands
    from cli.main import COMMANDS

    paths = []
    for spec in COMMANDS:
        cmd = load_module_commands(spec.module)[spec.name]
        paths.append([spec.name])
        paths += [[spec.name, sub] for sub in getattr(cmd, "commands", {})]
    return paths


def test_help_shows_flag_types_as_words() -> None:
    for path in _all_command_paths():
        out = run_cli(*path, "--help", env={"COLUMNS": "120"})
        assert out.returncode == 0, (path, out.stderr)
        for ugly in ("<bool>", "<str>", "<int>", "<float>", "<path>", "<list[", "╭"):
            assert ugly not in out.stdout, (path, ugly, out.stdout)
    run = run_cli("run", "--help", env={"COLUMNS": "120"}).stdout
    assert "--var TEXT" in run and "--script PATH" in run and "--auto-resume INTEGER" in run
    assert "--on-budget fail|pause" in run and "--max-cost-usd NUMBER" in run


def test_shell_completion_installs_as_typer_provides_it(tmp_path: Path) -> None:
    # the installed console script (completion is keyed by the program's name, `iterion`)
    program = str(Path(sys.executable).parent / "iterion")
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    shown = subprocess.run([program, "--show-completion", "bash"], check=False, capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and "_iterion_completion" in shown.stdout
    installed = subprocess.run([program, "--install-completion", "bash"], check=False, capture_output=True, text=True, env=env)
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "iterion.sh"
    assert script.is_file() and str(script) in (tmp_path / ".bashrc").read_text()
    # the installed script asks the program itself: completing `ins` offers inspect
    done = subprocess.run([program], check=False, capture_output=True, text=True,
                          env={**env, "_ITERION_COMPLETE": "complete_bash",
                               "COMP_WORDS": "iterion ins", "COMP_CWORD": "1"})
    assert done.stdout.split() == ["inspect"]


def test_validate_imports_the_dsl_but_not_the_engine_pygit2_or_httpx() -> None:
    demo = str(REPO_ROOT / "fixtures" / "demo" / "demo.bot")
    modules = _modules_after("from cli.main import main\nmain()", ["validate", demo])
    assert "iterion.dsl.compiler" in modules
    assert [m for m in _heavy(modules) if not m.startswith("iterion.dsl")] == []
