"""The run list pages (issue 30, point 1): `iterion inspect`, `GET /api/runs` and `iterion remote
runs list` show the newest 50 by default with a cursor to the rest, and filter by status,
workflow and creation time, all from the run index (iterion/store/runindex.py)."""

from __future__ import annotations

import json
from pathlib import Path

from iterion.store import RunDoc, RunStatus, Store, new_id
from tests.conftest import run_cli
from tests.server.conftest import Server
from tests.server.test_remote import remote


def _fill(root: Path, n: int) -> list[str]:
    store = Store(root)
    ids = []
    for i in range(n):
        doc = store.create_run(RunDoc(id=new_id(), name=f"run-{i}", workflow_name="even" if i % 2 == 0 else "odd",
                                      status=RunStatus.PAUSED_OPERATOR if i % 3 == 0 else RunStatus.QUEUED))
        ids.append(doc.id)
    return ids


def test_inspect_pages_the_newest_50_then_follows_the_cursor(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ids = _fill(root, 57)
    proc = run_cli("inspect", "--store-dir", str(root))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    cursor = ids[-50]
    assert lines[-1] == f"… 7 more runs: --all or --after {cursor}"
    shown = [ln.split()[1] for ln in lines[1:-1]]
    assert shown == ids[-50:]  # the newest 50, oldest first as the list always was
    listed = json.loads(run_cli("inspect", "--json", "--store-dir", str(root)).stdout)
    assert isinstance(listed, list) and [r["id"] for r in listed] == ids[-50:]  # the bare list without paging flags
    rest = json.loads(run_cli("inspect", "--json", "--after", cursor, "--store-dir", str(root)).stdout)
    assert [r["id"] for r in rest["runs"]] == ids[:7] and rest["next"] is None and rest["total"] == 57
    every = json.loads(run_cli("inspect", "--json", "--all", "--store-dir", str(root)).stdout)
    assert [r["id"] for r in every["runs"]] == ids and every["next"] is None
    odd = json.loads(run_cli("inspect", "--json", "--workflow", "odd", "--status", "paused_operator", "--limit", "3",
                             "--store-dir", str(root)).stdout)
    want = [rid for i, rid in enumerate(ids) if i % 2 == 1 and i % 3 == 0]
    assert [r["id"] for r in odd["runs"]] == want[-3:] and odd["total"] == len(want) and odd["next"] == want[-3]
    assert json.loads(run_cli("inspect", "--json", "--since", "1h", "--store-dir", str(root)).stdout)["total"] == 57
    assert json.loads(run_cli("inspect", "--json", "--since", "2999-01-01", "--store-dir", str(root)).stdout)["total"] == 0
    bad = run_cli("inspect", "--since", "yesterday", "--store-dir", str(root))
    assert bad.returncode != 0 and "--since 'yesterday' is neither a duration" in bad.stderr
    typo = run_cli("inspect", "--status", "runing", "--store-dir", str(root))
    assert typo.returncode != 0 and "--status runing is not a run status" in typo.stderr and "running" in typo.stderr


def test_the_api_and_remote_list_page_with_a_cursor(server: Server) -> None:
    ids = _fill(server.store, 55)
    c = server.client()
    first = c.get("/api/runs").json()
    assert [r["id"] for r in first["runs"]] == ids[::-1][:50]
    assert first["total"] == 55 and first["more"] == 5 and first["next"] == ids[5]
    second = c.get("/api/runs", params={"after": first["next"]}).json()
    assert [r["id"] for r in second["runs"]] == ids[4::-1] and second["next"] is None
    assert len(c.get("/api/runs", params={"all": "1"}).json()["runs"]) == 55
    assert c.get("/api/runs", params={"since": "bogus"}).status_code == 422  # bad_input
    evens = c.get("/api/runs", params={"workflow": "even", "limit": 2}).json()
    assert [r["workflow"] for r in evens["runs"]] == ["even", "even"] and evens["total"] == 28
    listed = remote(server, "list", "--limit", "10")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1] == f"… 45 more runs: --all or --after {ids[45]}"
    page = json.loads(remote(server, "list", "--json", "--after", ids[45], "--limit", "50").stdout)
    assert [r["id"] for r in page["runs"]] == ids[44::-1] and page["next"] is None
    every = json.loads(remote(server, "list", "--json", "--all").stdout)
    assert len(every["runs"]) == 55
