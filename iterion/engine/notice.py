"""The engine never prints: what a person watching must hear goes through the run's listener.

A run's caller (the CLI, the server's worker) passes a ``Listener``; every event the engine
appends reaches it. A few things a person must hear have no place on the timeline: the
timeline itself could not be written (a full disk), the checkpoint was lost, or an automatic
resume decided something between two executions. ``notify`` hands those to the listener as an
*unrecorded* ``warning`` event: ``seq`` 0 and ``payload.recorded`` False, ``payload.message``
the line to show. The CLI's listeners print them through cli/output.py (also under ``--json``,
on stderr); without a listener they are dropped, and the run's result and timeline still carry
the facts. ``tests/architecture/test_engine_never_prints.py`` keeps ``print`` and
``sys.stderr`` out of the packages below the CLI.
"""

from __future__ import annotations

from collections.abc import Callable

from iterion.store import events as ev
from iterion.store.events import Event
from iterion.store.timeutil import utcnow

Listener = Callable[[Event], None]


def unrecorded_warning(message: str) -> Event:
    return Event(seq=0, time=utcnow(), type=ev.WARNING, payload={"message": message, "recorded": False})


def is_unrecorded(event: Event) -> bool:
    return event.type == ev.WARNING and event.seq == 0 and ev.payload(event, ev.WarningPayload).get("recorded") is False


def notify(listener: Listener | None, message: str) -> None:
    """Tell the person watching ``message`` (one line); a listener's failure never stops a run."""
    if listener is None:
        return
    try:
        listener(unrecorded_warning(message))
    except Exception:  # noqa: BLE001 - a display bug must never stop a run
        pass


def notifier(listener: Listener | None) -> Callable[[str], None]:
    return lambda message: notify(listener, message)
