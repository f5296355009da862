"""Where indexes live, and how they are written without ever leaving a half-written one behind.

Every index is built into a temporary sibling directory (or file) and renamed into place only
when complete; a killed build leaves at most a ``*.tmp-*`` directory that the next build removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import platformdirs

CACHE_ENV = "GRASP_CACHE_DIR"


def default_cache_dir() -> Path:
    """The cache root: ``$GRASP_CACHE_DIR`` if set, else the user's cache folder (``~/.cache/grasp``)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("grasp", appauthor=False))


def stable_hash(obj: Any, length: int = 16) -> str:
    """A short hex digest of a JSON-serialisable object (keys sorted), for cache keys."""
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def file_fingerprint(path: Path, sample: int = 1 << 20) -> str:
    """Cheap content fingerprint: size plus the first and last MiB (a full hash for small files)."""
    h = hashlib.sha256()
    size = path.stat().st_size
    h.update(str(size).encode())
    with open(path, "rb") as f:
        if size <= 2 * sample:
            h.update(f.read())
        else:
            h.update(f.read(sample))
            f.seek(size - sample)
            h.update(f.read(sample))
    return h.hexdigest()[:16]


def _clear_stale(target: Path) -> None:
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` only if the block completes."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def atomic_file(target: Path, mode: str = "w", **kwargs: Any) -> Iterator[Any]:
    """Open a temporary file that replaces ``target`` only if the block completes."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with open(tmp, mode, **kwargs) as f:
            yield f
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
