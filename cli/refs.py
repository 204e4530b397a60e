"""`iterion refs ...`: a run's git refs - boundaries, produced scope, banks, reverts, pushes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from cli.errors import CliError
from cli.exit_codes import ExitCode
from cli.output import echo, echo_json
from cli.runref import resolve_loose
from gitrefs import RunRefs, list_runs, restore_bank
from gitrefs.boundary import BoundaryLabel
from gitrefs.snapshot import snapshot_workspace
from gitrefs.workspace import open_workspace

refs_app = typer.Typer(
    name="refs",
    help="A worktree run's git refs: boundaries, produced scope, banks, reverts, checkpoint pushes.\n\n"
         "Example: iterion refs list --run-id r1 --repo ./wt",
    no_args_is_help=True,
)

REPO = typer.Option(Path("."), "--repo", help="The run's workspace (a non-bare git checkout).")
RUN = typer.Option(..., "--run-id", "--run", help="The run (id, unique prefix of 4+ characters, or name).")
JSON = typer.Option(False, "--json", help="Print JSON for scripts.")


def _label(text: str) -> BoundaryLabel:
    try:
        return BoundaryLabel.parse(text)
    except ValueError as exc:
        raise CliError(str(exc), hint="a label looks like nodes:build:0 (kind:node:iteration)") from None


def _emit(as_json: bool, data: Any, human: str) -> None:
    if as_json:
        echo_json(data)
    else:
        echo(human)


@refs_app.command("start")
def start_cmd(run: str = RUN,
              base: str | None = typer.Option(None, "--base", help="Base revision (default HEAD)."),
              repo: Path = REPO, as_json: bool = JSON) -> None:
    """Record a run's base so boundaries can chain on it.

    Example: iterion refs start --run-id r1 --repo ./wt
    """
    rr = RunRefs.start(repo, resolve_loose(run, cwd=repo), base)
    base_commit = rr.base_commit()
    _emit(as_json, {"run": run, "base": rr.record().base, "chain_base": base_commit},
          f"run {run} started on {base_commit}")


@refs_app.command("runs")
def runs_cmd(repo: Path = REPO, as_json: bool = JSON) -> None:
    """List the runs recorded in a repository.

    Example: iterion refs runs --repo ./wt --json
    """
    runs = list_runs(repo)
    _emit(as_json, runs, "\n".join(runs) if runs else "no runs")


@refs_app.command("snapshot")
def snapshot_cmd(repo: Path = REPO, as_json: bool = JSON) -> None:
    """Print the tree `git add -A && git write-tree` would record, touching nothing.

    Example: iterion refs snapshot --repo ./wt
    """
    tree = snapshot_workspace(open_workspace(repo))
    _emit(as_json, {"tree": tree}, tree)


@refs_app.command("boundary")
def boundary_cmd(label: str = typer.Argument(..., help="kind:node:iteration (pre|nodes|pause|fail|resume|takeover)."),
                 run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """Write a boundary (a `pre` boundary aliases the chain head).

    Example: iterion refs boundary nodes:build:0 --run-id r1
    """
    rec = RunRefs(repo, resolve_loose(run, cwd=repo)).write_boundary(_label(label))
    _emit(as_json, rec.to_json(), f"{rec.label} {rec.commit} {rec.ref}")


@refs_app.command("list")
def list_cmd(run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """List a run's boundaries in chain order, then its banks.

    Example: iterion refs list --run-id r1 --json
    """
    rr = RunRefs(repo, resolve_loose(run, cwd=repo))
    bounds, banks = rr.boundaries(), rr.banks()
    lines = [f"{b.label}\t{b.commit}" for b in bounds] + [f"bank {b.node}/{b.seq}\t{b.commit}" for b in banks]
    _emit(as_json, {"run": run, "base": rr.base_commit(), "boundaries": [b.to_json() for b in bounds],
                    "banks": [b.to_json() for b in banks]}, "\n".join(lines) if lines else "no boundaries")


@refs_app.command("scope")
def scope_cmd(pivot: str = typer.Argument(..., help="The pivot label, e.g. pre:build:0."),
              run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """Paths the run changed from the pivot onwards (pause..resume intervals excluded).

    Example: iterion refs scope pre:build:0 --run-id r1
    """
    scope = RunRefs(repo, resolve_loose(run, cwd=repo)).produced_scope(_label(pivot))
    data = {"pivot": str(scope.pivot), "empty": scope.empty, "paths": sorted(scope.paths),
            "idle_paths": sorted(scope.idle_paths)}
    human = "\n".join(sorted(scope.paths)) if not scope.empty else "empty scope: nothing to restore"
    _emit(as_json, data, human)


@refs_app.command("bank")
def bank_cmd(node: str = typer.Option(..., "--node", help="The node the bank is taken for."),
             run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """Commit the workspace as it stands under rewind/<node>/<seq> (index untouched).

    Example: iterion refs bank --node build --run-id r1
    """
    rec = RunRefs(repo, resolve_loose(run, cwd=repo)).bank(node)
    _emit(as_json, rec.to_json(), f"{rec.ref} {rec.commit}")


@refs_app.command("revert")
def revert_cmd(label: str = typer.Argument(..., help="The boundary to go back to, e.g. pre:build:0."),
               run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """Bank the workspace, then commit the boundary's tree on top of HEAD and check it out.

    Example: iterion refs revert pre:build:0 --run-id r1
    """
    res = RunRefs(repo, resolve_loose(run, cwd=repo)).revert_to(_label(label))
    _emit(as_json, res.to_json(),
          f"reverted to {res.label}: commit {res.revert_commit}, {len(res.restored)} restored, "
          f"{len(res.removed)} removed; banked as {res.bank.ref}")


@refs_app.command("push")
def push_cmd(what: str = typer.Argument(..., help="A boundary label, a ref or a commit."),
             remote: str = typer.Option("origin", "--remote", help="Remote name, URL or path."),
             run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """Push a boundary or bank commit as a workspace checkpoint, and record it.

    Example: iterion refs push nodes:build:0 --run-id r1 --remote origin
    """
    rec = RunRefs(repo, resolve_loose(run, cwd=repo)).push(remote, what)
    _emit(as_json, rec.to_json(), f"pushed {rec.commit} to {rec.remote} {rec.ref}")


@refs_app.command("hint")
def hint_cmd(run: str = RUN, repo: Path = REPO, as_json: bool = JSON) -> None:
    """Show the recovery hint for the latest successfully pushed checkpoint.

    Example: iterion refs hint --run-id r1 --json
    """
    hint = RunRefs(repo, resolve_loose(run, cwd=repo)).recovery_hint()
    if hint is None:
        _emit(as_json, None, "no checkpoint was pushed successfully")
        return
    _emit(as_json, hint.to_json(),
          f"ref {hint.ref}\ncommit {hint.commit}\nfetch: {hint.fetch_command}\nverify: {hint.verify}")


@refs_app.command("restore-bank")
def restore_bank_cmd(ref: str = typer.Option(..., "--ref", help="The bank ref on the remote."),
                     head: str = typer.Option(..., "--head", help="The recorded head commit of the bank."),
                     base: str = typer.Option(..., "--base", help="The chain's base commit."),
                     remote: str = typer.Option("origin", "--remote", help="Remote name, URL or path."),
                     repo: Path = REPO, as_json: bool = JSON) -> None:
    """Put a run's bank back on a fresh clone: reset to its base, then fast-forward to its head.

    Example: iterion refs restore-bank --ref refs/iterion/runs/r1/checkpoints/3 --head SHA --base SHA
    """
    res = restore_bank(repo, remote, ref, head, base)
    if as_json:
        echo_json(res.to_json())
        if not res.restored:
            raise typer.Exit(ExitCode.REFUSED)
        return
    if not res.restored:
        raise CliError(f"bank not restored: {res.reason}", exit_code=ExitCode.REFUSED,
                       hint="the clone was left unchanged")
    echo(f"restored {res.head} on {res.branch or 'detached HEAD'} (started from base {res.base})")


def register(app: typer.Typer) -> None:
    app.add_typer(refs_app, name="refs")
