"""Iterion's own commits: fixed signature, and the trailers that label a boundary or a bank."""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

SIGNATURE_NAME = "iterion"
SIGNATURE_EMAIL = "iterion@localhost"

T_RUN = "Iterion-Run"
T_NODE = "Iterion-Node"
T_ITERATION = "Iterion-Iteration"
T_KIND = "Iterion-Kind"
T_SEQ = "Iterion-Seq"


def signature() -> pygit2.Signature:
    # Never the user's identity: CI has none configured, and these commits are iterion's.
    return pygit2.Signature(SIGNATURE_NAME, SIGNATURE_EMAIL)


def message(subject: str, trailers: dict[str, str]) -> str:
    lines = [subject, ""] + [f"{k}: {v}" for k, v in trailers.items()]
    return "\n".join(lines) + "\n"


def parse_trailers(text: str) -> dict[str, str]:
    """Trailers of the last paragraph (only the Iterion-* keys matter to us)."""
    paragraphs = [p for p in text.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return {}
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Iterion-"):
            out[key] = value.strip()
    return out


@dataclass(frozen=True)
class CommitSpec:
    subject: str
    trailers: dict[str, str]
    tree: str
    parents: tuple[str, ...]


def create_commit(repo: pygit2.Repository, spec: CommitSpec) -> str:
    """Write the commit object only; no ref, index or working tree is touched."""
    sig = signature()
    oid = repo.create_commit(None, sig, sig, message(spec.subject, spec.trailers),
                             pygit2.Oid(hex=spec.tree), [pygit2.Oid(hex=p) for p in spec.parents])
    return str(oid)
