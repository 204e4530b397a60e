"""Outside a repository the store is found, not caught (issue 27 point 5).

A directory tree stands in for the machine: ``fakeroot/`` is a ceiling (``ITERION_STORE_CEILING``,
so nothing is ever written to ``/``), ``fakeroot/home`` is ``$HOME``. Only a ``.iterion/`` holding
the store marker (or runs: a store from before the marker) in the project or an ancestor below
those ceilings is used; anything else makes a new store beside the project, and the first run
there says where it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion.store.layout import STORE_MARKER, locate_store
from tests.conftest import run_cli, write_bot

ONE = """
tool one:
  command: "echo one > one.txt"

workflow one:
  entry: one
  one -> done
"""


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    root = tmp_path / "fakeroot"
    home = root / "home"
    work = home / "work"
    proj = work / "proj"
    (proj / "sub").mkdir(parents=True)
    (root / "other" / "proj").mkdir(parents=True)
    for marked in (root, home):  # a marked store at the (fake) root and in $HOME: never found
        (marked / ".iterion").mkdir(parents=True, exist_ok=True)
        (marked / ".iterion" / STORE_MARKER).write_text("")
    (work / ".iterion").mkdir()  # an empty .iterion/ in an ancestor: not a store
    monkeypatch.delenv("ITERION_STORE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ITERION_STORE_CEILING", str(root))
    return {"root": root.resolve(), "home": home.resolve(), "work": work.resolve(), "proj": proj.resolve()}


def test_only_a_marked_store_below_home_and_the_root_is_found(tree: dict[str, Path]) -> None:
    proj, work, home, root = tree["proj"], tree["work"], tree["home"], tree["root"]
    where = locate_store(None, proj / "sub")
    assert (where.root, where.origin) == (proj / "sub" / ".iterion", "project")  # nothing caught it
    assert locate_store(None, proj).root == proj / ".iterion"

    (work / ".iterion" / STORE_MARKER).write_text("")  # the ancestor's .iterion/ is now a store
    assert locate_store(None, proj / "sub").root == work / ".iterion"
    (work / ".iterion" / STORE_MARKER).unlink()
    (work / ".iterion" / "runs" / "01a2b3c4d5e6f7a8").mkdir(parents=True)  # a store from before the marker
    assert locate_store(None, proj / "sub").root == work / ".iterion"

    assert locate_store(None, home).root == home / ".iterion"  # the project IS $HOME: its own store
    assert locate_store(None, root / "other" / "proj").root == root / "other" / "proj" / ".iterion"
    (root / "other" / ".iterion").mkdir()
    (root / "other" / ".iterion" / STORE_MARKER).write_text("")
    assert locate_store(None, root / "other" / "proj").root == root / "other" / ".iterion"


def test_the_first_run_makes_and_names_a_store_beside_the_project(tree: dict[str, Path]) -> None:
    proj, home, root = tree["proj"], tree["home"], tree["root"]
    env = {"HOME": str(home), "ITERION_STORE_CEILING": str(root), "ITERION_STORE_DIR": None}
    bot = write_bot(proj, ONE, name="one")
    first = run_cli("run", str(bot), "--json", cwd=proj, env=env)
    assert first.returncode == 0, first.stderr
    store = proj / ".iterion"
    assert f"iterion: new run store {store} (no marked .iterion/ in {proj}" in first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    assert (store / STORE_MARKER).is_file() and (store / "runs" / run_id / "run.json").is_file()
    for elsewhere in (home, root, tree["work"]):  # nothing landed in a stranger's store
        assert not (elsewhere / ".iterion" / "runs").exists()

    second = run_cli("run", str(bot), "--json", cwd=proj, env=env)  # said once: the store is marked now
    assert second.returncode == 0 and "new run store" not in second.stderr
    listed = run_cli("inspect", "--json", cwd=proj / "sub", env=env)  # found from below, by its marker
    assert listed.returncode == 0, listed.stderr
    assert run_id in [r["id"] for r in json.loads(listed.stdout)]

    # another project beside it (outside $HOME) gets its own store, not the fake root's marked one
    other = root / "other" / "proj"
    third = run_cli("run", str(bot), "--workspace", str(other), "--json", cwd=other, env=env)
    assert third.returncode == 0, third.stderr
    assert f"iterion: new run store {other / '.iterion'}" in third.stderr
    assert (other / "one.txt").is_file() and (other / ".iterion" / STORE_MARKER).is_file()
    assert not (root / ".iterion" / "runs").exists()


def test_a_store_from_before_the_marker_is_marked_by_its_next_run(tree: dict[str, Path]) -> None:
    proj, work = tree["proj"], tree["work"]
    env = {"HOME": str(tree["home"]), "ITERION_STORE_CEILING": str(tree["root"]), "ITERION_STORE_DIR": None}
    bot = write_bot(proj, ONE, name="one")
    old = run_cli("run", str(bot), "--store-dir", str(work / ".iterion"), "--json", cwd=proj, env=env)
    assert old.returncode == 0, old.stderr
    (work / ".iterion" / STORE_MARKER).unlink()  # as a store made before the marker existed
    again = run_cli("run", str(bot), "--json", cwd=proj, env=env)
    assert again.returncode == 0, again.stderr
    assert "new run store" not in again.stderr and not (proj / ".iterion").exists()
    assert (work / ".iterion" / STORE_MARKER).is_file()
    assert len(list((work / ".iterion" / "runs").iterdir())) == 2
