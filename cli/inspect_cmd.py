"""`iterion inspect`: the run list, and one run in detail (its timeline with --events/--follow).

Its own module, apart from `run` and `resume`: listing runs imports neither the engine nor a
document model (pydantic): the list reads each run document plainly (iterion/store/summary.py),
and only showing one run reads its documents through their models (issue 14, point 10;
tests/cli/test_startup.py pins the modules it loads).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli import events_view
from cli.errors import CliError
from cli.output import echo, echo_json, styled
from cli.parked import answer_command, field_line, resume_command, store_args
from cli.runlist import print_runs
from cli.storeopts import NATS, STORE_DIR, open_swept
from iterion.rewind.marker import has_intent
from iterion.store.docstore import CorruptRun
from iterion.store.lock import is_held
from iterion.store.status import RunStatus
from iterion.store.subbot_tree import tree_lines

if TYPE_CHECKING:
    from iterion.api import Run
    from iterion.store import Store
    from iterion.store.runindex import IndexRow
    from iterion.store.summary import RunSummary


DEFAULT_LIMIT = 50  # the run list shows the newest 50 unless --limit or --all says otherwise


def _owner_may_live(store: Store, run_id: str) -> bool:
    """For --follow: a local lock holder, or (shared store: the owner may be on another machine)
    an event written within the staleness window."""
    if is_held(store.run_dir(run_id)):
        return True
    if not store.shared:
        return False
    import time

    from iterion.store.store import STALE_AFTER_S

    flushed = store.last_flush_time(run_id)
    return flushed is not None and time.time() - flushed < STALE_AFTER_S



def _age(created: datetime) -> str:
    secs = max(0, int((datetime.now(UTC) - created).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _list_row(r: RunSummary | CorruptRun, store: Store) -> dict[str, Any]:
    if isinstance(r, CorruptRun):
        return {"id": r.id, "name": "-", "status": r.status, "workflow": "-", "age": "-", "failure_code": None,
                "error": f"run.json is corrupt ({r.detail}): {r.path}"}
    return {"id": r.id, "name": r.name, "status": r.status.value, "workflow": r.workflow_name,
            "age": _age(r.created_at), "failure_code": r.failure_code,
            "rewind_interrupted": has_intent(store, r.id)}


def _list(store: Store, *, limit: int | None, status: list[str], workflow: str | None, since: str | None,
          after: str | None, as_json: bool, paged_json: bool) -> None:
    """The run list: one page of the run index (iterion/store/runindex.py), shown oldest first as
    it always was; ``paged_json``: --json is {"runs", "next", "total"} instead of the bare list."""
    from iterion.store.runindex import parse_since, unique_prefix_length

    _refuse_unknown(status, {s.value for s in RunStatus} | {"corrupt"}, lambda s: f"--status {s} is not a run status",
                    "statuses: " + ", ".join(s.value for s in RunStatus))
    try:
        since_at = parse_since(since) if since else None
    except ValueError as exc:
        raise CliError(f"--{exc}", hint="e.g. --since 2d or --since 2026-12-01") from None
    every = store.index_rows()
    page = store.run_page(status=set(status) or None, workflow=workflow, since=since_at, after=after, limit=limit,
                          rows=every)
    ids = sorted(r.id for r in every)
    rows = []
    for r in reversed(page.rows):  # an unreadable run.json lists as `corrupt`
        rows.append(_list_row(_entry(store, r), store))
        rows[-1]["short_id"] = r.id[:unique_prefix_length(ids, r.id)]
    if as_json:
        echo_json({"runs": rows, "next": page.next, "total": page.total} if paged_json else rows)
        return
    if not rows:
        echo(f"no runs in {store.where() if store.shared else store.root}" if not (status or workflow or since or after)
             else "no runs match")
        return
    print_runs(rows)
    if page.next:
        echo(f"… {page.more} more run{'s' if page.more != 1 else ''}: --all or --after {page.next}")


def _entry(store: Store, r: IndexRow) -> RunSummary | CorruptRun:
    from iterion.store.summary import RunSummary

    if r.corrupt:
        where: Path | str = store.paths(r.id).run_json if not store.shared else f"{store.where()}/{r.id}"
        return CorruptRun(r.id, where, r.error or "")
    assert r.created is not None and r.name is not None and r.workflow is not None
    return RunSummary(r.id, r.name, RunStatus(r.status), r.workflow, datetime.fromisoformat(r.created), r.failure_code)


BOUNDARIES_SHOWN = 6  # the text view names this many boundaries (the first and last), --boundaries all


def _stamp(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at is not None else "-"


def _span(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``4.2s``: a duration for a person."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    secs = int(seconds)
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m"


def _time_lines(run: Run, timing: dict[str, Any]) -> list[str]:
    total = _span(timing["duration_s"])
    return [f"started: {_stamp(run.created_at)}",
            f"ended: {_stamp(run.ended_at)}, took {total}" if run.ended_at is not None
            else f"ended: - (not ended: {run.status.value}), {total} so far"]


def _boundary_line(boundaries: list[dict[str, Any]], every: bool) -> str:
    """``boundaries: 24 (pre:gather:0 pre:plan:0 … pause:approve:0)``; ``every``: all of them."""
    labels = [str(b["label"]) for b in boundaries]
    if not labels:
        return "boundaries: -"
    if every or len(labels) <= BOUNDARIES_SHOWN:
        return f"boundaries: {len(labels)}: " + " ".join(labels)
    half = BOUNDARIES_SHOWN // 2
    return (f"boundaries: {len(labels)}: " + " ".join(labels[:half]) + " … " + " ".join(labels[-half:])
            + " (--boundaries lists all)")


def _continue_with(run: Run, where: list[str]) -> str | None:
    """The exact command that continues a parked run (None for a running or ended run)."""
    pending = run.detail.get("pending")
    if run.status is RunStatus.PAUSED_WAITING_HUMAN and pending:
        return answer_command(run.name or run.id, pending, where)
    if run.status in (RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED, RunStatus.PAUSED_OPERATOR):
        return resume_command(run.name or run.id, run.failure_code, run.error, where)
    return None


def _refuse_unknown(given: list[str], known: AbstractSet[str], message: Callable[[str], str], otherwise: str) -> None:
    """The first of ``given`` not in ``known`` is refused (``message`` of it), with the closest
    known values as the hint, else ``otherwise``."""
    from difflib import get_close_matches

    for g in given:
        if g not in known:
            near = get_close_matches(g, sorted(known), n=3)
            raise CliError(message(g), hint=f"did you mean {' or '.join(near)}?" if near else otherwise)


def _check_types(types: list[str], timeline: list[Any]) -> None:
    """A --type no event can have (a typo: ``node_fail``) is refused, not an empty timeline."""
    if not types:
        return
    from iterion.store.events import EVENT_TYPES

    _refuse_unknown(types, EVENT_TYPES | {e.type for e in timeline}, lambda t: f"--type {t} is not an event type",
                    "`iterion inspect --run-id R --events --all` shows every type the run has")


def _workflow_nodes(file_path: str | None) -> set[str] | None:
    """The node names of the run's workflow as its file compiles now (None: it does not)."""
    if not file_path:
        return None
    from iterion.dsl import load_workflow

    try:
        wf = load_workflow(file_path).workflow
    except (OSError, ValueError):
        return None
    return set(wf.nodes) if wf is not None else None


def _check_nodes(nodes: list[str], timeline: list[Any], run: Run) -> None:
    """A --node the run has no node of (a typo: ``reveiw``) is refused, not an empty timeline.
    Known: the nodes of its timeline and of its workflow; when the workflow no longer compiles
    and the run can still go on, a node not yet in the timeline may yet come: let it pass."""
    if not nodes:
        return
    known = {e.node for e in timeline if e.node}
    wf_nodes = _workflow_nodes(run.file)
    if wf_nodes is None and not run.status.is_terminal:
        return
    known |= wf_nodes or set()
    _refuse_unknown(nodes, known, lambda n: f"--node {n}: run {run.id} has no node {n!r}",
                    "its nodes: " + ", ".join(sorted(known)) if known else
                    "`iterion inspect --run-id R --events --all` shows every event the run has")


def inspect_cmd(
    run_id: str | None = typer.Option(None, "--run-id", help="Show one run in detail (id, unique prefix or name)."),
    events: bool = typer.Option(False, "--events", help="With --run-id: also print the run's timeline "
                                "(bookkeeping events hidden; see --all)."),
    show_all: bool = typer.Option(False, "--all", help="Without --run-id: list every run (no --limit). With "
                                  "--events: include the bookkeeping events (checkpoints, boundaries, captures, "
                                  "edges, backend calls)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Without --run-id: list the N newest runs "
                                     f"(default {DEFAULT_LIMIT}). Example: --limit 20"),
    status: list[str] = typer.Option([], "--status", help="Without --run-id: only runs with this status "
                                     "(repeatable). Example: --status failed_resumable"),
    workflow: str | None = typer.Option(None, "--workflow", help="Without --run-id: only runs of this workflow."),
    since: str | None = typer.Option(None, "--since", help="Without --run-id: only runs created since a "
                                     "duration ago or a date. Example: --since 2d, --since 2026-12-01"),
    after: str | None = typer.Option(None, "--after", help="Without --run-id: the next page, from the cursor "
                                     "the previous page printed."),
    event_type: list[str] = typer.Option([], "--type", help="With --events: only events of this type "
                                         "(repeatable). Example: --type node_failed"),
    event_node: list[str] = typer.Option([], "--node", help="With --events: only events of this node "
                                         "(repeatable). Example: --node review"),
    follow: bool = typer.Option(False, "--follow", "-f", help="With --run-id: print the timeline, then stream "
                                "new events until the run parks or ends."),
    show_boundaries: bool = typer.Option(False, "--boundaries", help="With --run-id: list every boundary "
                                         "(the summary names the first and last few). Example: --boundaries"),
    store_dir: Path | None = STORE_DIR,
    nats: str | None = NATS,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List runs, or show one run: status, failure, checkpoint node, outputs, boundaries, budget.

    Example: iterion inspect --run-id 01a2b3 --events --follow
    Example: iterion inspect --nats nats://127.0.0.1:4222 --run-id 01a2b3 --events
    """
    events = events or follow or bool(event_type or event_node or (show_all and run_id is not None))
    if follow and as_json:
        raise CliError("--follow streams lines for a person; it does not combine with --json",
                       hint="drop --json, or poll `iterion inspect --run-id R --events --json`")
    if run_id is None and events:
        raise CliError("--events, --follow, --type, --node and --all need --run-id",
                       hint="list the runs with `iterion inspect`, then pass --run-id")
    paging = bool(limit or status or workflow or since or after or show_all)
    if run_id is not None and (limit or status or workflow or since or after):
        raise CliError("--limit, --status, --workflow, --since and --after filter the run list: "
                       "they do not combine with --run-id", hint="drop --run-id to list runs")
    store = open_swept(store_dir, nats=nats)
    if run_id is None:
        _list(store, limit=None if show_all else (limit or DEFAULT_LIMIT), status=status, workflow=workflow,
              since=since, after=after, as_json=as_json, paged_json=paging)
        return
    from iterion import api  # one run: read through the Python API, as every caller reads it

    run = api.inspect(run_id, store=store)
    rid = run.id
    # the JSON is the API's detail with the command line that continues the run, in its place
    detail: dict[str, Any] = {}
    for key, value in run.detail.items():
        if key == "processes":
            detail["continue_with"] = _continue_with(run, store_args(store))
        detail[key] = value
    interrupted = run.interrupted_rewind
    boundaries, rewinds = detail["boundaries"], detail["rewinds"]
    hint = detail.get("workspace_checkpoint")
    timeline = store.read_events(rid) if events else []
    _check_types(event_type, timeline)
    _check_nodes(event_node, timeline, run)
    filters: dict[str, Any] = {"show_all": show_all, "types": event_type, "nodes": event_node}
    if as_json:
        if events:
            detail["events"] = [e.model_dump(mode="json") for e in timeline if events_view.keep(e, **filters)]
        echo_json(detail)
        return
    echo(styled(run.id, "bold"), f" ({run.name})  {run.status.value}  workflow {run.workflow}")
    for line in _time_lines(run, detail):
        echo(line)
    if run.failure_code or run.error:
        echo("failure: " + ": ".join(str(x) for x in (run.failure_code, run.error) if x))
    if interrupted:
        echo(interrupted)
    if rewinds:
        latest = rewinds[-1]
        echo(f"rewinds: {len(rewinds)}, the last to {latest['to_node']} at "
             f"{_stamp(datetime.fromisoformat(latest['time']))}")
    echo(f"workspace: {run.workspace or '-'} ({run.mode})")
    if detail["parent"]:
        echo(f"launched by: run {detail['parent']['run']}, subbot node {detail['parent']['node']}")
    if detail["subbot_children"]:
        echo("subbot children:")
        for line in tree_lines(detail["subbot_children"]):
            echo(line)
    echo(f"checkpoint node: {detail['checkpoint_node']} ({detail['anchor']})" if detail["checkpoint_node"]
         else "checkpoint node: - (" + (detail["anchor"] or "no checkpoint yet") + ")")
    if detail["pending"]:
        echo(f"waiting on: {detail['pending']['node']} ({detail['pending']['kind']})")
        asks = (detail["pending"].get("questions") or {}).get("instructions")
        if asks:
            echo(f"  asks: {str(asks).strip()}")
        question = (detail["pending"].get("questions") or {}).get("question")
        if question:
            echo(f"  asks: {str(question).strip()}")
        for f in (detail["pending"].get("questions") or {}).get("fields") or []:
            echo(f"    {field_line(f)}")
    if detail["continue_with"]:
        echo(f"continue with: {detail['continue_with']}")
    echo("executed: " + (" ".join(detail["executed"]) or "-"))
    consumed = detail["budget"]["consumed"] or {}
    echo(f"budget consumed: tokens {consumed.get('tokens', 0)}, cost ${consumed.get('cost_usd', 0):.4f}, "
              f"iterations {consumed.get('iterations', 0)}, active {consumed.get('active_duration_s', 0):.2f}s")
    echo(_boundary_line(boundaries, show_boundaries))
    if run.final_commit:
        echo(f"final state: {run.final_commit}" + (f" on branch {run.final_branch}" if run.final_branch else ""))
    if hint is not None:
        echo(f"workspace checkpoint: {hint['ref']} = {hint['commit']} (pushed to {hint['remote']} at {hint['time']})")
        echo(f"  fetch (in a clone whose origin is that repository): {hint['fetch_command']}")
        echo(f"  verify: {hint['verify']}")
    for node, output in detail["outputs"].items():
        echo(f"  {node}: {json.dumps(output, ensure_ascii=False)[:160]}")
        for line in truncation_lines(output):
            echo(f"    {line}")
    for child in detail["processes"]:
        echo(f"live process group: {child['pgid']} ({child['what']}, started {child['started']})")
    last = events_view.show(timeline, **filters)
    if follow:
        events_view.follow(lambda seq: store.read_events(rid, after_seq=seq), lambda: store.load_run(rid).status.value,
                           lambda: _owner_may_live(store, rid), after=last, locked=lambda: store.is_locked(rid),
                           **filters)


def truncation_lines(output: Any) -> list[str]:
    """One line per stream of a node's output cut to its inline share (iterion/engine/outputcap.py)."""
    marks = output.get("truncated") if isinstance(output, dict) else None
    if not isinstance(marks, dict):
        return []
    lines = []
    for stream, mark in marks.items():
        if isinstance(mark, dict) and mark.get("truncated"):
            where = f"all of it in {mark['path']}" if mark.get("path") else "the rest was not kept"
            lines.append(f"{stream} truncated: {mark.get('size')} bytes, the first {mark.get('kept')} inline; {where}")
    return lines


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect_cmd)
