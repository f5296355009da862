"""The one validator of what a person types: query text and result depth, the same for the CLI, the Python API,
the REST service and every queries file (``eval``, ``plans build``, ``report``)."""

from __future__ import annotations

from typing import Any

from grasp.errors import InputError

MAX_QUERY_CHARS = 2000
MAX_K = 100        # results a search shows
MAX_DEPTH = 1000   # results an evaluation ranks per query


def query_problem(text: Any) -> str | None:
    """What is wrong with a query text, or None when it can be answered."""
    if not isinstance(text, str):
        return f"query must be a string, not {type(text).__name__}"
    if "\x00" in text:
        return "query contains a NUL character (binary data?)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "query is not valid UTF-8 text (undecodable bytes or a lone surrogate)"
    if not text.strip():
        return "query is empty"
    if len(text) > MAX_QUERY_CHARS:
        return f"query is {len(text)} characters long; the limit is {MAX_QUERY_CHARS}"
    return None


def check_query(text: Any) -> str:
    """The query text stripped, or :class:`InputError` saying what is wrong with it."""
    problem = query_problem(text)
    if problem is not None:
        raise InputError(problem)
    return text.strip()


def check_k(k: Any) -> int:
    """A result depth: an integer (not a bool, not a string) from 1 to ``MAX_K``."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer from 1 to {MAX_K}, not {k!r}")
    return k
