"""The tests start the CLI and run git through one helper each: ``tests/conftest.py``'s ``git``,
``run_cli``, ``cli_json`` and ``start_cli`` (issue 18 point 4).

Read with ``ast`` from every test module: a ``subprocess`` call whose argv is ``["git", ...]``,
``[sys.executable, "-m", "cli.main", ...]`` or ``iterion_cmd(...)`` outside ``tests/conftest.py``
fails here, unless its module is listed below with why it needs its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HOME = "conftest.py"
SPAWNERS = {"run", "Popen", "check_output", "check_call", "call"}

# module (relative to tests/) -> why it starts the process itself
OWN = {
    "cli/test_fits_terminal.py": "the CLI on a pseudo-terminal",
    "cli/test_run_refs.py": "the CLI on a pseudo-terminal",
    "cli/test_output_guard.py": "the CLI on a pseudo-terminal",
    "cli/test_small_things.py": "the CLI from a copied install, with that copy's own PYTHONPATH",
    "faults/test_takeover_authorship.py": "git cat-file of binary content (the helper reads text)",
}


def _is_cli_or_git(argv: ast.expr) -> bool:
    if isinstance(argv, ast.Call) and isinstance(argv.func, ast.Name) and argv.func.id == "iterion_cmd":
        return True
    if not isinstance(argv, ast.List) or not argv.elts:
        return False
    first = argv.elts[0]
    if isinstance(first, ast.Constant) and first.value == "git":
        return True
    texts = [e.value for e in argv.elts[1:3] if isinstance(e, ast.Constant)]
    return (isinstance(first, ast.Attribute) and first.attr == "executable" and texts == ["-m", "cli.main"])


def own_spawns(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SPAWNERS
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "subprocess"
            and n.args and _is_cli_or_git(n.args[0])]


def test_tests_start_the_cli_and_git_through_the_one_helper() -> None:
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel == HOME or rel in OWN or rel.startswith("golden/make_"):  # (a script, not a test)
            continue
        bad += [f"tests/{rel}:{line}" for line in own_spawns(ast.parse(path.read_bytes()))]
    assert not bad, "use tests/conftest.py's git / run_cli / cli_json / start_cli:\n" + "\n".join(bad)


def test_the_listed_modules_still_need_their_own() -> None:
    for rel in OWN:
        assert own_spawns(ast.parse((TESTS / rel).read_bytes())), f"{rel} no longer spawns: drop it from OWN"


def test_the_guard_sees_each_spelling() -> None:
    src = ("subprocess.run(['git', 'init'])\nsubprocess.Popen([sys.executable, '-m', 'cli.main', 'run'])\n"
           "subprocess.run(iterion_cmd('run'))\nsubprocess.run(['sh', '-c', 'x'])\nrun_cli('run')\n")
    assert own_spawns(ast.parse(src)) == [1, 2, 3]
