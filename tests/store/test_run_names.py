"""Friendly names are unique within a store (issue 14 point 3): the name index, on a store that
predates it, and with stale entries."""

from __future__ import annotations

import shutil
from pathlib import Path

from iterion.store import RunDoc, Store, new_id
from iterion.store.names import NAMES_DIR


def _make(store: Store, name: str) -> RunDoc:
    return store.create_run(RunDoc(id=new_id(), name=name, workflow_name="wf"))


def test_a_taken_name_gets_the_next_suffix(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    names = [_make(store, "wf-calm-otter").name for _ in range(3)]
    assert names == ["wf-calm-otter", "wf-calm-otter-2", "wf-calm-otter-3"]
    assert store.run_names() == set(names)


def test_a_store_older_than_the_index_is_indexed_from_its_runs(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    first = _make(store, "wf-calm-otter")
    shutil.rmtree(store.root / NAMES_DIR)  # as written by an iterion without the index
    assert store.run_names() == {"wf-calm-otter"}
    assert not (store.root / NAMES_DIR).exists()  # listing names writes nothing
    second = _make(store, "wf-calm-otter")
    assert second.name == "wf-calm-otter-2" and store.resolve_run("wf-calm-otter") == first.id


def test_the_name_of_a_removed_run_is_free_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    gone = _make(store, "wf-calm-otter")
    shutil.rmtree(store.run_dir(gone.id))
    again = _make(store, "wf-calm-otter")
    assert again.name == "wf-calm-otter" and store.resolve_run("wf-calm-otter") == again.id


def test_a_name_no_file_can_have_is_still_made_unique(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    odd = "a/b name"
    assert [_make(store, odd).name for _ in range(2)] == [odd, f"{odd}-2"]
