"""Open plain or gzip-compressed text files the same way."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from grasp.errors import FormatError


def open_text(path: Path, mode: str = "r") -> IO[str]:
    """Open ``path`` as UTF-8 text, transparently (un)gzipping ``*.gz``. Written gzip files carry
    no timestamp, so the same content gives the same bytes."""
    if str(path).endswith(".gz"):
        if mode == "w":
            return io.TextIOWrapper(gzip.GzipFile(path, mode="wb", mtime=0), encoding="utf-8", newline="")
        return gzip.open(path, mode + "t", encoding="utf-8", newline="")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8", newline="")


def find_data_file(directory: Path, stem: str) -> Path | None:
    """``directory/stem`` or ``directory/stem.gz``, whichever exists."""
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    return None


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) for each line of a UTF-8 text file, plain or gzip. A line that is not UTF-8, and a
    truncated or damaged gzip stream, raise :class:`FormatError` naming the file and the line, not a decoder's
    traceback. Lines are decoded one at a time so that the line named is the one at fault."""
    lineno = 0
    try:
        with (gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")) as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise FormatError(f"not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); save "
                                      "the file as UTF-8", file=path, line=lineno) from None
                yield lineno, line
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise FormatError(f"damaged or truncated gzip file ({e}); compress it again from the original",
                          file=path, line=lineno + 1) from None


def iter_json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSONL file; a line that is not a JSON
    object raises :class:`FormatError` naming the file and line."""
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise FormatError(f"malformed JSON ({e.msg})", file=path, line=lineno) from None
        if not isinstance(rec, dict):
            raise FormatError("expected a JSON object", file=path, line=lineno)
        yield lineno, rec
