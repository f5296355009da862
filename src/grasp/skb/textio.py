"""Open plain or gzip-compressed text files the same way."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO


def open_text(path: Path, mode: str = "r") -> IO[str]:
    """Open ``path`` as UTF-8 text, transparently gunzipping ``*.gz``."""
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8", newline="")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8", newline="")


def find_data_file(directory: Path, stem: str) -> Path | None:
    """``directory/stem`` or ``directory/stem.gz``, whichever exists."""
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    return None
