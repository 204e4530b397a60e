"""`iterion server`: the HTTP run service and web timeline over this project's run store.

Heavy imports (starlette, uvicorn) happen inside the command: CLI start-up never pays for them.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import typer

from cli.errors import CliError
from cli.output import echo, echo_err
from cli.preflight import NATS_HELP, open_store

HELP = """Serve the run store over HTTP: the JSON API under /api/ and the web timeline at /.

Prints one line, `open http://HOST:PORT/?token=TOKEN`: open it in a browser (the page keeps the
token in a cookie), or send `Authorization: Bearer TOKEN` from scripts and `iterion remote`.
The token comes from --token-file, else $ITERION_SERVER_TOKEN, else one generated on first start
and saved (0600) under the store's server/ directory. A non-loopback --host needs an explicit
token (--token-file or $ITERION_SERVER_TOKEN). Launched and resumed runs execute in their own
processes: stopping the server does not stop them.

\b
Examples:
  iterion server
  iterion server --port 0                 # a free port; the printed line names it
  ITERION_SERVER_TOKEN=$(cat ~/.iterion-token) iterion server --host 0.0.0.0 --port 8080
  iterion server --nats nats://127.0.0.1:4222   # runs in JetStream, executed by `iterion runner`s
  iterion server --nats nats://127.0.0.1:4222 --no-queue   # shared store, runs execute here
"""


def _project_root(explicit: Path | None) -> Path:
    if explicit is not None:
        if not explicit.is_dir():
            raise CliError(f"--project {explicit} is not a directory", hint="pass the project's directory")
        return explicit.resolve()
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             check=False, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        top = ""
    return Path(top).resolve() if top else Path.cwd().resolve()


def server_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default). Example: --host 127.0.0.1"),
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="Port to bind (0: a free one). Example: --port 8080"),
    store_dir: Path | None = typer.Option(None, "--store-dir", help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a git repository, else <project>/.iterion). Example: --store-dir /var/tmp/iterion-store"),
    token_file: Path | None = typer.Option(None, "--token-file", help="File whose first line is the bearer token (default: $ITERION_SERVER_TOKEN, else a generated one). Example: --token-file ~/.iterion-token"),
    project: Path | None = typer.Option(None, "--project", help="The directory requests may name files in (default: the git top level, else the current directory). Example: --project ."),
    max_body: int = typer.Option(1024 * 1024, "--max-body", min=1024, help="Largest request body in bytes. Example: --max-body 1048576"),
    nats: str | None = typer.Option(None, "--nats", metavar="URL", help=NATS_HELP),
    queue: bool | None = typer.Option(None, "--queue/--no-queue", help="Queue launches and resumes for `iterion runner` instead of executing them here (default: on with a --nats store, off with the files). Example: --nats nats://127.0.0.1:4222 --no-queue"),
    max_daily_cost_usd: float | None = typer.Option(None, "--max-daily-cost-usd", min=0, help="The store's daily spend cap in USD for every run this server executes (sets $ITERION_DAILY_COST_CAP_USD; 0: no cap; queued runs follow their runner's). Example: --max-daily-cost-usd 50"),
) -> None:
    from iterion.engine.dailycap import daily_cap, export_cap
    from iterion.server.auth import is_loopback, load_token

    export_cap(max_daily_cost_usd)
    daily_cap()  # a garbage $ITERION_DAILY_COST_CAP_USD: refused at start, not in each run

    store = open_store(store_dir, write=True, nats=nats)
    work_queue = None
    if queue is None:
        queue = store.shared  # the rule: --nats selects the store and the queue together
    if queue:
        if not store.shared:
            raise CliError("--queue needs a shared run store: runners must see the runs it queues",
                           hint="add --nats nats://HOST:PORT (or set ITERION_NATS_URL)")
        from iterion.queue.jsqueue import QueueSettings, WorkQueue

        docs = store.docs
        # one connection for the store and the queue
        work_queue = WorkQueue(docs.url, QueueSettings(prefix=docs.prefix),  # type: ignore[attr-defined]
                               bridge=docs.bridge)  # type: ignore[attr-defined]
    root = _project_root(project)
    token = load_token(token_file, store.root)
    if not is_loopback(host) and not token.explicit:
        raise CliError(f"refusing to bind {host}: a non-loopback address needs a token you chose",
                       hint="pass --token-file FILE or set ITERION_SERVER_TOKEN (or bind 127.0.0.1)")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        raise CliError(f"cannot bind {host}:{port}: {exc.strerror or exc}",
                       hint="choose another --port (0 picks a free one)") from None
    bound_port = sock.getsockname()[1]

    import uvicorn

    from iterion.server.app import create_app
    from iterion.server.service import Service

    service = Service(store, root, queue=work_queue)
    try:
        promoted = service.reconcile()  # the spec: server start-up reconciles orphans
    except Exception as exc:  # noqa: BLE001 - a sweep problem must not stop the service
        echo_err(f"iterion: warning: orphan sweep skipped: {exc}")
        promoted = []
    for p in promoted:
        at = f" at {p['restart_node']}" if p.get("restart_node") else " (no checkpoint)"
        echo_err(f"iterion: run {p['run_id']} was orphaned (its process is gone): promoted to {p['status']}{at}")
    if token.source == "generated":
        echo_err(f"iterion: generated a token, saved to {token.path} (0600)")
    shown = f"[{host}]" if ":" in host else host
    echo(f"open http://{shown}:{bound_port}/?token={token.value}")
    app = create_app(service, token.value, max_body=max_body)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3,
                            lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def register(app: typer.Typer) -> None:
    app.command("server", help=HELP, short_help="Serve the run store over HTTP (API + web timeline).")(server_cmd)
