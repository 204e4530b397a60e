"""Produced scope from the real chain equals the algorithm run over a filesystem model of it.

Random sequences of file writes/deletes and boundaries of every kind (fixed seeds, so failures
reproduce): the git side (tree diffs, `pre` aliases, chain order) must agree with a model that
records each boundary's files as a dict and aliases `pre` to the previous state.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from .refs_helpers import make_repo

from gitrefs import RunRefs
from gitrefs.boundary import BoundaryKind, BoundaryLabel
from gitrefs.produced_scope import ChainEntry, produced_scope


def _disk(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(root).parts}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_real_scope_matches_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    repo = make_repo(tmp_path / "repo")
    rr = RunRefs.start(repo, "r")
    states: dict[str, dict[str, str]] = {"base": _disk(repo)}
    model: list[ChainEntry] = []
    current = "base"
    for step in range(24):
        for _ in range(rng.randint(0, 2)):
            name = f"d{rng.randint(0, 1)}/f{rng.randint(0, 3)}.txt"
            path = repo / name
            if path.exists() and rng.random() < 0.3:
                path.unlink()
            else:
                path.parent.mkdir(exist_ok=True)
                path.write_text(rng.choice(["a", "b", "c"]))
        kind = rng.choice(list(BoundaryKind))
        label = BoundaryLabel(kind, f"n{rng.randint(0, 3)}", rng.randint(0, 1))
        rr.write_boundary(label)
        if not kind.is_alias:
            current = f"s{step}"
            states[current] = _disk(repo)
        model.append(ChainEntry(label, current))

    def model_changed(a: str, b: str) -> set[str]:
        sa, sb = states[a], states[b]
        return {p for p in sa.keys() | sb.keys() if sa.get(p) != sb.get(p)}

    real_labels = [e.label for e in rr.chain_entries()]
    for pivot in {e.label for e in model if e.label.kind is BoundaryKind.PRE}:
        # A repeated `pre` label keeps only its latest ref: the model keeps only that occurrence too.
        last = max(i for i, e in enumerate(model) if e.label == pivot)
        kept = [e for i, e in enumerate(model)
                if not (e.label.kind.is_alias and e.label == pivot and i != last)]
        expected = produced_scope(kept, pivot, model_changed)
        assert rr.produced_scope(pivot).paths == expected.paths, (seed, str(pivot))
    assert all(label in real_labels for label in {e.label for e in model})
