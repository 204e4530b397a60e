"""The one way the CLI prints: user text is written as it is (no Rich markup, no emoji codes).

Every command prints through ``echo``/``echo_err`` so that a node name, an instruction, a path or
a stderr line reaches the terminal byte-for-byte: nothing in user or model text is interpreted.
"""

from __future__ import annotations

import typer


def echo(text: str = "") -> None:
    """One line (or block) of ``text`` on stdout, printed literally."""
    typer.echo(text)


def echo_err(text: str = "") -> None:
    """One line (or block) of ``text`` on stderr, printed literally."""
    typer.echo(text, err=True)
