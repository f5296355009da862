"""What a long call is doing right now: stages announce themselves ("planning", "linking", ...) and whoever
waits listens (the CLI prints them, the REST service streams them to the inspector). A context variable
holds the listener, so a call listens to its own stages only; without one, announcing costs nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[str, str], None]  # (stage, message)

_listener: ContextVar[Listener | None] = ContextVar("grasp_progress_listener", default=None)


def announce(stage: str, message: str = "") -> None:
    """Tell the current listener (if any) that ``stage`` starts."""
    listener = _listener.get()
    if listener is not None:
        listener(stage, message)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the stages announced inside the block (in this thread or context) to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
