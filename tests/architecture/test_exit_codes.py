"""Exit codes have one home each: ``cli.exit_codes.ExitCode`` (what a command exits with) and
``gitrefs.persist.errors.ErrorKind`` (what kind of failure a lower layer's ``UserError`` is; the CLI maps it).

Read with ``ast`` from every module of the packages: a literal number given as an exit code
(``exit_code=1``, ``{"exit_code": 3}``, ``typer.Exit(7)``, ``sys.exit(130)``, a default of an
``exit_code`` parameter) fails here, naming the place; name the enum member instead.
"""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("gitrefs", "workspacetrack", "iterion", "cli")
EXIT_CALLS = {"Exit", "exit", "_exit"}  # typer.Exit, sys.exit, os._exit


def _is_number(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def literal_exit_codes(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in EXIT_CALLS and node.args and _is_number(node.args[0]):
                found.append((node.lineno, f"{name}({ast.unparse(node.args[0])})"))
            for kw in node.keywords:
                if (kw.arg == "exit_code" or (kw.arg == "code" and name in EXIT_CALLS)) and _is_number(kw.value):
                    found.append((node.lineno, f"{kw.arg}={ast.unparse(kw.value)}"))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "exit_code" and _is_number(value):
                    found.append((node.lineno, f'"exit_code": {ast.unparse(value)}'))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            for arg, default in pairs:
                if "exit" in arg.arg and _is_number(default):
                    found.append((node.lineno, f"{arg.arg}={ast.unparse(default)}"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
                value = node.value
                if value is not None and "exit" in name.lower() and _is_number(value):
                    found.append((node.lineno, f"{name} = {ast.unparse(value)}"))
    return sorted(found)


def test_no_literal_exit_code_anywhere_in_the_packages() -> None:
    bad = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            bad += [f"{rel}:{line}: {what}" for line, what in literal_exit_codes(parsed(path))]
    assert not bad, "name the member of cli.exit_codes.ExitCode or gitrefs.persist.errors.ErrorKind:\n" + "\n".join(bad)


def test_the_guard_sees_each_kind_of_literal() -> None:
    src = ("raise typer.Exit(1)\nsys.exit(130)\nraise CliError('x', exit_code=2)\nbody = {'exit_code': 3}\n"
           "def fail(m, *, exit_code=2): ...\nEXIT_PENDING = 7\n"
           "raise typer.Exit(ExitCode.FAILED)\nraise CliError('x', exit_code=ErrorCode.REFUSED)\n")
    assert [line for line, _ in literal_exit_codes(ast.parse(src))] == [1, 2, 3, 4, 5, 6]
