"""Artifacts, interactions, attachments, store-dir resolution and run lookup."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from iterion.store import ArtifactNotFoundError, RunDoc, RunNotFoundError, Store, new_id, resolve_store_dir
from iterion.store.ids import id_time_ms


def test_artifact_versions_grow_and_tombstones_are_logical(store: Store, run: RunDoc) -> None:
    arts = store.artifacts(run.id)
    assert arts.latest("plan") is None
    assert arts.publish("plan", {"v": 1}, node="plan", iteration=0).version == 1
    assert arts.publish("plan", {"v": 2}, node="plan", iteration=1).version == 2
    assert arts.versions("plan") == [1, 2]
    assert arts.latest("plan").value == {"v": 2}  # type: ignore[union-attr]
    assert arts.latest("plan", exclude={2}).value == {"v": 1}  # type: ignore[union-attr]
    assert arts.read("plan", 1).node == "plan"
    assert (store.run_dir(run.id) / "artifacts" / "plan" / "2.json").is_file()  # files stay
    assert arts.publish("plan", {"v": 3}).version == 3  # never reuses a number
    assert arts.names() == ["plan"]
    with pytest.raises(ArtifactNotFoundError):
        arts.read("plan", 9)


def test_interactions(store: Store, run: RunDoc) -> None:
    inter = store.interactions(run.id)
    doc = inter.ask("gate", {"approved": "Approve?"}, iteration=0, kind="human")
    assert doc.pending and doc.questions == {"approved": "Approve?"}
    answered = inter.answer(doc.id, {"approved": True})
    assert not answered.pending and answered.answers == {"approved": True}
    again = inter.ask("gate", {"note": "more?"}, interaction_id=doc.id)  # next turn, same dialogue
    assert len(again.turns) == 2 and again.pending
    assert [d.id for d in inter.list()] == [doc.id]
    assert (store.run_dir(run.id) / "interactions" / f"{doc.id}.json").is_file()


def test_attachments(store: Store, run: RunDoc, tmp_path: Path) -> None:
    src = tmp_path / "theme.json"
    src.write_bytes(b'{"a": 1}')
    rec = store.attachments(run.id).stage("music", src)
    assert rec.size == 8 and rec.mime == "application/json"
    assert rec.sha256 == hashlib.sha256(b'{"a": 1}').hexdigest()
    assert Path(rec.path).read_bytes() == b'{"a": 1}'
    assert store.attachments(run.id).get("music") == rec
    assert [r.name for r in store.attachments(run.id).list()] == ["music"]
    with pytest.raises(Exception, match="not a readable file"):
        store.attachments(run.id).stage("x", tmp_path / "missing.bin")


def test_resolve_store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    sub = project / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.delenv("ITERION_STORE_DIR", raising=False)
    # an empty .git/ is no repository, and an ancestor's directory without a store marker no store:
    # a new store beside where the command starts
    assert resolve_store_dir(None, sub) == sub.resolve() / ".iterion"
    assert resolve_store_dir(Path("st"), sub) == (sub / "st").resolve()
    monkeypatch.setenv("ITERION_STORE_DIR", str(tmp_path / "elsewhere"))
    assert resolve_store_dir(None, sub) == tmp_path / "elsewhere"
    assert resolve_store_dir(tmp_path / "x", sub) == tmp_path / "x"  # explicit beats the environment


def test_ids_sort_by_creation_and_resolve(store: Store, run: RunDoc) -> None:
    ids = [new_id() for _ in range(200)]
    assert ids == sorted(ids) and len(set(ids)) == 200
    assert id_time_ms(ids[0]) > 0
    second = store.create_run(RunDoc(id=new_id(), name="other-name", workflow_name="other"))
    assert [r.id for r in store.list_runs()] == [run.id, second.id]
    assert store.resolve_run(run.id) == run.id
    assert store.resolve_run("other-name") == second.id
    assert store.resolve_run(second.id[:20]) == second.id
    with pytest.raises(RunNotFoundError):
        store.resolve_run("nope-nope")
    with pytest.raises(RunNotFoundError):
        store.resolve_run("../etc")


def test_locate_store_like_git_finds_its_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iterion.store.layout import locate_store
    from tests.conftest import git, make_checkout

    monkeypatch.delenv("ITERION_STORE_DIR", raising=False)
    repo = make_checkout(tmp_path / "repo")
    sub = repo / "a" / "b"
    sub.mkdir(parents=True)
    git_store = (repo / ".git" / "iterion" / "store").resolve()
    assert locate_store(None, sub) == locate_store(None, repo)
    assert (locate_store(None, sub).root, locate_store(None, sub).origin) == (git_store, "git")
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"), "HEAD")
    assert locate_store(None, tmp_path / "linked").root == git_store  # the common git directory
    # an empty .iterion/ is not a store from before the move; one holding runs is, from below too
    (repo / ".iterion").mkdir()
    assert locate_store(None, sub).root == git_store
    (repo / ".iterion" / "runs" / "r1").mkdir(parents=True)
    assert (locate_store(None, sub).root, locate_store(None, sub).origin) == ((repo / ".iterion").resolve(), "legacy")
    # a .iterion/ above the repository is not this repository's store
    outer = tmp_path / ".iterion" / "runs" / "x"
    outer.mkdir(parents=True)
    shutil.rmtree(repo / ".iterion")
    assert locate_store(None, sub).root == git_store
    # outside any repository: the nearest marked .iterion/ (holding runs counts), else a new one here
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    assert locate_store(None, plain).root == (tmp_path / ".iterion").resolve()
    shutil.rmtree(tmp_path / ".iterion")
    assert locate_store(None, plain).root == (plain / ".iterion").resolve()
    assert locate_store(None, plain).origin == "project"
    assert locate_store(Path("st"), sub).origin == "explicit"
