"""MCP stdio servers for one claw node, through the official ``mcp`` SDK.

The SDK is asyncio; the agent loop is not. A pool owns one event loop in a daemon thread: one
owner task opens every server (``stdio_client`` + ``ClientSession``, inside one AsyncExitStack,
so the SDK's cancel scopes are entered and left by the same task), lists their tools, and waits
for ``stop``; tool calls are submitted to that loop from the agent's thread. Tools are offered
as ``mcp.<server>.<tool>``. ``stop`` (the node's end, a pause, a failure) closes the sessions
and the servers' processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from iterion.backends.base import BackendError, setting_seconds
from iterion.backends.claw.host import AgentHost
from iterion.backends.claw.tools import ToolError, cap
from iterion.backends.claw.wire import ToolSpec
from iterion.engine.tether import tethered
from iterion.failure_codes import FailureCode

START_TIMEOUT_ENV, START_TIMEOUT_S = "ITERION_MCP_START_TIMEOUT", 30.0  # the defaults, in seconds
CALL_TIMEOUT_ENV, CALL_TIMEOUT_S = "ITERION_MCP_CALL_TIMEOUT", 300.0


def _expand(value: Any) -> str:
    return os.path.expandvars(str(value))  # docs/language.md §1: $N and ${N}, no defaults


def server_env(decl: Any, source: dict[str, str] | None) -> dict[str, str]:
    """A stdio server's whole environment: the MCP SDK's default variables (HOME, PATH, ...),
    the variables the declaration's ``inherit_env`` names (read from ``source``, the node's
    environment), then its ``env`` after substitution. Nothing else: an API key of the run is
    not the server's unless the declaration names it."""
    from mcp.client.stdio import get_default_environment

    given: Mapping[str, str] = os.environ if source is None else source
    env = dict(get_default_environment())
    env.update({str(n): given[str(n)] for n in decl.get("inherit_env") or () if str(n) in given})
    env.update({str(k): _expand(v) for k, v in (decl.get("env") or {}).items()})
    return env


class McpPool:
    def __init__(self, host: AgentHost) -> None:
        self.host = host
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="iterion-mcp")
        self.sessions: dict[str, Any] = {}
        self.tools: dict[str, tuple[str, str]] = {}  # iterion name -> (server, tool)
        self._stop: asyncio.Event | None = None
        self._owner: Any = None
        self._errlogs: list[Any] = []
        self._opening: str | None = None  # the server being started (named when its start fails)
        self.call_timeout_s = CALL_TIMEOUT_S  # read from the environment by start()

    def _params(self, name: str) -> Any:
        from mcp import StdioServerParameters

        decl = self.host.mcp_declarations.get(name)
        if decl is None:
            known = ", ".join(sorted(self.host.mcp_declarations)) or "none declared"
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"mcp server {name!r} is not declared (mcp_server {name}: ...); declared: {known}")
        transport = str(decl.get("transport") or "stdio")
        if transport != "stdio" or not decl.get("command"):
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"mcp server {name!r}: only stdio servers with a command are supported by the claw "
                               f"backend (transport {transport})")
        env = server_env(decl, self.host.env)
        argv = [_expand(decl["command"]), *(_expand(a) for a in decl.get("args") or [])]
        # under the launcher: the server dies with iterion, SIGKILL included (iterion.engine.tether)
        try:
            tied = tethered(argv, path=env.get("PATH"))
        except FileNotFoundError:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"mcp server {name!r}: command {argv[0]!r} not found") from None
        return StdioServerParameters(command=tied[0], args=tied[1:], env=env, cwd=str(self.host.workspace))

    def start(self, names: tuple[str, ...]) -> list[ToolSpec]:
        # both limits read here, before any server starts (never at import): a garbage value
        # fails the node (BackendError BACKEND_UNAVAILABLE naming the variable), not a tool call later
        start_s = setting_seconds(START_TIMEOUT_ENV, START_TIMEOUT_S)
        self.call_timeout_s = setting_seconds(CALL_TIMEOUT_ENV, CALL_TIMEOUT_S)
        params = {n: self._params(n) for n in names}
        self.thread.start()
        ready = asyncio.run_coroutine_threadsafe(self._open(params), self.loop)
        try:
            specs = ready.result(timeout=start_s)
        except BackendError:
            self.stop(cancel=True)
            raise
        except BaseException as exc:  # noqa: BLE001 - a server that cannot start is a node failure, typed
            name = self._opening or ", ".join(names)
            timed_out = isinstance(exc, TimeoutError)
            # the stopped server's last words: read after its process ended (so nothing is still
            # buffered) and before stop() closes the log
            self.stop(cancel=True, keep_logs=True)
            tail = self._stderr_tail()
            self._close_logs()
            if timed_out:
                raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                                   f"MCP server {name} did not start within {start_s:g}s (${START_TIMEOUT_ENV}) "
                                   f"and was stopped" + (f": {tail}" if tail else "")) from None
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"MCP server {name} failed to start: "
                               f"{tail or _describe(exc)}") from None
        return specs

    async def _open(self, params: dict[str, Any]) -> list[ToolSpec]:
        opened: asyncio.Future[list[ToolSpec]] = self.loop.create_future()
        self._stop = asyncio.Event()
        self._owner = asyncio.ensure_future(self._own(params, opened))
        return await opened

    async def _own(self, params: dict[str, Any], opened: asyncio.Future[list[ToolSpec]]) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        specs: list[ToolSpec] = []
        try:
            async with AsyncExitStack() as stack:
                for name, p in params.items():
                    self._opening = name
                    errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by stop()
                    self._errlogs.append(errlog)
                    read, write = await stack.enter_async_context(stdio_client(p, errlog=errlog))
                    session = await stack.enter_async_context(ClientSession(read, write))
                    await session.initialize()
                    listed = await session.list_tools()
                    self.sessions[name] = session
                    names = []
                    for tool in listed.tools:
                        full = f"mcp.{name}.{tool.name}"
                        self.tools[full] = (name, tool.name)
                        names.append(tool.name)
                        # mcp 1.x names it inputSchema, 2.x input_schema
                        raw = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
                        schema = dict(raw or {"type": "object", "properties": {}})
                        specs.append(ToolSpec(full, tool.description or f"{tool.name} (MCP server {name})", schema))
                    self.host.emit("mcp_server_started", {"server": name, "tools": names})
                self._opening = None
                opened.set_result(specs)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported through the future
            if not opened.done():
                opened.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        finally:
            for name in params:
                if name in self.sessions:
                    self.host.emit("mcp_server_stopped", {"server": name})

    def _stderr_tail(self) -> str:
        """The last lines the servers wrote on stderr (the one that failed is the last log)."""
        tails = []
        for f in self._errlogs:
            try:
                f.seek(0)
                text = f.read()[-500:].strip()
            except (OSError, ValueError):
                continue
            if text:
                tails.append(text)
        return " | ".join(tails)

    def call(self, name: str, args: dict[str, Any]) -> str:
        server, tool = self.tools.get(name, ("", ""))
        session = self.sessions.get(server)
        if session is None:
            raise ToolError(f"unknown MCP tool {name!r}")
        fut = asyncio.run_coroutine_threadsafe(session.call_tool(tool, args), self.loop)
        try:
            result = fut.result(timeout=self.call_timeout_s)
        except TimeoutError:
            fut.cancel()
            raise ToolError(f"{name} did not answer within {self.call_timeout_s:g}s (${CALL_TIMEOUT_ENV})") from None
        except Exception as exc:  # noqa: BLE001 - an MCP error is the model's to see
            raise ToolError(f"{name} failed: {type(exc).__name__}: {exc}") from None
        parts: list[str] = []
        for block in getattr(result, "content", None) or []:
            text = getattr(block, "text", None)
            parts.append(text if isinstance(text, str) else json.dumps(block.model_dump(mode="json"), default=str))
        structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
        if not parts and structured is not None:
            parts.append(json.dumps(structured, sort_keys=True, default=str))
        text = cap("\n".join(parts))
        if getattr(result, "is_error", False) or getattr(result, "isError", False):
            raise ToolError(text or f"{name} reported an error")
        return text

    def stop(self, *, cancel: bool = False, keep_logs: bool = False) -> None:
        """Close the sessions and end the servers. ``cancel``: do not wait for the owner task to
        notice the stop (a server hanging in its start never answers): cancel it at once, which
        leaves the SDK's stdio_client and ends the process."""
        if not self.thread.is_alive():
            if not keep_logs:
                self._close_logs()
            return
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        owner = self._owner
        if owner is not None:
            async def wait_owner() -> None:
                if not cancel:
                    await asyncio.wait([owner], timeout=10)
                if not owner.done():
                    owner.cancel()
                    await asyncio.wait([owner], timeout=10)

            try:
                asyncio.run_coroutine_threadsafe(wait_owner(), self.loop).result(timeout=25)
            except Exception:  # noqa: BLE001, S110 - best effort: the thread is a daemon
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not keep_logs:
            self._close_logs()

    def _close_logs(self) -> None:
        for f in self._errlogs:
            f.close()


def _describe(exc: BaseException) -> str:
    """The innermost cause of a start failure (the SDK wraps it in ExceptionGroups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
