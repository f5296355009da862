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


def quiet_third_party() -> None:
    """``-q``: silence the libraries' own progress bars, log lines and warnings too (Hugging Face's loading bars,
    transformers' advisories), not only ours. Set before those libraries load; a variable the user set wins."""
    import os
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TQDM_DISABLE", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(transformers|torch|huggingface_hub)\b")
