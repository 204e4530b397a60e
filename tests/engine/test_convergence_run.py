"""Fan-out convergence at run time, through the CLI (issue 28 point 1, dsl.md §3.4).

"A branch runs until the convergence node: the first node, searching forward from the branch
targets, that declares `await` or has edges from two or more distinct sources." Every node
after the join runs once, a router may itself be the convergence node, and nested or chained
diamonds run in linear time.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from iterion.dsl import load_workflow

from ..conftest import run_cli
from .conftest import write_bot

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "workflows" / "run_converge.bot"


def _inspect(store: Path, ws: Path, run_id: str | None = None) -> dict:
    if run_id is None:
        (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
        run_id = run["id"]
    return json.loads(run_cli("inspect", "--run-id", run_id, "--store-dir", str(store), "--json", "--events",
                              cwd=ws).stdout)


def _counts(detail: dict) -> Counter[str]:
    return Counter(x.rsplit(":", 1)[0] for x in detail["executed"])


def test_branches_rejoin_without_await_and_the_gate_after_the_join_pauses(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    p = run_cli("run", str(FIXTURE), "--store-dir", str(store), cwd=ws)
    assert p.returncode == 4, p.stderr  # the gate pauses on the main path (not "inside a fan-out branch")
    detail = _inspect(store, ws)
    assert detail["status"] == "paused_waiting_human" and detail["checkpoint_node"] == "gate"
    counts = _counts(detail)
    assert counts == Counter({n: 1 for n in ("spread", "left", "right", "again", "up", "down", "join", "after")})
    # where the engine joined is the validator's convergence node, for both fan-outs
    wf = load_workflow(FIXTURE, env={}).workflow
    assert wf is not None
    assert {r: reg.join for r, reg in wf.fan_out_regions.items()} == {"spread": "again", "again": "join"}
    executed = [x.rsplit(":", 1)[0] for x in detail["executed"]]
    assert executed.index("again") > max(executed.index("left"), executed.index("right"))
    p2 = run_cli("resume", "--run-id", detail["id"], "--store-dir", str(store), "--answer", "approved=true", cwd=ws)
    assert p2.returncode == 0, p2.stderr
    assert _counts(_inspect(store, ws, detail["id"]))["gate"] == 1


def _diamonds(n: int) -> str:
    """``n`` diamonds in a chain, none declaring await: r_i -> a_i, b_i -> j_i -> r_{i+1}."""
    decls, edges = [], []
    for i in range(n):
        decls.append(f"router r{i}:\n  mode: fan_out_all\n")
        for x in ("a", "b", "j"):
            decls.append(f'tool {x}{i}:\n  command: "true"\n')
        nxt = f"r{i + 1}" if i + 1 < n else "done"
        edges += [f"  r{i} -> a{i}", f"  r{i} -> b{i}", f"  a{i} -> j{i}", f"  b{i} -> j{i}", f"  j{i} -> {nxt}"]
    return "\n".join(decls) + "\nworkflow chain:\n  entry: r0\n" + "\n".join(edges) + "\n"


def _nested(depth: int) -> str:
    """Fan-outs nested ``depth`` deep: r_i -> r_{i+1}, s_i; r_{i+1}'s join and s_i meet at j_i."""
    decls, edges = [], []
    for i in range(depth):
        decls.append(f"router r{i}:\n  mode: fan_out_all\n")
        decls.append(f'tool s{i}:\n  command: "true"\n')
        decls.append(f'tool j{i}:\n  command: "true"\n')
        inner = f"r{i + 1}" if i + 1 < depth else f"s{i}x"
        edges += [f"  r{i} -> {inner}", f"  r{i} -> s{i}", f"  s{i} -> j{i}",
                  f"  j{i} -> {'done' if i == 0 else f'j{i - 1}'}"]
    last = depth - 1
    decls.append(f'tool s{last}x:\n  command: "true"\n')
    edges.append(f"  s{last}x -> j{last}")
    return "\n".join(decls) + "\nworkflow nest:\n  entry: r0\n" + "\n".join(edges) + "\n"


def test_twenty_five_chained_diamonds_run_each_node_once(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", _diamonds(25))
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=300)
    assert p.returncode == 0, p.stderr
    counts = _counts(_inspect(store, ws))
    assert len(counts) == 100 and set(counts.values()) == {1}  # was 2**25 paths: exponential


def test_nested_fan_outs_join_at_their_own_convergence_nodes(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", _nested(12))
    wf = load_workflow(bot, env={}).workflow
    assert wf is not None
    assert all(wf.fan_out_regions[f"r{i}"].join == f"j{i}" for i in range(12))
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=300)
    assert p.returncode == 0, p.stderr
    counts = _counts(_inspect(store, ws))
    assert len(counts) == 12 * 3 + 1 and set(counts.values()) == {1}


def test_a_chain_of_thousands_of_fan_outs_validates_without_deep_recursion() -> None:
    """Convergence nodes are computed downstream first, so a fan-out met inside another is
    already known: 1,100 chained single-edge fan-outs (deeper than the recursion limit, 1,000)."""
    from iterion.dsl import load_source

    n = 1100
    src = "".join(f"router r{i}:\n  mode: fan_out_all\n" for i in range(n)) + "workflow w:\n  entry: r0\n" + "".join(
        f"  r{i} -> r{i + 1}\n" for i in range(n - 1)) + f"  r{n - 1} -> done\n"
    result = load_source(src, env={})
    assert result.diagnostics == [] and result.workflow is not None
    assert len(result.workflow.fan_out_regions) == n and result.workflow.fan_out_regions["r0"].join is None
