"""A stored format that changes moves iterion's version (issue 32, point 3; docs/technical/packaging.md).

Bundles gate on ``iterion.__version__`` (``requires.iterion``) and CHANGELOG.md promises that at
least its minor part moves whenever a stored format changes. A new or changed golden file is such
a change, so ``format_versions.json`` records, for every golden file, each content it has had
(its SHA-256) with the iterion version it was recorded at, oldest first. The tripwire:

- a golden file added or edited without its recording fails here, the message saying what to add;
- a file's recordings are in strictly increasing versions: a new content of an existing golden
  file needs a version above the one its old content was recorded at, so the version must have
  moved;
- nothing is recorded at a version above the current one (a recording made for a version the
  package does not carry yet), and no recording names a file that is gone.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from iterion import __version__

GOLDEN = Path(__file__).resolve().parent
MAP = GOLDEN / "format_versions.json"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def golden_files() -> dict[str, str]:
    """Every golden document under tests/golden -> the SHA-256 of its bytes."""
    return {p.relative_to(GOLDEN).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(GOLDEN.rglob("*.json*"))
            if p.is_file() and p != MAP and p.suffix in (".json", ".jsonl")}


def recordings() -> dict[str, list[list[str]]]:
    files: dict[str, list[list[str]]] = json.loads(MAP.read_text())["files"]
    return files


def test_every_golden_file_is_recorded_with_its_current_content() -> None:
    on_disk, recorded = golden_files(), recordings()
    assert on_disk, "no golden files found"
    for rel, digest in on_disk.items():
        history = recorded.get(rel)
        fix = (f'append ["NEW_VERSION", "{digest}"] to "{rel}" in {MAP.name}, NEW_VERSION being '
               "iterion.__version__ (iterion/__init__.py) moved above the version(s) recorded there, with a "
               "CHANGELOG.md entry (docs/technical/packaging.md, \"Version\")")
        assert history, f"{rel} is a new golden file (a stored format changed): {fix}"
        assert history[-1][1] == digest, f"{rel} changed since it was recorded at {history[-1][0]}: {fix}"
    gone = sorted(set(recorded) - set(on_disk))
    assert not gone, f"{MAP.name} records golden files that do not exist (goldens are never removed): {gone}"


def test_a_golden_file_changes_only_with_a_version_move() -> None:
    current = version_key(__version__)
    for rel, history in recordings().items():
        versions = [version_key(v) for v, _ in history]
        assert versions == sorted(set(versions)), f"{rel}: recorded twice at one version, or out of order: {history}"
        assert versions[-1] <= current, f"{rel}: recorded at {history[-1][0]}, above iterion {__version__}"


def test_the_newest_recording_is_in_the_changelog() -> None:
    newest = max((v for history in recordings().values() for v, _ in history), key=version_key)
    changelog = (GOLDEN.parent.parent / "CHANGELOG.md").read_text()
    assert f"\n## {newest} " in changelog or f"\n## {newest}\n" in changelog, \
        f"CHANGELOG.md has no section for {newest}, the version a stored format last changed in"
    assert f"\n## {__version__}" in changelog, f"CHANGELOG.md has no section for the current version {__version__}"
