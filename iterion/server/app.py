"""The ASGI application of ``iterion server``: the JSON API under /api/, the web timeline, probes.

Starlette rather than FastAPI: every answer must carry the CLI's own one-line message (a
validation layer that writes its own 422 bodies would have to be undone), the service has a
dozen routes and no schema UI to offer, and Starlette is the small core FastAPI itself sits on
(one dependency less, a faster start). uvicorn serves it.

Security (docs/technical/web-security.md): every /api/ read and every page needs the token (a
bearer header, or for the browser the HttpOnly SameSite=Strict cookie set once from ``?token=``);
a state-changing call needs it in a HEADER (the cookie alone is never enough: it is sent to every
port of the host) and, when the browser names the request's origin, this server's own origin
(iterion/server/guard.py). Bodies are ``application/json`` objects, capped (413 past
``max_body``) and parsed bounded (422 past a nesting depth).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from gitrefs.persist.errors import ErrorKind
from iterion.server import web
from iterion.server.apierror import ApiError, bad_input
from iterion.server.auth import COOKIE, matches
from iterion.server.guard import MUTATING, cross_site_error, header_token, origin_refusal, parse_json_object
from iterion.server.service import Service
from iterion.store.follow import POLL_S, Follower

MAX_BODY_BYTES = 1024 * 1024
PAGE_HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                "Content-Security-Policy": "frame-ancestors 'none'", "Referrer-Policy": "no-referrer"}
# an artifact or attachment read back: never sniffed, framed or rendered as a page of this origin
DOWNLOAD_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                    "Content-Security-Policy": "sandbox; default-src 'none'"}
FOLLOW_POLL_S = POLL_S  # the one follow timing (iterion.store.follow)
FOLLOW_HEARTBEAT_S = 15.0

Handler = Callable[[Request], Awaitable[Response]]


def error_response(exc: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def create_app(service: Service, token: str, *, max_body: int = MAX_BODY_BYTES) -> Starlette:
    def authorized(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            return matches(header[7:].strip(), token)
        return header_token(request, token) or matches(request.cookies.get(COOKIE), token)

    def refusal(request: Request) -> ApiError | None:
        """401 without the token; 403 for a state-changing call that carries it only in the
        cookie, or for any API call the browser says comes from another origin."""
        if not authorized(request):
            return ApiError(401, "missing or wrong token",
                            hint="send `Authorization: Bearer TOKEN` (the token `iterion server` printed, or "
                                 "ITERION_SERVER_TOKEN)", exit_code=ErrorKind.BAD_INPUT)
        if request.method in MUTATING and not header_token(request, token):
            return ApiError(403, f"a {request.method} needs the token in a header, not only in the cookie",
                            hint="send `Authorization: Bearer TOKEN` or `X-Iterion-Token: TOKEN`",
                            exit_code=ErrorKind.BAD_INPUT)
        why = origin_refusal(request)
        return cross_site_error(why) if why is not None else None

    async def read_json(request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            raise ApiError(413, f"request body of {declared} bytes is over the limit of {max_body} bytes",
                           exit_code=ErrorKind.BAD_INPUT)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise ApiError(413, f"request body is over the limit of {max_body} bytes", exit_code=ErrorKind.BAD_INPUT)
            chunks.append(chunk)
        return parse_json_object(b"".join(chunks), request.headers.get("content-type", ""))

    def api(fn: Callable[[Request], Awaitable[Any]], *, status: int = 200) -> Handler:
        async def endpoint(request: Request) -> Response:
            refused = refusal(request)
            if refused is not None:
                return error_response(refused)
            try:
                result = await fn(request)
            except ApiError as exc:
                return error_response(exc)
            if isinstance(result, Response):
                return result
            return JSONResponse(result, status_code=status)
        return endpoint

    def int_param(request: Request, name: str, default: int | None) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise bad_input(f"{name} must be an integer, got {raw!r}") from None

    # -- /api/ ------------------------------------------------------------------------------------
    async def list_runs(request: Request) -> Any:
        q = request.query_params
        return await run_in_threadpool(service.list_runs, q.get("status") or None, q.get("workflow") or None,
                                       None if q.get("all") in ("1", "true") else int_param(request, "limit", 50),
                                       q.get("since") or None,
                                       q.get("after") or None)

    async def get_run(request: Request) -> Any:
        return await run_in_threadpool(service.get_run, request.path_params["run"])

    async def events(request: Request) -> Any:
        run = request.path_params["run"]
        after = int_param(request, "after", 0) or 0
        if request.query_params.get("follow") in ("1", "true", "yes"):
            last_id = request.headers.get("last-event-id", "")
            if last_id.isdigit():  # an EventSource reconnecting: carry on after what it saw
                after = max(after, int(last_id))
            rid = await run_in_threadpool(service.resolve, run)
            until = request.query_params.get("until", "parked")
            if until not in ("parked", "never"):
                raise bad_input(f"until must be parked or never, got {until!r}")
            return StreamingResponse(follow(rid, after, until == "parked"), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        return await run_in_threadpool(service.events, run, after, int_param(request, "limit", 500) or 500)

    async def follow(run_id: str, after: int, stop_when_parked: bool) -> AsyncIterator[bytes]:
        """Server-sent events: one ``event: <type>`` per timeline event (``id`` = its seq); with
        ``until=parked`` (the default) an ``event: end`` carrying the status once the run no longer
        executes and every event was sent (``iterion.store.follow``: the loop `inspect --follow`
        uses too; ``until=never`` follows on after that)."""
        def read_after(seq: int) -> tuple[list[dict[str, Any]], bool]:
            page = service.events(run_id, seq, 500)
            return page["events"], bool(page["more"])

        def status() -> str:
            return service.load(run_id).status.value if stop_when_parked else "running"

        def locked() -> bool:
            return service.store.is_locked(run_id) if stop_when_parked else True

        follower: Follower[dict[str, Any]] = Follower(read_after, status, locked, lambda e: int(e["seq"]), last=after)
        idle = 0.0
        while True:
            try:
                events, more = await run_in_threadpool(follower.step)
            except ApiError as exc:  # the run vanished or became unreadable mid-stream
                yield _sse("error", exc.body())
                return
            for e in events:
                yield _sse(e["type"], e, e["seq"])
                idle = 0.0
            if follower.ended is not None:
                yield _sse("end", {"run_id": run_id, "status": follower.ended, "last_seq": follower.last})
                return
            if more:
                continue
            await asyncio.sleep(FOLLOW_POLL_S)
            idle += FOLLOW_POLL_S
            if idle >= FOLLOW_HEARTBEAT_S:
                idle = 0.0
                yield b": keep-alive\n\n"

    async def commits(request: Request) -> Any:
        return await run_in_threadpool(service.commits, request.path_params["run"])

    async def files(request: Request) -> Any:
        q = request.query_params
        return await run_in_threadpool(service.files, request.path_params["run"], q.get("from"), q.get("to"))

    async def artifacts(request: Request) -> Any:
        node = request.path_params.get("node") or request.query_params.get("node") or None
        return await run_in_threadpool(service.artifacts, request.path_params["run"], node)

    async def artifact(request: Request) -> Any:
        p = request.path_params
        meta, data = await run_in_threadpool(service.artifact, p["run"], p["node"], p["version"])
        headers = {**DOWNLOAD_HEADERS, "X-Iterion-Artifact": meta["name"],
                   "X-Iterion-Artifact-Version": str(meta["version"]),
                   "X-Iterion-Tombstoned": "true" if meta["tombstoned"] else "false"}
        return Response(data, media_type="application/json", headers=headers)

    async def attachments(request: Request) -> Any:
        return await run_in_threadpool(service.attachments, request.path_params["run"])

    async def attachment(request: Request) -> Any:
        meta, path = await run_in_threadpool(service.attachment, request.path_params["run"],
                                             request.path_params["name"])
        # streamed from the staged copy, never rendered by the browser on this origin (it
        # carries the cookie): a download, sniffing off, a sandbox for anything that renders
        return FileResponse(path, media_type=meta["mime"], filename=meta["original_name"],
                            headers={**DOWNLOAD_HEADERS, "X-Iterion-Sha256": meta["sha256"]})

    async def launch(request: Request) -> Any:
        return await run_in_threadpool(service.launch, await read_json(request))

    def verb(name: str) -> Callable[[Request], Awaitable[Any]]:
        async def call(request: Request) -> Any:
            body = await read_json(request)
            return await run_in_threadpool(getattr(service, name), request.path_params["run"], body)
        return call

    async def queue(_request: Request) -> Any:
        return await run_in_threadpool(service.executor.status, service)

    async def openapi(_request: Request) -> Response:
        # the schema is public (no run data in it), like /healthz: a client generator needs no token
        from iterion.server.openapi import openapi_document

        return JSONResponse(openapi_document())

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(request: Request) -> Response:
        ready = await run_in_threadpool(service.ready)
        if not header_token(request, token):  # a probe without the token learns ready or not, no paths
            ready = {"ready": ready["ready"]}
        return JSONResponse(ready, status_code=200 if ready["ready"] else 503)

    metrics: list[Any] = []  # the StoreMetrics, made at the first scrape (prometheus_client imported then)

    async def metrics_endpoint(request: Request) -> Response:
        # the token, as every read: run names, workflows and models are the store's business;
        # a Prometheus scrape config sends it as `authorization: {credentials: TOKEN}`
        if not authorized(request):
            return error_response(ApiError(401, "missing or wrong token", hint="scrape with `Authorization: Bearer "
                                           "TOKEN` (the token `iterion server` printed, or ITERION_SERVER_TOKEN)",
                                           exit_code=ErrorKind.BAD_INPUT))
        from iterion.server.metrics import CONTENT_TYPE, StoreMetrics

        if not metrics:
            metrics.append(StoreMetrics(service.store, service.queue))
        body = await run_in_threadpool(metrics[0].scrape)
        return Response(body, media_type=CONTENT_TYPE, headers={"Cache-Control": "no-store"})

    async def not_found(request: Request) -> Response:
        refused = refusal(request)
        if refused is not None:
            return error_response(refused)
        return error_response(ApiError(404, f"no such endpoint: {request.method} {request.url.path}",
                                       hint="see the endpoints table in the README", exit_code=ErrorKind.BAD_INPUT))

    # -- web pages --------------------------------------------------------------------------------
    def page(render: Callable[[Request], Awaitable[str]]) -> Handler:
        async def endpoint(request: Request) -> Response:
            given = request.query_params.get("token")
            if given is not None:
                if not matches(given, token):
                    return HTMLResponse(web.login_page("that token is not this server's"), status_code=401)
                rest = {k: v for k, v in request.query_params.items() if k != "token"}
                target = request.url.path + ("?" + urlencode(rest) if rest else "")
                resp = RedirectResponse(target, status_code=303)
                resp.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
                return resp
            if not authorized(request):
                return HTMLResponse(web.login_page(None), status_code=401)
            try:  # never framed by another page (a click on a hidden button is still a click)
                return HTMLResponse(await render(request), headers=PAGE_HEADERS)
            except ApiError as exc:
                return HTMLResponse(web.error_page(exc.status, exc.message, exc.hint), status_code=exc.status)
        return endpoint

    async def index_page(request: Request) -> str:
        runs = await run_in_threadpool(service.list_runs, request.query_params.get("status") or None, None, 200)
        await run_in_threadpool(service.tag_subbot_parents, runs["runs"])
        workflows = await run_in_threadpool(service.launchable)
        return web.index_page(runs["runs"], workflows, token, service.executor.kind)

    async def run_page(request: Request) -> str:
        detail = await run_in_threadpool(service.run_view, request.path_params["run"])
        if request.query_params.get("fragment") == "1":  # the live section the page's script swaps in
            return web.live_section(detail)
        return web.run_page(detail, token)

    routes = [
        Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics_endpoint),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/", page(index_page)), Route("/runs/{run}", page(run_page)),
        Route("/api/queue", api(queue), methods=["GET"]),
        Route("/api/runs", api(list_runs), methods=["GET"]),
        Route("/api/runs", api(launch, status=201), methods=["POST"]),
        Route("/api/runs/{run}", api(get_run), methods=["GET"]),
        Route("/api/runs/{run}/events", api(events), methods=["GET"]),
        Route("/api/runs/{run}/commits", api(commits), methods=["GET"]),
        Route("/api/runs/{run}/files", api(files), methods=["GET"]),
        Route("/api/runs/{run}/artifacts", api(artifacts), methods=["GET"]),
        Route("/api/runs/{run}/artifacts/{node}", api(artifacts), methods=["GET"]),
        Route("/api/runs/{run}/artifacts/{node}/{version}", api(artifact), methods=["GET"]),
        Route("/api/runs/{run}/attachments", api(attachments), methods=["GET"]),
        Route("/api/runs/{run}/attachments/{name}", api(attachment), methods=["GET"]),
        Route("/api/runs/{run}/resume", api(verb("resume"), status=202), methods=["POST"]),
        Route("/api/runs/{run}/cancel", api(verb("cancel")), methods=["POST"]),
        Route("/api/runs/{run}/pause", api(verb("pause")), methods=["POST"]),
        Route("/api/runs/{run}/rewind", api(verb("rewind")), methods=["POST"]),
        Route("/api/runs/{run}/rewind/undo", api(verb("undo_rewind")), methods=["POST"]),
        Route("/api/{rest:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    return Starlette(routes=routes)


def _sse(kind: str, data: Any, seq: int | None = None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()
