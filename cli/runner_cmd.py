"""`iterion runner`: claim queued runs from NATS JetStream and execute them.

Heavy imports (nats, the engine) happen inside the command: CLI start-up never pays for them.
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import typer

from cli.errors import CliError
from cli.exit_codes import ExitCode
from cli.output import echo_err

HELP = """Claim queued runs from the work queue on NATS JetStream and execute them.

Runs are queued by `iterion server --nats URL` (POST /api/runs, POST /api/runs/{id}/resume,
`iterion remote runs launch --repo URL --file PATH`). Any number of runners, on any machines,
may claim from one queue: a per-run lease guarantees a run executes on one runner at a time, and
a run whose runner dies is taken over by another after the lease's TTL. A run bound to a
repository executes in a fresh clone under --work-dir (removed when the run returns) and pushes
its workspace checkpoints to that repository. One log line per claim and per disposition goes to
stderr. SIGTERM: stop claiming, give runs in flight --grace seconds, then hand them back (exit 0;
Ctrl-C does the same and exits 130).

\b
Examples:
  nats-server -js -sd /var/lib/nats &
  iterion runner --nats nats://127.0.0.1:4222
  iterion runner --nats nats://queue.internal:4222 --concurrency 4 --work-dir /srv/iterion/work
"""


def runner_cmd(
    nats: str | None = typer.Option(None, "--nats", metavar="URL", help="The NATS server (JetStream enabled) holding the queue and the run store (default: $ITERION_NATS_URL). Example: --nats nats://127.0.0.1:4222"),
    concurrency: int = typer.Option(1, "--concurrency", min=1, max=64, help="Runs executed at once. Example: --concurrency 4"),
    work_dir: Path | None = typer.Option(None, "--work-dir", help="Where per-run clones go (default: a directory under the system temp dir). Example: --work-dir /srv/iterion/work"),
    store_dir: Path | None = typer.Option(None, "--store-dir", help="This machine's half of the run store: locks, workspace tracking, control requests (default: WORK_DIR/store; run documents, checkpoints and events are in JetStream). Example: --store-dir /srv/iterion/store"),
    prefix: str | None = typer.Option(None, "--prefix", help="Name prefix of the store's and the queue's streams and buckets (default: $ITERION_NATS_PREFIX, else iterion; the server's). Example: --prefix iterion"),
    name: str | None = typer.Option(None, "--name", help="This runner's name in logs and leases (default: HOST-PID). Example: --name runner-a"),
    grace: float = typer.Option(30.0, "--grace", min=0, help="Seconds runs in flight get to finish on SIGTERM before they are handed back. Example: --grace 30"),
    push_every: int = typer.Option(1, "--push-every", min=0, help="Push a repository run's workspace every N nodes (0: only when it stops). Example: --push-every 1"),
    ack_wait: float = typer.Option(60.0, "--ack-wait", min=0.5, help="Seconds before an unacknowledged delivery is offered again (when this runner creates the queue). Example: --ack-wait 60"),
    max_deliver: int = typer.Option(8, "--max-deliver", min=1, help="Deliveries of one message before it is dead-lettered (when this runner creates the queue). Example: --max-deliver 8"),
    lease_ttl: float = typer.Option(30.0, "--lease-ttl", min=0.5, help="Seconds a run's lease outlives its last heartbeat (when this runner creates the queue). Example: --lease-ttl 30"),
    max_daily_cost_usd: float | None = typer.Option(None, "--max-daily-cost-usd", min=0, help="The store's daily spend cap in USD for every run this runner executes (sets $ITERION_DAILY_COST_CAP_USD; 0: no cap). Example: --max-daily-cost-usd 50"),
) -> None:
    from iterion.engine.dailycap import export_cap
    from iterion.engine.recovery import check_env_settings
    from iterion.queue.jsqueue import QueueSettings, WorkQueue
    from iterion.queue.policy import delay_scale
    from iterion.runner.loop import Runner, RunnerConfig
    from iterion.store.errors import StoreError
    from iterion.store.jetstream.bridge import StoreUnavailableError
    from iterion.store.location import check_store_dir
    from iterion.store.opener import nats_prefix, nats_url, open_store

    export_cap(max_daily_cost_usd)
    # the environment numbers the loop reads later: garbage refuses the start, not a claim in flight
    check_env_settings()
    delay_scale()
    url = nats_url(nats)
    if url is None:
        raise CliError("a runner needs the NATS server holding the queue",
                       hint="pass --nats nats://HOST:4222 or set ITERION_NATS_URL")
    prefix = prefix or nats_prefix()
    work = (work_dir or Path(tempfile.gettempdir()) / f"iterion-runner-{os.getuid()}").resolve()
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--work-dir {work}: cannot create it ({exc.strerror or exc})",
                       hint="pass a writable directory") from None
    try:
        store = open_store(check_store_dir((store_dir or work / "store").resolve()), nats=url, prefix=prefix)
        queue = WorkQueue(url, QueueSettings(prefix=prefix, ack_wait_s=ack_wait, max_deliver=max_deliver,
                                             lease_ttl_s=lease_ttl), bridge=store.docs.bridge)  # type: ignore[attr-defined]
    except StoreUnavailableError as exc:
        raise CliError(exc.message, hint=exc.hint) from None
    except (ValueError, StoreError) as exc:  # a prefix no stream can be named after
        raise CliError(f"--prefix {prefix!r}: {getattr(exc, 'message', None) or exc}") from None
    docs: Any = store.docs
    config = RunnerConfig(work_dir=work, concurrency=concurrency, grace_s=grace, push_every=push_every)
    if name:
        config.name = name
    def say(message: str) -> None:  # one line per claim/disposition, time-stamped
        from datetime import datetime

        echo_err(f"{datetime.now().astimezone().strftime('%Y-%m-%dT%H:%M:%S%z')} iterion runner: {message}")

    runner = Runner(store, queue, config, say=say)

    stopped_by: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        echo_err(f"iterion runner: {signal.Signals(signum).name}: stopping (grace {grace:g}s)")
        stopped_by.append(signum)
        runner.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        runner.serve()
    finally:
        queue.close()
        docs.close()
    echo_err(f"iterion runner: stopped after {runner.handled} deliveries")
    if signal.SIGINT in stopped_by:  # Ctrl-C: 130 as every command (a SIGTERM stop is a clean 0)
        raise typer.Exit(ExitCode.INTERRUPTED)


def register(app: typer.Typer) -> None:
    app.command("runner", help=HELP, short_help="Claim queued runs from NATS JetStream and execute them.")(runner_cmd)
