"""The sandbox a node runs in, read from the workflow (docs/technical/sandbox.md).

Precedence: the ``--sandbox auto|none`` flag of ``iterion run``/``resume`` wins over everything;
else a node's own ``sandbox:`` (tool, agent, judge); else the workflow's; else ``none`` (no
sandbox, the behaviour of runs written before sandboxing existed).

This engine runs ``auto`` as a host sandbox (bubblewrap): the container forms of the DSL (``inline``,
``image:``, ``build:``, ``user:``, ``workspace_folder:``, ``post_create:``) and per-host network
rules are refused with a message naming what it does run, never silently dropped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from iterion.sandbox.errors import SandboxConfigError

Mode = Literal["auto", "none"]
MODES: tuple[Mode, ...] = ("auto", "none")
# sandbox: keys that only mean something for a container: refused under this engine's `auto`
_CONTAINER_KEYS = ("image", "build", "user", "workspace_folder", "post_create")
_HINT = "use `sandbox: auto` (bubblewrap on this host) or `sandbox: none`; container sandboxes are not run here"


@dataclass(frozen=True)
class Mount:
    """An extra bind from ``sandbox: mounts:``: ``"PATH"`` or ``"PATH:ro"``/``"PATH:rw"`` (default
    rw), PATH absolute, ``~/...`` or relative to the workspace; bound at the same path inside."""

    path: str
    writable: bool = True

    def resolve(self, workspace: Path) -> Path:
        p = Path(os.path.expanduser(self.path))
        return p if p.is_absolute() else workspace / p


@dataclass(frozen=True)
class NodeSandbox:
    """The effective sandbox of one node."""

    mode: Mode = "none"
    network: bool = False                 # the host's network (else none at all)
    mounts: tuple[Mount, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # set inside the sandbox
    source: str = "default"               # "flag", "node", "workflow", "default"

    @property
    def active(self) -> bool:
        return self.mode == "auto"


def check_flag(flag: str | None) -> Mode | None:
    if flag is None or flag == "":
        return None
    f = flag.strip().lower()
    if f not in MODES:
        raise SandboxConfigError(f"--sandbox {flag!r} is not a sandbox mode; expected auto or none",
                                 hint="e.g. --sandbox auto (bubblewrap) or --sandbox none")
    return f  # type: ignore[return-value]


def _mode_of(block: Any) -> str | None:
    if block is None:
        return None
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping):
        return str(block.get("mode") or "inline")
    return "inline"


def resolve(flag: str | None, workflow_block: Any, node_block: Any = None, *, where: str = "workflow") -> NodeSandbox:
    """The effective sandbox of a node (``node_block`` None for the workflow scope)."""
    f = check_flag(flag)
    own = node_block is not None
    block = node_block if own else workflow_block
    mode = f or _mode_of(block) or "none"
    source = "flag" if f else ("node" if own else ("workflow" if workflow_block is not None else "default"))
    if mode == "none":
        return NodeSandbox("none", source=source)
    if mode != "auto":
        raise SandboxConfigError(f"sandbox {mode!r} in {where}: container sandboxes (inline, image:, build:) "
                                 "are not supported by this engine", hint=_HINT)
    if not isinstance(block, Mapping):
        return NodeSandbox("auto", source=source)
    for key in _CONTAINER_KEYS:
        if block.get(key) is not None:
            raise SandboxConfigError(f"sandbox {key}: in {where} needs a container, which this engine does not run",
                                     hint=_HINT)
    return NodeSandbox("auto", network=_network(block.get("network"), where), mounts=_mounts(block.get("mounts"), where),
                       env=_env(block.get("env")), source=source)


def _network(net: Any, where: str) -> bool:
    """``network: mode: open`` shares the host's network; no block or an empty ``allowlist`` means
    none; an empty ``denylist`` is open. Rules and presets need a filtering proxy: refused."""
    if net is None:
        return False
    if not isinstance(net, Mapping):
        raise SandboxConfigError(f"sandbox network: in {where} must be a block", hint="network:\n  mode: open")
    mode = str(net.get("mode") or "allowlist")
    if net.get("rules") or net.get("preset"):
        raise SandboxConfigError(f"sandbox network rules/preset in {where}: the bubblewrap sandbox cannot filter by "
                                 "host; it has either no network or the host's",
                                 hint="use `network:` with `mode: open` to share the host network, or drop the block")
    return mode in ("open", "denylist")


def _mounts(raw: Any, where: str) -> tuple[Mount, ...]:
    out: list[Mount] = []
    for item in raw or ():
        text = str(item)
        path, _, flag = text.rpartition(":") if text.endswith((":ro", ":rw")) else (text, "", "rw")
        if not path:
            raise SandboxConfigError(f"sandbox mounts: {text!r} in {where} names no path",
                                     hint='e.g. mounts: [".git:rw", "~/.cache/pip:rw", "/opt/data:ro"]')
        out.append(Mount(path, flag == "rw"))
    return tuple(out)


def _env(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Mapping):
        return ()
    return tuple((str(k), str(v)) for k, v in raw.items())


def node_sandboxes(flag: str | None, workflow_extra: Mapping[str, Any],
                   nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, NodeSandbox]:
    """Every node's effective sandbox keyed by node id (``nodes``: id -> the node's ``extra``);
    raises on the first configuration this engine cannot run, before anything executes."""
    wf_block = workflow_extra.get("sandbox")
    resolve(flag, wf_block, None)
    return {nid: resolve(flag, wf_block, extra.get("sandbox"), where=f"node {nid}") for nid, extra in nodes.items()}
