"""Which LLM nodes of a workflow would run on a backend that is not usable on this machine.

`iterion run` refuses such a run before it is created (cli/preflight.py), and `iterion validate`
warns about it (cli/validate.py): both ask here, so they agree. Each node's backend comes from
the one resolution order (iterion/backends/choice.py); usability is the backend's own
``availability()`` (what `iterion backends` prints): no call is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iterion.backends.choice import resolve_backend
from iterion.backends.registry import canonical_or_none, get_backend
from iterion.ir import NodeKind, RouterMode


@dataclass(frozen=True)
class Unusable:
    node: str
    backend: str     # as resolved (an unknown name as written)
    chosen_by: str   # which step of the order picked it
    detail: str      # what is missing, as the backend says it

    def message(self) -> str:
        return f"node {self.node} runs on {self.backend} ({self.chosen_by}), unusable here: {self.detail}"


def llm_nodes(wf: Any) -> list[Any]:
    return [n for n in wf.nodes.values() if n.kind in (NodeKind.AGENT, NodeKind.JUDGE)
            or (n.kind is NodeKind.ROUTER and n.mode is RouterMode.LLM)]


def unusable_nodes(wf: Any, env: Mapping[str, str], *, override: str | None = None,
                   script_file: str | None = None) -> list[Unusable]:
    """The LLM nodes of ``wf`` whose backend (as the run would resolve it) is not usable here."""
    verdicts: dict[str, tuple[bool, str]] = {}
    out: list[Unusable] = []
    for node in llm_nodes(wf):
        choice = resolve_backend(env, override=override, node_backend=node.backend,
                                 workflow_backend=wf.default_backend, node_id=node.id, script_file=script_file)
        name = canonical_or_none(choice.name)
        if name is None:
            out.append(Unusable(node.id, choice.name, choice.source, "no backend has that name"))
            continue
        if name not in verdicts:
            verdicts[name] = get_backend(name, {"script_file": script_file} if script_file else {}).availability()
        ok, detail = verdicts[name]
        if not ok:
            out.append(Unusable(node.id, name, choice.source, detail))
    return out
