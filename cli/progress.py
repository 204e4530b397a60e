"""The live progress of `run`/`resume` on stderr: the run named at the start, then one line per node.

At the start: ``run NAME (ID)`` (after ``↻ resuming at NODE`` for a resume). Then, per node, a
single line when it ends: ``✓ node  1.20s · 3 nodes · 4.5s elapsed · 610 tokens, $0.0070``
(failures, questions, retries and warnings as their own lines).

On a terminal, every node still running has one live line at the bottom (``▶ node (kind) 0.8s``),
redrawn in place as events arrive and every ``TICK_S`` between them (a ticker thread, alive only
while a node runs), so a long node's timer moves, and a 30-node run leaves 30 lines, not 60. Off a terminal
(a pipe, a file, CI logs), or with NO_COLOR or TERM=dumb, nothing is redrawn: each event is a plain line appended, the started
line included, and no escape code is written. User text (node names, messages) is printed
literally through cli/output.py; a closed stderr never stops the run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from cli.output import Part, echo_err, fit, styled, terminal_width

STREAM_LINE_EVERY_S = 10.0  # off a terminal, a streamed answer's progress line at most this often
TICK_S = 0.5  # the live lines' redraw while no event arrives (the running nodes' timers move)
CLEAR_UP = "\x1b[{n}F\x1b[J"  # cursor to the start of the line n lines up, then clear to the end


def _is_tty() -> bool:
    """Redraw in place only on a terminal that can (not TERM=dumb) and that asked for no plain
    output (NO_COLOR: no escape code of any kind)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (OSError, ValueError):
        return False


def notices_only(e: Any) -> None:
    """The run listener of ``--json``: stdout is the JSON, so only what the engine could not
    record (an unrecorded ``warning``: iterion/engine/notice.py) is shown, on stderr."""
    from iterion.engine.notice import is_unrecorded

    if is_unrecorded(e):
        echo_err(styled("warning:", "yellow"), f" {e.payload.get('message')}")


class Progress:
    """A run listener (called with every event the engine appends; an unrecorded warning too)."""

    def __init__(self, live: bool | None = None, *, clock: Callable[[], float] = time.monotonic,
                 tick_s: float = TICK_S) -> None:
        self.live = _is_tty() if live is None else live
        self.clock, self.tick_s = clock, tick_s
        self.t0 = clock()
        self.lock = threading.RLock()  # events (engine threads) and the ticker draw one at a time
        self.ticker: threading.Thread | None = None
        self.running: dict[tuple[str | None, int | None], tuple[float, str]] = {}
        self.done = 0
        self.drawn = 0  # live lines currently on screen
        # a streamed model answer per running node: "312 tokens · 41.3 tok/s", and when a plain
        # (not redrawn) line last said so
        self.streams: dict[tuple[str | None, int | None], str] = {}
        self.stream_said: dict[tuple[str | None, int | None], float] = {}

    # -- drawing -----------------------------------------------------------------------------
    def _clear(self) -> None:
        if self.live and self.drawn:
            echo_err(CLEAR_UP.format(n=self.drawn), nl=False)
            self.drawn = 0

    def _redraw(self) -> None:
        if not self.live:
            return
        width, now = terminal_width(), self.clock()
        for (node, iteration), (start, kind) in self.running.items():
            rest = f"({kind}, iteration {iteration})"
            took = f" {now - start:.1f}s"
            if (node, iteration) in self.streams:
                took += f" · {self.streams[(node, iteration)]}"
            # fitted: a live line that wrapped would take two rows and the redraw would miss one;
            # on a narrow terminal the "(kind, iteration)" goes first, then the name is cut
            room = width - 3 - len(took)  # "▶ " and the last column kept free
            if room - len(rest) - 1 < 8:
                name = fit(str(node), max(1, room))
                echo_err(styled("▶", "cyan"), f" {name}", took)
            else:
                name = fit(str(node), room - len(rest) - 1)
                echo_err(styled("▶", "cyan"), f" {name} ", styled(rest, "dim"), took)
        self.drawn = len(self.running)

    def _line(self, *parts: Part) -> None:
        self._clear()
        echo_err(*parts)
        self._redraw()

    def _stats(self, p: dict[str, Any]) -> str:
        return (f"{self.done} node{'s' if self.done != 1 else ''} · {self.clock() - self.t0:.1f}s elapsed · "
                f"{p.get('tokens', 0)} tokens, ${float(p.get('cost_usd') or 0):.4f}")

    # -- the ticker --------------------------------------------------------------------------
    def _start_ticker(self) -> None:
        if not self.live or self.ticker is not None:  # (cleared by the ticker's last tick, under the lock)
            return
        self.ticker = threading.Thread(target=_tick, args=(weakref.ref(self),), name="progress-ticker", daemon=True)
        self.ticker.start()

    def tick(self) -> bool:
        """Redraw the live lines (their timers); False once no node runs (the ticker then ends)."""
        with self.lock:
            if not self.running:
                self.ticker = None
                return False
            self._clear()
            self._redraw()
            return True

    # -- events ------------------------------------------------------------------------------
    def __call__(self, e: Any) -> None:
        with self.lock:
            self._event(e)

    def _event(self, e: Any) -> None:
        p = e.payload or {}
        key = (e.node, e.iteration)
        kind = e.type
        if kind == "run_started":
            self._line("run ", styled(str(p.get("name")), "bold"), f" ({p.get('run_id')})",
                       styled(f" · workflow {p.get('workflow')}", "dim"))
        elif kind == "run_resumed":
            self._line(styled("↻", "cyan"), f" resuming at {p.get('restart_node')}")
            self._line("run ", styled(str(p.get("name")), "bold"), f" ({p.get('run_id')})")
        elif kind == "node_started":
            self.running[key] = (self.clock(), str(p.get("kind")))
            self._start_ticker()
            if self.live:
                self._clear()
                self._redraw()
            else:
                echo_err(styled("▶", "cyan"), f" {e.node} ", styled(f"({p.get('kind')}, iteration {e.iteration})", "dim"))
        elif kind == "node_finished":
            start, _ = self.running.pop(key, (self.clock(), ""))
            self.streams.pop(key, None)
            self.done += 1
            self._line(styled("✓", "green"), f" {e.node} ",
                       styled(f"{self.clock() - start:.2f}s · {self._stats(p)}", "dim"))
        elif kind == "node_failed":
            self.running.pop(key, None)
            self._line(styled("✗", "red"), f" {e.node} ", styled(str(p.get("code")), "red"), f": {p.get('error')}")
        elif kind in ("human_input_requested", "ask_user_requested"):
            self.running.pop(key, None)
            self._line(styled("?", "yellow"), f" {e.node} is waiting for an answer")
        elif kind == "node_retry_scheduled":
            self._line(styled("↻", "yellow"), f" {e.node} {p.get('code')}: retry {p.get('attempt')}/"
                       f"{p.get('max_retries')} in {float(p.get('delay_s') or 0):g}s")
        elif kind == "recovery_paused":
            self._line(styled("?", "yellow"), f" {e.node} {p.get('code')}: paused for a person to fix the cause")
        elif kind == "warning":
            self._line(styled("warning:", "yellow"), f" {p.get('message')}")
        elif kind == "run_workspace_checkpoint":
            self._line(styled("↑", "cyan"), f" workspace checkpoint pushed to {p.get('remote')}: {p.get('ref')} ",
                       styled(str(p.get("commit"))[:12], "dim"))
        elif kind == "run_workspace_checkpoint_failed":
            self._line(styled("warning:", "yellow"), f" workspace checkpoint push to {p.get('remote')} failed "
                       f"(the last pushed checkpoint still stands): {p.get('error')}")
        elif kind == "tool_called":  # the claw agent's tool calls, as they happen
            ms = p.get("duration_ms")
            parts: list[Part] = [styled("  ·", "dim"), f" {p.get('tool')} {p.get('subject') or ''}",
                                 styled(f" {ms:g}ms" if isinstance(ms, (int, float)) else "", "dim")]
            if p.get("error"):
                parts.append(styled(f" error: {str(p['error']).splitlines()[0][:120]}", "red"))
            self._line(*parts)
        elif kind == "model_progress":  # a streamed answer arriving (iterion/backends/sse.py)
            rate = p.get("tokens_per_s")
            said = f"{p.get('tokens_out')} tokens" + (f" · {rate:g} tok/s" if isinstance(rate, (int, float)) else "")
            if p.get("done"):
                self.streams.pop(key, None)
            else:
                self.streams[key] = said
            if self.live:
                self._clear()
                self._redraw()
            elif p.get("done") or time.monotonic() - self.stream_said.get(key, 0.0) >= STREAM_LINE_EVERY_S:
                self.stream_said[key] = time.monotonic()
                self._line(styled("  ·", "dim"), f" {e.node} model ",
                           styled(("answered, " if p.get("done") else "") + said, "dim"))
        elif kind == "model_partial":
            self.streams.pop(key, None)
            self._line(styled("  ✗", "red"), f" {e.node} answer cut after {p.get('tokens_out')} tokens "
                       f"({p.get('code')}); the partial text is on the timeline")
        elif kind == "permission_decided" and p.get("decision") != "allow":
            why = f"rule {p['rule']}" if p.get("rule") else f"{p.get('source')}"
            self._line(styled("  ⊘" if p.get("decision") == "deny" else "  ?", "yellow"),
                       f" {p.get('tool')} {p.get('decision')} ({why})")
        elif kind in ("run_finished", "run_failed", "run_paused", "run_cancelled"):
            self.running.clear()
            self._clear()


def _tick(ref: weakref.ref[Progress]) -> None:
    """The ticker: redraws every ``tick_s`` while a node runs; holds its Progress only weakly, so
    a display dropped mid-run (a test, a crash) stops it too."""
    while True:
        progress = ref()
        if progress is None:
            return
        wait = progress.tick_s
        del progress
        time.sleep(wait)
        progress = ref()
        if progress is None or not progress.tick():
            return
        del progress
