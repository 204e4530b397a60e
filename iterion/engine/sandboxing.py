"""The engine's side of the sandbox (iterion/sandbox): which flag applies, the run's sandboxes
built from the workflow, and the refusal before a run starts where they cannot start.

The flag (``--sandbox auto|none``) of the launch is recorded in the run's options under
``sandbox``; a resume's flag replaces it (and is recorded in turn). Launch and every resume build
the sandboxes afresh and prove one starts (``preflight``): a resume never inherits a sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from iterion.ir import Workflow
from iterion.sandbox import RunSandbox

OPTION_KEY = "sandbox"  # RunDoc.options[OPTION_KEY]: {"flag", "mode", "driver", "nodes"}


def recorded_flag(options: Mapping[str, Any]) -> str | None:
    rec = options.get(OPTION_KEY)
    return rec.get("flag") if isinstance(rec, Mapping) else None


def build(wf: Workflow, workspace: Path, store_root: Path, flag: str | None,
          permission_layers: Iterable[Mapping[str, Any]] = ()) -> RunSandbox:
    """The run's sandboxes; raises a SandboxError (a refusal) on a configuration this engine does
    not run. ``permission_layers``: an explicit allow of ``write_file(.git/...)`` lets the agent
    write the git directories inside its sandbox too."""
    box = RunSandbox.for_workflow(workspace, store_root, flag, wf.extra,
                                  {nid: n.extra for nid, n in wf.nodes.items()})
    layers = list(permission_layers)
    block = wf.extra.get("permission")

    def grant() -> bool:
        from iterion.permissions import build_policy

        decision = build_policy(block, layers).decide("write_file", {"path": ".git/HEAD"})
        return decision.verdict == "allow" and decision.rule is not None

    box.agent_git_grant = grant
    return box
