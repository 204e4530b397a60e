"""The folded ignore matcher agrees with git itself (``git check-ignore``) on the same patterns."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git

from workspacetrack.ignore import Level, Matcher, is_ignored

PATTERN_SETS = [
    ["*.pyc", "build/", "!keep.pyc", "node_modules"],           # basename-only: matched on the name
    ["/top", "a/**/b", "docs/*.md", "!docs/keep.md", "*.log"],  # anchored / nested: whole path
    ["x*", "!xy", "xyz/"],
]
NAMES = ["a", "b", "x", "xy", "xyz", "top", "build", "docs", "keep.pyc", "m.pyc", "node_modules", "r.md",
         "keep.md", "f.log"]


@pytest.mark.parametrize("lines", PATTERN_SETS)
def test_matcher_agrees_with_git_check_ignore(git_repo: Any, lines: list[str]) -> None:
    tmp_path = Path(git_repo.workspace)  # a fresh repository (pytest-git): git reads its .gitignore
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    level = (Level(0, "", Matcher(lines)),)
    probes: list[tuple[str, bool]] = []
    for n in (1, 2):
        for parts in itertools.product(NAMES, repeat=n):
            # The walk prunes ignored directories: only ask about paths whose parents are kept.
            if any(is_ignored(level, "/".join(parts[:i]), True) for i in range(1, n)):
                continue
            probes += [("/".join(parts), False), ("/".join(parts), True)]
    stdin = "".join(p + ("/" if d else "") + "\n" for p, d in probes)
    out = git(tmp_path, "check-ignore", "--no-index", "--stdin", input=stdin, check=False)
    git_ignored = set(out.splitlines())
    mismatches = [(p, d) for p, d in probes
                  if is_ignored(level, p, d) != ((p + "/" if d else p) in git_ignored)]
    assert not mismatches, mismatches[:10]


def test_basename_only_detection() -> None:
    assert Matcher(PATTERN_SETS[0]).basename_only
    assert not Matcher(PATTERN_SETS[1]).basename_only
