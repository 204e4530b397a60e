"""`iterion artifacts` and `iterion attachments`: a run's published artifacts and staged files, read back.

What is listed and what bytes a read returns live in iterion/store/readers.py (the HTTP
endpoints return the same). Here: the table, ``--json``, ``-o FILE``, and the one terminal rule:
bytes that are not text are not poured onto a terminal unless ``-o`` or ``--force`` says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.errors import CliError
from cli.output import echo, echo_bytes, echo_err, echo_json, output_width, stdout_is_terminal, table
from cli.storeopts import NATS, STORE_DIR, open_swept
from iterion.invocation import command

if TYPE_CHECKING:
    from iterion.store import Store

RUN = typer.Option(..., "--run-id", help="The run (id, unique prefix of 4+ characters, or name). Example: --run-id 01a2b3")
JSON = typer.Option(False, "--json", help="Print JSON for scripts. Example: --json")
OUTPUT = typer.Option(None, "-o", "--output", help="Write the bytes to FILE (replaced atomically) instead of stdout. Example: -o report.json")
FORCE = typer.Option(False, "--force", help="Print bytes that are not text to a terminal anyway. Example: --force")


def _open(store_dir: Path | None, nats: str | None, run_ref: str) -> tuple[Store, str]:
    store = open_swept(store_dir, nats=nats)
    return store, store.resolve_run(run_ref)


def is_binary(data: bytes) -> bool:
    """Not text a terminal can show: a NUL byte, or not UTF-8."""
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _deliver(data: bytes, output: Path | None, force: bool, what: str) -> None:
    if output is not None:
        from gitrefs.persist import atomic_write_bytes

        try:
            atomic_write_bytes(output, data)
        except OSError as exc:
            raise CliError(f"cannot write {output}: {exc.strerror or exc}", hint="give a writable path to -o") from None
        echo_err(f"wrote {output} ({len(data)} bytes)")
        return
    if stdout_is_terminal() and is_binary(data) and not force:
        raise CliError(f"{what} is binary ({len(data)} bytes): not printed to a terminal",
                       hint="write it with -o FILE, pipe it, or pass --force")
    echo_bytes(data)


def artifacts_cmd(
    run_id: str = RUN,
    node: str | None = typer.Option(None, "--node", help="Read the artifact this node published (its newest live version unless --version). Example: --node review"),
    version: str | None = typer.Option(None, "--version", help="With --node: this version (a number, or latest); a version tombstoned by a rewind is still readable. Example: --version 2"),
    as_json: bool = JSON,
    output: Path | None = OUTPUT,
    force: bool = FORCE,
    store_dir: Path | None = STORE_DIR,
    nats: str | None = NATS,
) -> None:
    """List a run's published artifacts (node, version, size, created, tombstoned), or read one.

    An artifact reads as its value in indented JSON. Versions a rewind tombstoned are listed as
    such and stay readable by number; the newest live version is read by default.

    Examples:

      iterion artifacts --run-id 01a2b3

      iterion artifacts --run-id 01a2b3 --node review

      iterion artifacts --run-id 01a2b3 --node review --version 1 -o review-v1.json
    """
    from iterion.store.readers import list_artifacts, parse_version, read_artifact

    if node is None and (version is not None or output is not None):
        raise CliError("--version and -o read one artifact: name its node with --node",
                       hint=f"list them first: {command('artifacts', '--run-id', run_id)}")
    wanted = parse_version(version)
    store, rid = _open(store_dir, nats, run_id)
    if node is None:
        entries = list_artifacts(store, rid)
        if as_json:
            echo_json({"run_id": rid, "artifacts": [e.to_json() for e in entries]})
        elif not entries:
            echo(f"run {rid} published no artifact (a node publishes with `publish: NAME`)")
        else:
            rows = [(e.node or "-", e.name, e.version, e.size, e.created_at[:19].replace("T", " "),
                     "tombstoned" if e.tombstoned else "") for e in entries]
            for line in table(("NODE", "NAME", "VERSION", "BYTES", "CREATED (UTC)", "STATE"), rows, output_width()):
                echo(line)
        return
    entry, data = read_artifact(store, rid, node, wanted)
    if entry.tombstoned:
        echo_err(f"note: version {entry.version} of {entry.name} was tombstoned by a rewind (kept for comparison)")
    if as_json and output is None:
        import json

        echo_json({"run_id": rid, **entry.to_json(), "value": json.loads(data)})
        return
    _deliver(data, output, force, f"artifact {entry.name} v{entry.version}")


def attachments_cmd(
    name: str | None = typer.Argument(None, help="The attachment to read (omit to list them)."),
    run_id: str = RUN,
    as_json: bool = JSON,
    output: Path | None = OUTPUT,
    force: bool = FORCE,
    store_dir: Path | None = STORE_DIR,
    nats: str | None = NATS,
) -> None:
    """List a run's attachments (launch inputs, file answers), or read one byte-for-byte.

    Examples:

      iterion attachments --run-id 01a2b3

      iterion attachments --run-id 01a2b3 music -o theme.mp3

      iterion attachments --run-id 01a2b3 notes
    """
    from iterion.store.readers import attachment_file, list_attachments

    if name is None and output is not None:
        raise CliError("-o writes one attachment: name it",
                       hint=command("attachments", "--run-id", run_id, "NAME", "-o", "FILE"))
    store, rid = _open(store_dir, nats, run_id)
    if name is None:
        records = list_attachments(store, rid)
        if as_json:
            echo_json({"run_id": rid, "attachments": records})
        elif not records:
            echo(f"run {rid} has no attachment")
        else:
            rows = [(r["name"], r["original_name"], r["mime"], r["size"], r["sha256"][:12],
                     r["staged_at"][:19].replace("T", " ")) for r in records]
            for line in table(("NAME", "FILE", "TYPE", "BYTES", "SHA256", "STAGED (UTC)"), rows, output_width()):
                echo(line)
        return
    record, path = attachment_file(store, rid, name)
    if as_json and output is None:
        out: dict[str, Any] = {"run_id": rid, **record}
        echo_json(out)
        return
    _deliver(path.read_bytes(), output, force, f"attachment {name} ({record['mime']})")


def register(app: typer.Typer) -> None:
    app.command("artifacts")(artifacts_cmd)
    app.command("attachments")(attachments_cmd)
