"""The namespaces templates and expressions read, built from the run state (docs/language.md 4-5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iterion.engine.state import RunState
from iterion.ir import Workflow


def loop_view(wf: Workflow, state: RunState) -> dict[str, dict[str, Any]]:
    """``loop.NAME.{iteration,max,previous_output}`` for every declared loop.

    Before a loop was ever taken its ``previous_output`` has every field of the closing node's
    schema set to null, so a prompt that quotes it renders "null" on the first pass instead of
    failing on a field that cannot exist yet.
    """
    by_index = {e.index: e for e in wf.edges}
    view: dict[str, dict[str, Any]] = {}
    for name, loop in wf.loops.items():
        ls = state.loops.get(name)
        prev = ls.previous_output if ls is not None else None
        if prev is None:
            prev = {}
            for idx in loop.edges:
                edge = by_index.get(idx)
                src = wf.nodes.get(edge.src) if edge else None
                if src is not None and src.output_schema is not None:
                    prev.update({f.name: None for f in src.output_schema.fields})
        view[name] = {"iteration": ls.iteration if ls else 0, "max": loop.max, "previous_output": prev}
    return view


def build_scope(wf: Workflow, state: RunState, *, input: Mapping[str, Any] | None = None,
                attachments: Mapping[str, Any] | None = None,
                history_nodes: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``history_nodes`` (nodes on a loop) read ``outputs.NODE.history`` as [] before they ran."""
    with state.lock:
        scope = {
            "vars": dict(state.vars),
            "input": dict(input or {}),
            "outputs": {k: v for k, v in state.outputs.items()},
            "outputs_history": {**{n: [] for n in history_nodes}, **{k: list(v) for k, v in state.history.items()}},
            "artifacts": dict(state.artifact_values),
            "attachments": dict(attachments or {}),
            "loop": loop_view(wf, state),
            "run": {"id": state.run_id},
        }
    _template_bounds(wf, scope)
    return scope


def _template_bounds(wf: Workflow, scope: dict[str, Any]) -> None:
    """``loop.NAME.max`` of a loop bounded by a template: its bound resolved in this scope."""
    from iterion.engine.edges import loop_bound

    by_index = {e.index: e for e in wf.edges}
    for name, loop in wf.loops.items():
        if loop.bound is not None and loop.edges and loop.edges[0] in by_index and name in scope["loop"]:
            scope["loop"][name]["max"] = loop_bound(by_index[loop.edges[0]], scope)
