"""`iterion remote runs ...`: the local verbs against an `iterion server` over HTTP.

Same conventions as the local verbs: `--json` prints the server's JSON, an error is one `error:`
line (the server's message, which is the one the CLI prints locally) plus a `hint:` line, and
the exit code is the one the local verb would use (the server sends it as `exit_code`).
`get`, and `commits` when the commit list is unavailable, print the workspace-checkpoint
recovery hint. httpx is imported inside the commands (never at CLI start-up).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from cli.errors import CliError
from cli.exit_codes import STATUS_EXIT, ExitCode, exit_for_kind
from cli.output import echo, echo_err, echo_json, output_width, table
from gitrefs.persist.text import one_line

ENV_SERVER = "ITERION_SERVER"
ENV_TOKEN = "ITERION_SERVER_TOKEN"

SERVER = typer.Option(None, "--server", help="The server's URL (default: $ITERION_SERVER). Example: --server http://127.0.0.1:8080")
TOKEN_FILE = typer.Option(None, "--token-file", help="File whose first line is the token (default: $ITERION_SERVER_TOKEN). Example: --token-file ~/.iterion-token")
JSON = typer.Option(False, "--json", help="Print the server's answer as JSON. Example: --json")
IF_VERSION = typer.Option(None, "--if-version", min=0, help="Refuse (409) unless the run document is still at this version (compare-and-swap). Example: --if-version 7")

RUN_ARG = typer.Argument(None, help="Run id, unique prefix or name (or pass --run-id).", show_default=False)
RUN_OPT = typer.Option(None, "--run-id", help="The run, as the local verbs take it (same as the positional id). "
                       "Example: --run-id 01a2b3", show_default=False)


def _ref(positional: str | None, option: str | None) -> str:
    """The run named by the positional id or ``--run-id`` (the local verbs' spelling): either, not two."""
    if positional and option and positional != option:
        raise CliError(f"two runs named: {one_line(positional)} and --run-id {one_line(option)}",
                       hint="name the run once, positionally or with --run-id")
    ref = positional or option
    if not ref:
        raise CliError("no run named", hint="pass the run's id, unique prefix or name (or --run-id R); "
                       "`iterion remote runs list` lists them")
    return ref


# A server's errors and hints are the local verbs' own words (`iterion rewind --run-id R`); said by
# `iterion remote` they name the remote verb that does the same on that server.
_LOCAL_VERB = (
    (re.compile(r"\biterion inspect --run-id (\S+) --events\b"), r"iterion remote runs events --run-id \1"),
    (re.compile(r"\biterion inspect --run-id\b"), "iterion remote runs get --run-id"),
    (re.compile(r"\biterion inspect\b(?! --)"), "iterion remote runs list"),
    (re.compile(r"\biterion (resume|rewind|cancel|pause) --run-id\b"), r"iterion remote runs \1 --run-id"),
    (re.compile(r",? or pass --store-dir\b"), ""),  # the server's store is its own: not a flag of `remote`
)


def remote_words(text: str | None) -> str | None:
    """``text`` with every local run verb it names turned into its ``iterion remote runs`` twin."""
    if not text:
        return text
    for pattern, repl in _LOCAL_VERB:
        text = pattern.sub(repl, text)
    return text


def _refusal(body: dict[str, Any]) -> CliError:
    return CliError(remote_words(str(body.get("error"))) or "", hint=remote_words(body.get("hint")),
                    exit_code=exit_for_kind(body.get("exit_code")))


remote_app = typer.Typer(help="Operate runs on an `iterion server` over HTTP.", no_args_is_help=True)
runs_app = typer.Typer(help="List, inspect, resume, cancel, pause and rewind runs of a server.", no_args_is_help=True)
remote_app.add_typer(runs_app, name="runs")


class Client:
    def __init__(self, server: str | None, token_file: Path | None) -> None:
        import httpx

        url = server or os.environ.get(ENV_SERVER)
        if not url:
            raise CliError("no server given", hint=f"pass --server URL or set {ENV_SERVER} (e.g. http://127.0.0.1:8080)")
        if not url.startswith(("http://", "https://")):
            raise CliError(f"--server {url} is not an http(s) URL", hint="e.g. --server http://127.0.0.1:8080")
        try:  # a malformed URL is bad input here, not an internal error at the first request
            parsed = httpx.URL(url)
            bad = "no host" if not parsed.host else (
                f"port {parsed.port} is out of range" if parsed.port is not None and not 0 < parsed.port < 65536 else None)
        except httpx.InvalidURL as exc:
            bad = str(exc)
        if bad is not None:
            raise CliError(f"--server {one_line(url)} is not a usable URL: {bad}", hint="e.g. --server http://127.0.0.1:8080")
        if token_file is not None:
            try:
                lines = token_file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise CliError(f"--token-file {token_file}: {getattr(exc, 'strerror', None) or exc}") from None
            token = lines[0].strip() if lines else ""
        else:
            token = os.environ.get(ENV_TOKEN, "").strip()
        if not token:
            raise CliError("no token given", hint=f"set {ENV_TOKEN} or pass --token-file (the token `iterion server` printed)")
        self.base = url.rstrip("/")
        self.httpx = httpx
        self.client = httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {token}"},
                                   timeout=httpx.Timeout(30.0, read=180.0))

    def _fail(self, exc: Exception) -> CliError:
        return CliError(f"cannot reach the server at {self.base}: {exc}", hint="is `iterion server` running there?",
                        exit_code=ExitCode.REFUSED)

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self.client.request(method, path, **kwargs)
        except self.httpx.HTTPError as exc:
            raise self._fail(exc) from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            if isinstance(body, dict) and body.get("error"):
                raise _refusal(body)
            raise CliError(f"the server answered HTTP {resp.status_code} for {method} {path}",
                           hint="see the server's log", exit_code=ExitCode.INTERNAL if resp.status_code >= 500 else ExitCode.REFUSED)
        return body

    def stream(self, path: str, params: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        """(event type, data) of a server-sent event stream."""
        try:
            with self.client.stream("GET", path, params=params, timeout=self.httpx.Timeout(30.0, read=None)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise _refusal(resp.json())
                kind, data = "message", ""
                for line in resp.iter_lines():
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        data += line[5:].strip()
                    elif line == "" and data:
                        yield kind, json.loads(data)
                        kind, data = "message", ""
        except self.httpx.HTTPError as exc:
            raise self._fail(exc) from None


def _run_path(run_id: str, tail: str = "") -> str:
    from urllib.parse import quote

    return f"/api/runs/{quote(run_id, safe='')}{tail}"


def _event(e: dict[str, Any]) -> Any:
    """A server's event as the store's model, so the local timeline's filter and line apply to it."""
    from iterion.store.events import Event

    return Event.model_validate(e)


def _check_types(types: list[str]) -> None:
    """A --type no event can have (a typo: ``node_fail``) is refused, as locally, not an empty timeline."""
    from difflib import get_close_matches

    from iterion.store.events import EVENT_TYPES

    for t in types:
        if t not in EVENT_TYPES:
            near = get_close_matches(t, sorted(EVENT_TYPES), n=3)
            raise CliError(f"--type {one_line(t)} is not an event type",
                           hint=f"did you mean {' or '.join(near)}?" if near else
                           "`iterion remote runs events R --all` shows every type the run has")


def print_hint(hint: dict[str, Any]) -> None:
    echo(f"workspace checkpoint: {hint['ref']} at {hint['commit']} (event {hint['seq']}, {hint['time']}, "
         f"source {hint['source']})")
    echo(f"  fetch it (from a clone whose origin is the run's repository): {hint['fetch_command']}")
    echo(f"  then verify: {hint['verify']}")


# -- commands --------------------------------------------------------------------------------------
@runs_app.command("list")
def list_cmd(status: str | None = typer.Option(None, "--status", help="Only runs with this status. Example: --status paused_waiting_human"),
             workflow: str | None = typer.Option(None, "--workflow", help="Only runs of this workflow. Example: --workflow demo"),
             limit: int | None = typer.Option(None, "--limit", min=1, help="At most N runs, newest first (default 50). "
                                              "Example: --limit 20"),
             show_all: bool = typer.Option(False, "--all", help="Every run (no --limit)."),
             since: str | None = typer.Option(None, "--since", help="Only runs created since a duration ago or a "
                                              "date. Example: --since 2d"),
             after: str | None = typer.Option(None, "--after", help="The next page, from the cursor the previous "
                                              "page printed (`next` in --json)."),
             server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """List the server's runs, newest first.

    Example: iterion remote runs list --status paused_waiting_human
    Example: iterion remote runs list --limit 20 --after 019af3c2d1e84b7a9c0d1e2f3a4b5c6d
    """
    params: dict[str, Any] = {k: v for k, v in (("status", status), ("workflow", workflow), ("limit", limit),
                                                 ("since", since), ("after", after)) if v is not None}
    if show_all:
        params = {k: v for k, v in params.items() if k != "limit"} | {"all": "1"}
    body = Client(server, token_file).call("GET", "/api/runs", params=params)
    if as_json:
        echo_json(body)
        return
    if not body["runs"]:
        echo("no runs")
        return
    for line in table(("id", "name", "status", "workflow", "created"),
                      [(r["id"], r["name"] or "-", r["status"], r["workflow"] or "-",
                        (r.get("created_at") or "-")[:19].replace("T", " ")) for r in body["runs"]]):
        echo(line)
    if body.get("next"):
        more = body.get("more") or 0
        echo(f"… {more} more run{'s' if more != 1 else ''}: --all or --after {body['next']}")


@runs_app.command("get")
def get_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT,
            server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Show one run: status, failure, pending question, executions, boundaries, recovery hint.

    Example: iterion remote runs get 01a2b3
    """
    run_id = _ref(run_id, run_id_opt)
    body = Client(server, token_file).call("GET", _run_path(run_id))
    if as_json:
        echo_json(body)
        return
    run = body["run"]
    echo(f"{run['id']} ({run['name']})  {run['status']}  workflow {run['workflow_name']}  version {run['version']}")
    if run.get("failure_code") or run.get("error"):
        echo(f"failure: {run.get('failure_code')}: {run.get('error')}")
    echo(f"workspace: {run['workspace_dir']} ({run['workspace_mode']})")
    cp = body.get("checkpoint") or {}
    echo(f"checkpoint node: {cp.get('restart_node')} ({cp.get('anchor')})")
    pending = body.get("pending")
    if pending:
        echo(f"waiting on: {pending['node']} ({pending['kind']})")
        asks = (pending.get("questions") or {}).get("instructions")
        if asks:
            echo(f"  asks: {str(asks).strip()}")
    echo("executed: " + (" ".join(f"{x['node']}:{x['iteration']}" for x in body["executions"]) or "-"))
    echo("boundaries: " + (" ".join(b["label"] for b in body["boundaries"]) or "-"))
    hint = run.get("workspace_checkpoint")
    if hint:
        print_hint(hint)
    undo = body.get("undo")
    if undo:
        echo(f"last rewind (to {undo['to_node']}) can be undone: iterion remote runs rewind {run['id']} --undo")


@runs_app.command("events")
def events_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT,
               after: int = typer.Option(0, "--after", min=0, help="Only events after this sequence number. Example: --after 40"),
               follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events until the run no longer executes. Example: --follow"),
               show_all: bool = typer.Option(False, "--all", help="Include the bookkeeping events (checkpoints, "
                                             "boundaries, captures, edge choices, backend calls), hidden by default "
                                             "as in `iterion inspect --events`. Example: --all"),
               event_type: list[str] = typer.Option([], "--type", help="Only events of this type (repeatable; a "
                                                    "bookkeeping type named here is shown). Example: --type node_failed"),
               event_node: list[str] = typer.Option([], "--node", help="Only events of this node (repeatable). "
                                                    "Example: --node review"),
               server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Print a run's timeline (one line per event; --json one JSON object per line with --follow).

    The filters are `iterion inspect --events`'s: bookkeeping hidden unless --all or named with
    --type. On a terminal each line is fitted to its width and a cut line ends with `…`; into a
    pipe or a file lines are whole (--json: the events whole).

    Example: iterion remote runs events 01a2b3 --follow
    Example: iterion remote runs events --run-id 01a2b3 --type node_failed --node review
    """
    from cli import events_view

    run_id = _ref(run_id, run_id_opt)
    _check_types(event_type)

    def shown(event: Any) -> bool:
        return events_view.keep(event, show_all=show_all, types=event_type, nodes=event_node)

    width = output_width()
    client = Client(server, token_file)
    if follow:
        for kind, data in client.stream(_run_path(run_id, "/events"), {"follow": 1, "after": after}):
            if kind == "end":
                if not as_json:
                    echo_err(f"run {data['run_id']}: {data['status']}")
                return
            if kind == "error":
                raise _refusal(data)
            event = _event(data)
            if not shown(event):
                continue
            if as_json:
                echo(json.dumps(data, ensure_ascii=False))
            else:
                echo(events_view.line(event, width))
        return
    events: list[dict[str, Any]] = []
    while True:
        page = client.call("GET", _run_path(run_id, "/events"), params={"after": after, "limit": 1000})
        events.extend(page["events"])
        after = page["next_after"]
        if not page["more"]:
            break
    kept = [(e, m) for e, m in ((e, _event(e)) for e in events) if shown(m)]
    if as_json:
        echo_json([e for e, _ in kept])
        return
    for _, m in kept:
        echo(events_view.line(m, width))


@runs_app.command("commits")
def commits_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT,
                server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """List a run's boundary commits; when unavailable, say why and print the recovery hint.

    Example: iterion remote runs commits 01a2b3
    """
    run_id = _ref(run_id, run_id_opt)
    body = Client(server, token_file).call("GET", _run_path(run_id, "/commits"))
    if as_json:
        echo_json(body)
        return
    if body.get("available"):
        echo(f"base {body['base_commit']} (branch {body['branch']})")
        for c in body["commits"]:
            echo(f"{c['commit']}  {c['label']}")
        return
    echo(f"commit list unavailable: {body['reason']}")
    hint = body.get("workspace_checkpoint")
    if hint:
        print_hint(hint)
    else:
        echo("no workspace checkpoint was pushed for this run")


def _finish_follow(client: Client, run_id: str, after: int, as_json: bool) -> None:
    status = None
    for kind, data in client.stream(_run_path(run_id, "/events"), {"follow": 1, "after": after}):
        if kind == "end":
            status = data["status"]
            break
        if not as_json and kind in ("node_started", "node_finished", "node_failed", "human_input_requested"):
            echo_err(f"{kind.replace('_', ' ')}: {data.get('node')}")
    detail = client.call("GET", _run_path(run_id))
    if as_json:
        echo_json(detail)
    else:
        run = detail["run"]
        echo(f"run {run['id']} ({run['name']}): {run['status']}")
        if run.get("failure_code") or run.get("error"):
            echo(f"  {run.get('failure_code')}: {run.get('error')}")
    code = STATUS_EXIT.get(str(status or detail["run"]["status"]), ExitCode.FAILED)
    if code:
        raise typer.Exit(code)


@runs_app.command("resume")
def resume_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT,
               answer: list[str] = typer.Option([], "--answer", help="Answer the paused gate (repeatable). Example: --answer approved=true"),
               answers_file: Path | None = typer.Option(None, "--answers-file", help="Answers as a JSON object (types kept); --answer overrides its keys. Example: --answers-file a.json"),
               force: bool = typer.Option(False, "--force", help="Resume although the workflow source changed. Example: --force"),
               model: str | None = typer.Option(None, "--model", help="Use this model for every LLM call from now on (kept by later resumes unless replaced). Example: --model openai/gpt-4o"),
               max_cost_usd: float | None = typer.Option(None, "--max-cost-usd", help="Raise/replace the cost cap (0 inherits). Example: --max-cost-usd 10"),
               max_tokens: int | None = typer.Option(None, "--max-tokens", help="Raise/replace the token cap (0 inherits). Example: --max-tokens 200000"),
               max_duration: str | None = typer.Option(None, "--max-duration", help="Raise/replace the active-time cap (0 inherits). Example: --max-duration 4h"),
               max_iterations: int | None = typer.Option(None, "--max-iterations", help="Raise/replace the node-execution cap (0 inherits). Example: --max-iterations 50"),
               max_parallel_branches: int | None = typer.Option(None, "--max-parallel-branches", help="Replace the fan-out branch cap (0 inherits). Example: --max-parallel-branches 4"),
               wait: bool = typer.Option(True, "--wait/--no-wait", help="Follow the run until it parks and exit with its status (default), or return once it resumed. Example: --no-wait"),
               if_version: int | None = IF_VERSION,
               server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Resume a run on the server; budget flags merge per field over the launch ask, as locally.

    Exit status (with --wait): 0 finished, 1 failed, 4 paused, 5 failed_resumable, 6 cancelled, 2 bad input.

    Example: iterion remote runs resume 01a2b3 --answer approved=true --max-duration 4h
    """
    run_id = _ref(run_id, run_id_opt)
    answers: dict[str, Any] = {}
    if answers_file is not None:
        from iterion.datafile import DataFileError, read_mapping

        try:
            answers.update(read_mapping(answers_file, "answers file"))
        except DataFileError as exc:
            raise CliError(str(exc)) from None
    from cli.flags import key_values
    from iterion.requests import Budget, ResumeRequest

    flags = key_values(answer, "--answer", "approved=true")
    # the model the server parses (iterion/requests.py): refused here as there
    request = ResumeRequest.build(
        answers=answers, force=force, model=model, expected_version=if_version,
        budget=Budget.from_flags(max_cost_usd, max_tokens, max_duration, max_iterations, max_parallel_branches))
    client = Client(server, token_file)
    current = client.call("GET", _run_path(run_id))  # the full id, and where its timeline stands now
    rid, last = current["run"]["id"], current["last_seq"]
    # the file's shape (flat, or node-keyed) fitted to the paused node by the same rule as a local
    # resume, so --answer flags override its keys alike
    pending = current.get("pending") or {}
    names = {str(f.get("name")) for f in (pending.get("questions") or {}).get("fields") or []}
    fitted = request.answers_for(pending.get("node"), names, f"answers file {answers_file}")
    body = request.model_copy(update={"answers": {**fitted, **flags}}).wire()
    result = client.call("POST", _run_path(rid, "/resume"), json=body)
    if result.get("queued") and wait:  # a runner picks it up: wait for its claim, then follow
        last = _wait_claimed(client, rid, last)
    if not wait:
        if as_json:
            echo_json(result)
        else:
            echo(f"run {rid} resumed on {client.base}; follow it with: iterion remote runs events {rid} --follow")
        return
    _finish_follow(client, rid, last, as_json)


def _control(action: str, run_id: str, wait: float, if_version: int | None, server: str | None,
             token_file: Path | None, as_json: bool) -> None:
    from iterion.requests import ControlRequest

    body = ControlRequest.build(wait=wait, expected_version=if_version).wire()
    out = Client(server, token_file).call("POST", _run_path(run_id, f"/{action}"), json=body)
    if as_json:
        echo_json(out)
    else:
        where = f" at {out['restart_node']}" if out.get("restart_node") else ""
        echo(f"run {out['run_id']}: {out['status']}{where}" + (f" ({remote_words(out['message'])})" if out.get("message") else ""))
        if out["status"] in ("cancelled", "paused_operator"):
            echo(f"resume with: iterion remote runs resume {out['run_id']}")
    if out.get("delivered") == "pending":
        raise typer.Exit(ExitCode.CONTROL_PENDING)


WAIT = typer.Option(10.0, "--wait", min=0, max=60, help="Seconds the server waits for the run's process to act (0: just ask). Example: --wait 5")


@runs_app.command("cancel")
def cancel_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT, wait: float = WAIT,
               if_version: int | None = IF_VERSION, server: str | None = SERVER, token_file: Path | None = TOKEN_FILE,
               as_json: bool = JSON) -> None:
    """Cancel a run on the server (it stays resumable). Exit 7: requested, not yet in effect.

    Example: iterion remote runs cancel 01a2b3
    """
    run_id = _ref(run_id, run_id_opt)
    _control("cancel", run_id, wait, if_version, server, token_file, as_json)


@runs_app.command("pause")
def pause_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT, wait: float = WAIT,
              if_version: int | None = IF_VERSION, server: str | None = SERVER, token_file: Path | None = TOKEN_FILE,
              as_json: bool = JSON) -> None:
    """Pause a running run at its next node boundary. Exit 7: requested, not yet in effect.

    Example: iterion remote runs pause 01a2b3
    """
    run_id = _ref(run_id, run_id_opt)
    _control("pause", run_id, wait, if_version, server, token_file, as_json)


@runs_app.command("rewind")
def rewind_cmd(run_id: str | None = RUN_ARG, run_id_opt: str | None = RUN_OPT,
               node: str | None = typer.Option(None, "--node", help="The node to replay from. Example: --node write"),
               auto: bool = typer.Option(False, "--auto", help="Rewind to the earliest node an edit of the workflow affects. Example: --auto"),
               restore_scope: str | None = typer.Option(None, "--restore-scope", help="produced, full or none. Example: --restore-scope none"),
               dry_run: bool = typer.Option(False, "--dry-run", help="Show what would happen; change nothing. Example: --dry-run"),
               undo: bool = typer.Option(False, "--undo", help="Put back the files and the checkpoint the last rewind of the run changed (refused once the run moved on). Example: --undo"),
               if_version: int | None = IF_VERSION,
               server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Rewind a parked run on the server to a node it executed, or undo its last rewind.

    Prints what `iterion rewind` prints locally (the server runs the same rewind and undo).

    Example: iterion remote runs rewind 01a2b3 --node write --dry-run
    Example: iterion remote runs rewind 01a2b3 --undo
    """
    run_id = _ref(run_id, run_id_opt)
    from cli.rewind import print_result, print_undo
    from iterion.requests import RewindRunRequest, UndoRewindRequest

    if undo:
        if node or auto or dry_run or restore_scope:
            raise CliError("--undo takes only the run (and --if-version, --json): it puts back what the last "
                           "rewind changed")
        undo_body = UndoRewindRequest.build(expected_version=if_version).wire()
        undone = Client(server, token_file).call("POST", _run_path(run_id, "/rewind/undo"), json=undo_body)
        if as_json:
            echo_json(undone)
        else:
            print_undo(undone, f"iterion remote runs resume {undone['run_id']}")
        return
    body = RewindRunRequest.build(node=node, auto=auto, restore_scope=restore_scope, dry_run=dry_run,
                                  expected_version=if_version).wire()
    out = Client(server, token_file).call("POST", _run_path(run_id, "/rewind"), json=body)
    if as_json:
        echo_json(out)
        return
    print_result(out, f"iterion remote runs resume {out['run_id']}", f"iterion remote runs rewind {out['run_id']} --undo")


def _wait_claimed(client: Client, run_id: str, after: int, timeout_s: float = 3600.0) -> int:
    """The seq to follow from once a runner resumed the run (or dropped the request: then exit)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page = client.call("GET", _run_path(run_id, "/events"), params={"after": after, "limit": 1000})
        for e in page["events"]:
            if e["type"] == "run_resumed":
                return int(e["seq"]) - 1
            if e["type"] in ("run_delivery_dropped", "run_retry_skipped"):
                raise CliError(f"run {run_id}: the queued resume was dropped ({e['payload'].get('reason')}): "
                               f"{e['payload'].get('message') or e['payload'].get('error') or ''}".rstrip(": "),
                               exit_code=ExitCode.REFUSED)
        time.sleep(0.5)
    raise CliError(f"run {run_id}: no runner claimed the resume within {timeout_s:g}s",
                   hint="is an `iterion runner` claiming from the server's queue?", exit_code=ExitCode.CONTROL_PENDING)


@runs_app.command("launch")
def launch_cmd(repo: str = typer.Option(..., "--repo", help="The repository the run executes in (cloned fresh by the runner). Example: --repo https://git.example.com/team/app.git"),
               file: str = typer.Option(..., "--file", help="The workflow's path inside the repository. Example: --file flows/review.bot"),
               ref: str | None = typer.Option(None, "--ref", help="Branch, tag or commit to clone (default: the repository's HEAD). Example: --ref main"),
               var: list[str] = typer.Option([], "--var", help="A workflow var (repeatable). Example: --var target=prod"),
               preset: str | None = typer.Option(None, "--preset", help="A preset of the workflow. Example: --preset fast"),
               request_id: str | None = typer.Option(None, "--request-id", help="An idempotency key: the same key queues the run once. Example: --request-id deploy-4711"),
               server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Queue a run bound to a repository on the server's queue and print its id.

    Needs `iterion server --nats URL` and at least one `iterion runner --nats URL`.

    Example: iterion remote runs launch --repo https://git.example.com/app.git --ref main --file flows/review.bot --var pr=42
    """
    from cli.flags import key_values
    from iterion.requests import QUEUE, LaunchRequest

    request = LaunchRequest.build(executor=QUEUE, repo_url=repo, file=file, ref=ref, preset=preset,
                                  request_id=request_id, vars=dict(key_values(var, "--var", "target=prod")))
    body = request.wire()
    result = Client(server, token_file).call("POST", "/api/runs", json=body)
    if as_json:
        echo_json(result)
    elif not result.get("queued"):
        echo(result["run_id"])
        echo_err("iterion: warning: the server executed the run itself (it has no queue)")
    else:
        echo(result["run_id"])


@remote_app.command("queue")
def queue_cmd(server: str | None = SERVER, token_file: Path | None = TOKEN_FILE, as_json: bool = JSON) -> None:
    """Show the server's queue: pending, in-flight and dead-lettered deliveries.

    Example: iterion remote queue --json
    """
    body = Client(server, token_file).call("GET", "/api/queue")
    if as_json:
        echo_json(body)
        return
    echo(f"pending {body['pending']}, in flight {body['in_flight']}, dead-lettered {body['dead_lettered']} "
         f"(max deliveries {body['max_deliver']}, ack wait {body['ack_wait_s']:g}s)")
    rows = [(str(d["seq"]), d.get("state") or "-", d.get("kind") or "-", d.get("run_id") or "-",
             (d.get("lease") or {}).get("runner") or "-", d.get("reason") or d.get("error") or "")
            for d in [*body["deliveries"], *body["dead_letters"]]]
    if rows:
        for line in table(("seq", "state", "kind", "run", "runner", "reason"), rows):
            echo(line)


def register(app: typer.Typer) -> None:
    app.add_typer(remote_app, name="remote")
