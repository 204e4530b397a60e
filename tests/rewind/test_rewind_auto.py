"""--auto end to end through rewind_run: the recorded unit vs the unit on disk, then the pivot."""

from __future__ import annotations

from pathlib import Path

import pytest
from .rewind_runs import FLOW, fake_run, loop_steps, write

from iterion.rewind.auto_detect import DetectedEdit
from iterion.rewind.errors import AutoRefusedError, RewindError
from iterion.rewind.files import RestoreScope
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.store import RunStatus, Store

FAN = """\
tool prep:
  command: "echo prep"

router split:
  mode: fan_out_all

tool left:
  command: "echo left > left.txt"

tool right:
  command: "echo right > right.txt"

tool join:
  command: "echo join"
  await: wait_all

workflow fan:
  entry: prep
  prep -> split
  split -> left
  split -> right
  left -> join
  right -> join
  join -> done
"""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def auto(store: Store, run_id: str, **kw) -> tuple[object, list[DetectedEdit]]:
    seen: list[DetectedEdit] = []
    res = rewind_run(store, RewindRequest(run_id=run_id, auto=True, **kw), on_detected=seen.append)
    return res, seen


def test_prompt_edit_rewinds_to_the_node_using_it(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    (repo / "flow.bot").write_text(FLOW.replace("Write the release note.", "Write a good release note."))
    res, seen = auto(store, doc.id)
    assert res.to_node == "draft" and res.dropped_nodes == ["draft", "apply"]
    assert seen and any("prompt draft_user" in c for c in seen[0].changes)
    assert "draft" in seen[0].impacted
    assert res.auto is not None and [c["node"] for c in res.auto.candidates] == ["draft"]
    assert (repo / "a.txt").read_text() == "base\n"


def test_workflow_scope_edit_rewinds_to_the_entry(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    (repo / "flow.bot").write_text(FLOW.replace("  entry: setup\n", "  entry: setup\n  budget:\n    max_cost_usd: 3\n"))
    res, _ = auto(store, doc.id, restore_scope=RestoreScope.NONE)
    assert res.to_node == "setup" and res.dropped_nodes == ["setup", "gate", "draft", "apply"]


def test_several_nodes_on_one_chain_pick_the_upstream_most(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    edited = FLOW.replace("Write the release note.", "Better.").replace("grep -q good", "grep -q fine")
    (repo / "flow.bot").write_text(edited)
    res, seen = auto(store, doc.id, restore_scope=RestoreScope.NONE)
    assert set(seen[0].impacted) == {"draft", "apply"}
    assert res.to_node == "draft"


def test_comment_and_line_shift_edits_are_no_change(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    (repo / "flow.bot").write_text("## a new comment\n\n\n" + FLOW.replace("schema draft_out:", "## c\nschema draft_out:"))
    with pytest.raises(AutoRefusedError, match="no change detected"):
        auto(store, doc.id)
    assert store.load_run(doc.id).version == doc.version and (repo / "c.txt").exists()


def test_edit_of_a_node_never_executed_has_nothing_to_rewind(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps()[:2], status=RunStatus.PAUSED_WAITING_HUMAN, restart="gate")
    (repo / "flow.bot").write_text(FLOW.replace("grep -q good", "grep -q fine"))
    with pytest.raises(AutoRefusedError, match=r"never executed \(apply\)"):
        auto(store, doc.id)


def test_main_only_record_of_a_multi_file_unit_refuses_auto(store: Store, repo: Path) -> None:
    main = FLOW.replace("prompt draft_user:\n  Write the release note.\n", "") \
        .replace("## the bot-author", 'import "lib/prompts.bot"\n## the bot-author')
    (repo / "lib").mkdir()
    (repo / "lib" / "prompts.bot").write_text("prompt draft_user:\n  Write the release note.\n")
    doc = fake_run(store, repo, loop_steps(), restart="apply", source=main)
    doc.workflow_sources = {}  # launched before the unit's files were recorded
    store.save_run(doc, doc.version)
    with pytest.raises(AutoRefusedError, match="recorded its main file alone") as err:
        auto(store, doc.id)
    assert "--node" in (err.value.hint or "")
    # with the whole unit recorded, a fragment edit is seen like one in the main
    doc = store.load_run(doc.id)
    doc.workflow_sources = {"flow.bot": main, "lib/prompts.bot": "prompt draft_user:\n  Write the release note.\n"}
    store.save_run(doc, doc.version)
    (repo / "lib" / "prompts.bot").write_text("prompt draft_user:\n  Write a good release note.\n")
    res, _ = auto(store, doc.id, restore_scope=RestoreScope.NONE)
    assert res.to_node == "draft"


def fan_steps():
    return [("prep", None, {}), ("split", None, {}), ("left", write("left.txt", "left\n"), {}),
            ("right", write("right.txt", "right\n"), {}), ("join", None, {})]


def test_edits_on_independent_fan_out_branches_are_refused_with_the_candidates(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, fan_steps(), status=RunStatus.FAILED, restart="join", source=FAN)
    (repo / "flow.bot").write_text(FAN.replace("echo left >", "echo LEFT >").replace("echo right >", "echo RIGHT >"))
    with pytest.raises(AutoRefusedError) as err:
        auto(store, doc.id)
    assert err.value.candidates == ("left", "right")
    assert "left, right" in err.value.message and "--node split" in (err.value.hint or "")
    assert store.load_run(doc.id).version == doc.version


def test_one_branch_edit_is_promoted_to_the_router(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, fan_steps(), status=RunStatus.FAILED, restart="join", source=FAN)
    (repo / "flow.bot").write_text(FAN.replace("echo right >", "echo RIGHT >"))
    res, _ = auto(store, doc.id)
    assert (res.to_node, res.promoted_from) == ("split", "right")
    assert res.dropped_nodes == ["split", "left", "right", "join"]
    assert not (repo / "left.txt").exists() and not (repo / "right.txt").exists()
    payload = [e for e in store.read_events(doc.id) if e.type == "run_rewound"][-1].payload
    assert payload["promoted_from"] == "right" and payload["to_node"] == "split"


def test_edge_edit_rewinds_to_the_node_it_leaves(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    (repo / "flow.bot").write_text(FLOW.replace("gate -> draft when approved", "gate -> draft when approved with { x: \"1\" }"))
    res, seen = auto(store, doc.id, restore_scope=RestoreScope.NONE)
    assert list(seen[0].impacted) == ["gate"] and res.to_node == "gate"


def test_shared_schema_edit_rewinds_to_the_earliest_referencing_node(store: Store, repo: Path) -> None:
    shared = FLOW.replace("  output: draft_out\n  user: draft_user", "  output: verdict\n  user: draft_user") \
        .replace("outputs.draft.text", "outputs.draft.approved")
    doc = fake_run(store, repo, loop_steps(), restart="apply", source=shared)
    (repo / "flow.bot").write_text(shared.replace("  approved: bool\n", "  approved: bool\n  why: string\n"))
    res, seen = auto(store, doc.id, restore_scope=RestoreScope.NONE)
    assert set(seen[0].impacted) == {"gate", "draft"}
    assert res.to_node == "gate" and [c["node"] for c in res.auto.candidates] == ["gate", "draft"]


def test_file_option_points_at_a_moved_source(store: Store, repo: Path, tmp_path: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    moved = tmp_path / "elsewhere" / "flow.bot"
    moved.parent.mkdir()
    moved.write_text(FLOW.replace("Write the release note.", "Write a good release note."))
    (repo / "flow.bot").unlink()
    with pytest.raises(RewindError, match="does not exist"):
        auto(store, doc.id)
    res, _ = auto(store, doc.id, file=moved, restore_scope=RestoreScope.NONE)
    assert res.to_node == "draft"


def test_editing_the_node_that_failed_rewinds_to_it_and_clears_its_debris(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps()[:3], restart="apply", worktree=False,
                   debris=write("c.txt", "half\n"))
    (repo / "flow.bot").write_text(FLOW.replace("grep -q good", "grep -q fine"))
    res, seen = auto(store, doc.id)
    assert list(seen[0].impacted) == ["apply"] and res.to_node == "apply"
    assert not (repo / "c.txt").exists()
