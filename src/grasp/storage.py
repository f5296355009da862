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
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import platformdirs

from grasp.errors import FormatError

CACHE_ENV = "GRASP_CACHE_DIR"


def cache_root(configured: Path | str | None = None) -> Path:
    """The cache root: the configured folder if any, else ``$GRASP_CACHE_DIR`` if set, else the user's
    cache folder (``~/.cache/grasp``). The one place that resolves it."""
    if configured is not None:
        return Path(configured).expanduser()
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


def checksum(path: Path, *, exclude: frozenset[str] = frozenset()) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative paths and bytes, in name order; files
    named in ``exclude`` left out, e.g. the folder's own record of its checksum)."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.name not in exclude)
    for p in files:
        if path.is_dir():
            h.update(p.relative_to(path).as_posix().encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda f=f: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


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


S = TypeVar("S", bound="Setting")


@dataclass
class Setting:
    """A small tuned artifact: typed fields saved as one JSON file in a workspace (``artifact`` names
    the file), read back with errors that name the file and the field, never by hand-parsed JSON."""

    artifact: ClassVar[str] = ""
    renamed: ClassVar[dict[str, str]] = {}  # a field's former name -> its name: files saved before still load

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: Path) -> None:
        write_json(path, self.to_json())

    @classmethod
    def load(cls: type[S], path: Path) -> S:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise FormatError(f"not a readable {cls.__name__} ({e})", file=path) from None
        if not isinstance(data, dict):
            raise FormatError(f"a {cls.__name__} is a JSON object", file=path)
        data = {cls.renamed.get(name, name): value for name, value in data.items()}
        known = {f.name for f in fields(cls)}
        for name in data:
            if name not in known:
                raise FormatError(f"unknown field of a {cls.__name__}", file=path, field=name)
        try:
            return cls(**data)
        except (TypeError, ValueError) as e:
            raise FormatError(f"not a {cls.__name__} ({e})", file=path) from None
