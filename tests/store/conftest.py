from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store import RunDoc, Store, friendly_name, new_id


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / ".iterion")


@pytest.fixture
def run(store: Store) -> RunDoc:
    doc = RunDoc(id=new_id(), name=friendly_name("tidy"), workflow_name="tidy", file_path="tidy.bot",
                 workflow_digest="sha256:abc", workspace_dir="/tmp/ws")
    return store.create_run(doc)
