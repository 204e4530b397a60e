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


def _modules_after(code: str, argv: list[str] | None = None, cwd: Path = REPO_ROOT) -> set[str]:
    """The modules loaded once ``code`` ran (with ``sys.argv`` = ``argv``), from a fresh interpreter."""
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: sys.__stderr__.write('MODULES' + json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = {json.dumps(['iterion', *(argv or [])])}\n" + code
    )
    proc = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO_ROOT)})
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


def test_help_shows_flag_types_as_words(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # every command's help in process (what typer prints is the same text; a process per command
    # only added start-up time), then `run --help` through a real subprocess
    for path in _all_command_paths():
        out = _typer_output([*path, "--help"], 120, monkeypatch, capsys)
        assert out.startswith("Usage: iterion "), (path, out)
        for ugly in ("<bool>", "<str>", "<int>", "<float>", "<path>", "<list[", "╭"):
            assert ugly not in out, (path, ugly, out)
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
    # parsing `validate FILE` needs no typer adapter, and loading a workflow no document model
    assert not [m for m in modules if m.split(".")[0] == "pydantic" or m == "typer._adapters"]


def test_the_store_package_imports_no_document_model_until_one_is_used() -> None:
    # `from iterion.store import Store` (every store-opening command) stays clear of pydantic;
    # naming a model imports it (the package's names are lazy)
    modules = _modules_after("from iterion.store import Store, RunStatus, StoreError\n"
                             "from iterion.engine.stale import reconcile_orphans")
    assert "iterion.store.store" in modules and not [m for m in modules if m.split(".")[0] == "pydantic"]
    assert "iterion.store.run_doc" in _modules_after("from iterion.store import RunDoc")


# -- --version and --help are answered before typer is imported (cli/startup.py) ----------------------
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"]])
def test_version_and_help_import_no_typer_and_no_pydantic(argv: list[str]) -> None:
    modules = _modules_after("from cli.main import main\nmain()", argv)
    assert not [m for m in modules if m.split(".")[0] in ("typer", "click", "pydantic")], argv
    assert not [m for m in modules if m.startswith("iterion.") and m != "iterion"]


def _typer_output(argv: list[str], columns: int, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str]) -> str:
    """What typer itself prints for ``argv`` (in process, program name ``iterion``, at ``columns``)."""
    import typer

    from cli.main import get_app

    monkeypatch.setenv("COLUMNS", str(columns))  # (typer's CliRunner would force 80 columns)
    capsys.readouterr()
    typer.main.get_command(get_app()).main(argv, prog_name="iterion", standalone_mode=False)
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", [20, 52, 80, 101, 120, 200])
def test_the_fast_help_is_what_typer_prints(columns: int, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import COMMANDS
    from cli.startup import help_width, root_help

    by_typer = _typer_output(["--help"], columns, monkeypatch, capsys)
    assert root_help(COMMANDS, "iterion", help_width()) + "\n" == by_typer
    assert _typer_output(["-h"], columns, monkeypatch, capsys) == by_typer


def test_the_installed_program_answers_help_and_version_as_typer_does(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    program = str(Path(sys.executable).parent / "iterion")
    for argv in (["--help"], ["-h"], ["--version"]):
        fast = subprocess.run([program, *argv], check=False, capture_output=True, text=True,
                              env={**os.environ, "COLUMNS": "90"})
        assert fast.returncode == 0 and fast.stderr == ""
        assert fast.stdout == _typer_output(argv, 90, monkeypatch, capsys), argv
    assert fast.stdout == f"iterion {__import__('iterion').__version__}\n"
    module = run_cli("--help", env={"COLUMNS": "90"})  # `python -m cli.main`: click names it so too
    assert module.stdout.startswith("Usage: python -m cli.main [OPTIONS] COMMAND [ARGS]...\n")


@pytest.mark.parametrize("argv0,package", [("/usr/bin/iterion", None), ("/x/cli/main.py", "cli"),
                                           ("/x/cli/__main__.py", "cli"), ("iterion", "")])
def test_the_program_name_is_clicks(argv0: str, package: str | None) -> None:
    import types

    from typer._click.utils import _detect_program_name

    from cli.startup import program_name

    main = types.ModuleType("__main__")
    if package is not None:
        main.__package__ = package
    assert program_name(argv0, main) == _detect_program_name(argv0, main)


def test_other_command_lines_and_completion_go_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.main import COMMANDS
    from cli.startup import answer_without_typer

    for argv in ([], ["--version", "inspect"], ["inspect", "--help"], ["--help", "--version"], ["--vers"]):
        assert answer_without_typer(argv, COMMANDS, "1") is None, argv
    monkeypatch.setenv("_ITERION_COMPLETE", "complete_bash")
    assert answer_without_typer(["--help"], COMMANDS, "1") is None


def test_listing_runs_imports_no_engine_dsl_workspace_tracking_git_or_http(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    demo = REPO_ROOT / "fixtures" / "demo"
    for name in ("demo.bot", "demo.script.yaml", "answers.json"):
        (proj / name).write_bytes((demo / name).read_bytes())
    store = str(tmp_path / "store")
    ran = run_cli("run", "demo.bot", "--answers-file", "answers.json", "--store-dir", store, cwd=proj)
    assert ran.returncode == 0, ran.stderr
    modules = _modules_after("from cli.main import main\nmain()", ["inspect", "--store-dir", store], cwd=proj)
    assert "cli.inspect_cmd" in modules and "iterion.store.summary" in modules and "cli.run" not in modules
    # the list reads run documents plainly: no document model, and no typer coercion (typer 0.29
    # coerces parameters through pydantic; cli/startup.py plain_inspect answers without it)
    assert "iterion.budget" not in modules and "pydantic" not in modules
    assert "iterion.store.run_doc" not in modules and "iterion.store.events" not in modules
    assert "gitrefs.persist.atomic" not in modules  # (the writers')
    engine = sorted(m for m in modules if m.startswith("iterion.engine."))
    assert engine == ["iterion.engine.stale"]  # the start-up orphan sweep, without the takeover machinery
    assert _heavy(modules) == ["iterion.engine", "iterion.engine.stale"]
    for heavy in ("workspacetrack", "gitrefs.repo", "iterion.ir", "iterion.expr", "iterion.backends", "yaml",
                  "iterion.rewind.intent", "fastapi", "nats"):
        assert not [m for m in modules if m == heavy or m.startswith(heavy + ".")], heavy


# -- `validate FILE... [--json]` runs without typer, as typer runs it (cli/startup.py plain_validate) --------
_TYPER_ONLY = ("import sys\nfrom cli.errors import run_guarded\nfrom cli.main import get_app\n"
               "run_guarded(get_app())")


def test_plain_validate_prints_and_exits_as_typers_validate(tmp_path: Path) -> None:
    demo = REPO_ROOT / "fixtures" / "demo"
    for name in ("demo.bot", "demo.script.yaml"):
        (tmp_path / name).write_bytes((demo / name).read_bytes())
    (tmp_path / "broken.bot").write_text("agent a:\n  model: \"m\"\nworkflow w:\n  entry: nosuch\n")
    (tmp_path / "dir").mkdir()
    lines = [["demo.bot"], ["broken.bot", "--json", "demo.bot"], ["--json", "nosuch.bot"], ["dir", "demo.bot"],
             ["broken.bot"]]
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO_ROOT)}
    codes = set()
    for args in lines:
        argv = ["iterion", "validate", *args]
        fast = subprocess.run([sys.executable, "-c", f"import sys\nsys.argv = {argv!r}\n"
                               "from cli.main import main\nmain()"], cwd=tmp_path, env=env, capture_output=True, text=True)
        typer = subprocess.run([sys.executable, "-c", f"import sys\nsys.argv = {argv!r}\n" + _TYPER_ONLY],
                               cwd=tmp_path, env=env, capture_output=True, text=True)
        assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr), args
        assert fast.stderr or '"ok"' in fast.stdout, args  # (a verdict per file, or the JSON)
        codes.add(fast.returncode)
    assert codes == {0, 2}
    modules = _modules_after("from cli.main import main\nmain()", ["validate", "demo.bot"], cwd=tmp_path)
    assert "iterion.dsl.compiler" in modules and not [m for m in modules if m.split(".")[0] in ("typer", "click")]


def test_other_validate_command_lines_go_to_typer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.startup import plain_validate

    monkeypatch.chdir(tmp_path)
    assert plain_validate(["validate", "a.bot", "--json", "b.bot"]) == (["a.bot", "b.bot"], True)
    for argv in (["validate"], ["validate", "--json"], ["validate", "-h"], ["validate", "a.bot", "--jsn"],
                 ["validate", "--", "a.bot"], ["validate", "-"], ["validate", ""], ["diagram", "a.bot"],
                 ["validate", "a.bot", "--json=1"]):
        assert plain_validate(argv) is None, argv
    monkeypatch.setenv("_ITERION_COMPLETE", "complete_bash")
    assert plain_validate(["validate", "a.bot"]) is None


# -- `inspect [--run-id ID] [--events] [--all] [--store-dir DIR] [--json]` without typer's coercion ------------
def _age_free(text: str) -> str:
    import re

    return re.sub(r"\b\d+(\.\d+)?(ms|s|m|h|d)\b", "AGE", text)  # (two processes a second apart)


def test_plain_inspect_prints_and_exits_as_typers_inspect(tmp_path: Path) -> None:
    demo = REPO_ROOT / "fixtures" / "demo"
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("demo.bot", "demo.script.yaml", "answers.json"):
        (proj / name).write_bytes((demo / name).read_bytes())
    store = str(tmp_path / "store")
    for answers in (["--answers-file", "answers.json"], []):  # a finished run, a parked one
        ran = run_cli("run", "demo.bot", *answers, "--store-dir", store, cwd=proj)
        assert ran.returncode in (0, 4), ran.stderr
    rid = sorted((tmp_path / "store" / "runs").iterdir())[0].name
    lines = [[], ["--all", "--json"], ["--run-id", rid], ["--run-id", rid[:6], "--events", "--json"], ["--events"],
             ["--run-id", "nosuch"], ["--nats", "off"], ["--nats", "http://not-nats"]]
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO_ROOT)}
    codes = set()
    for args in lines:
        argv = ["iterion", "inspect", *args, "--store-dir", store]
        fast = subprocess.run([sys.executable, "-c", f"import sys\nsys.argv = {argv!r}\n"
                               "from cli.main import main\nmain()"], cwd=proj, env=env, capture_output=True, text=True)
        typer = subprocess.run([sys.executable, "-c", f"import sys\nsys.argv = {argv!r}\n" + _TYPER_ONLY],
                               cwd=proj, env=env, capture_output=True, text=True)
        assert (fast.returncode, _age_free(fast.stdout), fast.stderr) == \
            (typer.returncode, _age_free(typer.stdout), typer.stderr), args
        assert fast.stdout.strip() or fast.stderr.strip(), args
        codes.add(fast.returncode)
    assert 0 in codes and len(codes) >= 2  # listings, and refusals (no --run-id, no such run)
    modules = _modules_after("from cli.main import main\nmain()", ["inspect", "--store-dir", store], cwd=proj)
    assert "cli.inspect_cmd" in modules and "pydantic" not in modules


def test_other_inspect_command_lines_go_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.startup import plain_inspect

    assert plain_inspect(["inspect"]) == {}
    assert plain_inspect(["inspect", "--json", "--store-dir", "s", "--run-id", "r", "--events", "--all"]) == {
        "as_json": True, "store_dir": Path("s"), "run_id": "r", "events": True, "show_all": True}
    assert plain_inspect(["inspect", "--nats", "nats://h:4222"]) == {"nats": "nats://h:4222"}
    for argv in (["inspect", "--limit", "2"], ["inspect", "--json", "--json"], ["inspect", "--run-id"],
                 ["inspect", "--run-id", "--json"], ["inspect", "--store-dir="], ["inspect", "--store-dir=s"],
                 ["inspect", "--store-dir", ""], ["inspect", "-h"], ["inspect", "--help"], ["inspect", "x"],
                 ["inspect", "--run-id", "a", "--run-id", "b"], ["inspect", "--follow"],
                 ["inspect", "--nats"], ["inspect", "--nats", ""], ["inspect", "--nats=off"], ["validate", "a.bot"], []):
        assert plain_inspect(argv) is None, argv
    monkeypatch.setenv("_ITERION_COMPLETE", "complete_bash")
    assert plain_inspect(["inspect"]) is None


def test_the_plain_inspect_defaults_are_the_commands() -> None:
    import inspect

    from cli.inspect_cmd import inspect_cmd
    from cli.main import INSPECT_DEFAULTS

    params = inspect.signature(inspect_cmd).parameters
    assert set(INSPECT_DEFAULTS) == set(params)
    for name, param in params.items():
        default = getattr(param.default, "default", param.default)  # a typer.Option's own default
        assert INSPECT_DEFAULTS[name] == default, name
