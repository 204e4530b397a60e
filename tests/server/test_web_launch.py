"""What the run list's launch form offers: the project's workflow files and their declared vars,
and nothing outside the project (``..``, absolute paths, symlinks leading out are refused)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from iterion.server.service import ApiError, Service
from iterion.store import Store
from tests.conftest import FIXTURES


@pytest.fixture
def svc(ws: Path, tmp_path: Path) -> Service:
    shutil.copytree(FIXTURES / "demo", ws / "flows")
    (ws / "flows" / "broken.bot").write_text("this is not a workflow\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(FIXTURES / "demo" / "demo.bot", outside / "secret.bot")
    os.symlink(outside / "secret.bot", ws / "flows" / "link.bot")  # a symlink leading out
    os.symlink(outside, ws / "linked-dir")  # a directory symlink leading out
    hidden = ws / ".hidden"
    hidden.mkdir()
    shutil.copy(FIXTURES / "demo" / "demo.bot", hidden / "h.bot")
    return Service(Store.open(None, ws), ws)


def test_lists_project_workflows_with_their_vars(svc: Service) -> None:
    found = {w["file"]: w for w in svc.launchable()}
    assert set(found) == {"flows/demo.bot", "flows/broken.bot"}  # no symlink, no hidden dir
    demo = found["flows/demo.bot"]
    assert demo["problem"] is None
    assert demo["vars"] == [{"name": "topic", "type": "string", "default": "rivers", "required": False},
                            {"name": "out", "type": "string", "default": "demo-out", "required": False}]
    assert found["flows/broken.bot"]["problem"]  # listed with its problem, not hidden


@pytest.mark.parametrize("raw", ["../outside/secret.bot", "flows/../../outside/secret.bot", "flows/link.bot",
                                 "linked-dir/secret.bot", "/etc/passwd"])
def test_refuses_paths_out_of_the_project(svc: Service, tmp_path: Path, raw: str) -> None:
    if raw.startswith("/etc"):
        raw = str(tmp_path / "outside" / "secret.bot")  # an absolute path, even to a real workflow
    with pytest.raises(ApiError) as exc:
        svc.workflow_decl(raw)
    assert exc.value.status == 422
    assert "project" in exc.value.message


def test_a_missing_file_is_named(svc: Service) -> None:
    with pytest.raises(ApiError) as exc:
        svc.workflow_decl("flows/nope.bot")
    assert exc.value.status == 422 and "no such file" in exc.value.message
