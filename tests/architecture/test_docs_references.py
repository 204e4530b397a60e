"""Docstrings cite the project's own docs/, never specifications that live outside the repository.

Every docstring (module, class, function) of the packages is read with ``ast``: one that names
``dsl.md``, ``resume-and-rewind.md`` or "the spec" points a reader at a file they do not have;
it must cite the section of ``docs/`` that states the rule instead. Every ``docs/...md`` a
docstring or the README cites must exist.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("gitrefs", "workspacetrack", "iterion", "cli")
EXTERNAL = re.compile(r"dsl\.md|resume-and-rewind\.md|\bthe spec\b|\bthe spec's\b", re.IGNORECASE)
DOCS_REF = re.compile(r"docs/[\w./-]+\.md")


def docstrings() -> list[tuple[Path, int, str]]:
    out: list[tuple[Path, int, str]] = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            tree = parsed(path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node, clean=False)
                    if doc:
                        line = node.body[0].lineno if node.body else 1
                        out.append((path.relative_to(REPO), line, doc))
    return out


def test_no_docstring_cites_an_external_spec() -> None:
    bad = [f"{path}:{line}: {m.group(0)!r}" for path, line, doc in docstrings()
           for m in [EXTERNAL.search(doc)] if m]
    assert not bad, "cite a section of docs/ instead of a specification outside the repository:\n" + "\n".join(bad)


def test_cited_docs_exist() -> None:
    cited = {(str(path), ref) for path, _line, doc in docstrings() for ref in DOCS_REF.findall(doc)}
    cited |= {("README.md", ref) for ref in DOCS_REF.findall((REPO / "README.md").read_text())}
    assert any(ref == "docs/technical/durability.md" or ref.startswith("docs/") for _, ref in cited)
    missing = sorted(f"{where}: {ref}" for where, ref in cited if not (REPO / ref).is_file())
    assert not missing, "docstrings cite docs that do not exist:\n" + "\n".join(missing)
