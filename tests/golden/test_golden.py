"""The current code reads every persisted format at every version ever written (registry.py).

For each registered format: each golden file loads through the format's model; a golden's
``format_version`` is the one its file name says; the model's current ``FORMAT_VERSION`` has a
golden (so a version bump cannot land without one), and no golden is newer than the code; what
loads dumps and loads back to the same document. Every ``VersionedModel`` subclass of the
packages is registered, so a new persisted document cannot appear without its golden.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest
from pydantic import BaseModel

from gitrefs.persist import VersionedModel
from tests.golden.registry import EVENT_LINE_V1, EVENT_LINE_VERSION, FORMATS, GOLDEN, Format, golden_version

REPO = GOLDEN.parents[1]
PACKAGES = ("gitrefs", "workspacetrack", "iterion", "cli")

CASES = [(f, p) for f in FORMATS for p in f.goldens()]


def _documents(fmt: Format, path: Path) -> list[bytes]:
    data = path.read_bytes()
    if fmt.lines:
        return [line for line in data.splitlines() if line.strip()]
    return [data]


@pytest.mark.parametrize("fmt, path", CASES, ids=[f"{f.name}/{p.name}" for f, p in CASES])
def test_current_code_reads_the_golden(fmt: Format, path: Path) -> None:
    cls = fmt.cls()
    docs = _documents(fmt, path)
    assert docs, f"{path} holds no document"
    for raw in docs:
        model = cls.model_validate_json(raw)
        if issubclass(cls, VersionedModel):
            assert json.loads(raw).get("format_version") == golden_version(path), (
                f"{path}: its format_version is not the version its name says")
        # what the current code reads, it writes back in a form it reads again unchanged
        again = cls.model_validate_json(model.model_dump_json())
        assert again == model, f"{path}: a dump of what was read does not read back the same"


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_every_version_up_to_the_current_one_has_a_golden(fmt: Format) -> None:
    cls = fmt.cls()
    current = cls.FORMAT_VERSION if issubclass(cls, VersionedModel) else EVENT_LINE_VERSION
    versions = {golden_version(p) for p in fmt.goldens()}
    assert current in versions, (f"{fmt.model} is at version {current} but tests/golden/{fmt.name}/ has no "
                                 f"v{current} golden: `python tests/golden/make_goldens.py` writes it from real runs")
    assert max(versions) <= current, f"tests/golden/{fmt.name}/ holds a golden newer than the code ({max(versions)})"


def test_the_event_line_has_its_documented_shape() -> None:
    """The event line carries no version field: its shape is pinned here (registry.EVENT_LINE_V1)."""
    from iterion.store.events import EVENT_TYPES, Event

    assert tuple(Event.model_fields) == EVENT_LINE_V1, (
        "the event line's shape changed: bump registry.EVENT_LINE_VERSION, add a golden event_line/v<N>.jsonl "
        "and describe the change in docs/technical/durability.md")
    fmt = next(f for f in FORMATS if f.name == "event_line")
    for path in fmt.goldens():
        seqs = []
        for raw in _documents(fmt, path):
            line = json.loads(raw)
            assert tuple(line) == EVENT_LINE_V1, f"{path}: a line with keys {tuple(line)}"
            assert line["type"] in EVENT_TYPES, f"{path}: event type {line['type']!r} is no longer in the vocabulary"
            seqs.append(line["seq"])
        assert seqs == sorted(set(seqs)), f"{path}: seq must increase strictly"


def _all_modules() -> list[str]:
    names: list[str] = []
    for pkg in PACKAGES:
        names.append(pkg)
        module = importlib.import_module(pkg)
        names += [m.name for m in pkgutil.walk_packages(module.__path__, prefix=f"{pkg}.")]
    return names


def _subclasses(cls: type[BaseModel]) -> set[type[BaseModel]]:
    out: set[type[BaseModel]] = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_subclasses(sub)}
    return out


def test_every_versioned_model_is_registered() -> None:
    for name in _all_modules():
        importlib.import_module(name)
    ours = {c for c in _subclasses(VersionedModel) if c.__module__.split(".")[0] in PACKAGES}
    registered = {f.cls() for f in FORMATS}
    missing = sorted(f"{c.__module__}:{c.__qualname__}" for c in ours - registered)
    assert not missing, ("persisted formats without a registry entry and golden file (tests/golden/registry.py): "
                         + ", ".join(missing))
    assert len(ours) >= 15, "too few VersionedModel subclasses found: the module walk is broken"


def test_registry_names_are_unique_and_have_goldens() -> None:
    names = [f.name for f in FORMATS]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in GOLDEN.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert on_disk == set(names), f"golden directories without an entry, or entries without one: {on_disk ^ set(names)}"
