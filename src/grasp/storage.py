"""Where indexes live, and how they are written without ever leaving a half-written one behind.

Every index is built into a temporary sibling directory (or file) and renamed into place only
when complete; a killed build leaves at most a ``*.tmp-*`` directory that the next build removes.
Builders of the same index take turns under a lock (:func:`build_lock`), and an index is checked
against the checksum recorded when it was built before it is read (:func:`require_intact`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import platformdirs

from grasp.errors import ConfigError, FormatError, IndexCorruptError

CACHE_ENV = "GRASP_CACHE_DIR"


def cache_root(configured: Path | str | None = None) -> Path:
    """The cache root: the configured folder if any, else ``$GRASP_CACHE_DIR`` if set, else the user's
    cache folder (``~/.cache/grasp``). The one place that resolves it."""
    if configured is not None:
        root, where = Path(configured).expanduser(), "the configured cache_dir"
    elif os.environ.get(CACHE_ENV):
        root, where = Path(os.environ[CACHE_ENV]).expanduser(), f"${CACHE_ENV}"
    else:
        root, where = Path(platformdirs.user_cache_dir("grasp", appauthor=False)), "the user cache folder"
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} ({where}) is a file, not a folder: name a folder for the index cache")
    return root


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
    for p in _files(path, exclude):
        if path.is_dir():
            h.update(p.relative_to(path).as_posix().encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda f=f: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _files(path: Path, exclude: frozenset[str] = frozenset()) -> list[Path]:
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.name not in exclude)


def _stat_signature(path: Path, exclude: frozenset[str]) -> list[list]:
    """What changes whenever a file's bytes do: size, modification and status-change times, inode (a write, a copy
    or a rename all move the status-change time, which no user program can set back)."""
    out = []
    for p in _files(path, exclude):
        st = p.stat()
        out.append([p.relative_to(path).as_posix() if path.is_dir() else p.name, st.st_size, st.st_mtime_ns,
                    st.st_ctime_ns, st.st_ino])
    return out


def _stamp_path(path: Path) -> Path:
    return path.parent / f".{path.name}.verified"


def holds(path: Path, recorded: str, *, exclude: frozenset[str] = frozenset()) -> bool:
    """Whether a built index (file or folder) still has the sha256 recorded when it was built. The full hash runs
    only when the files' stat signature differs from the one of the last verification that held (a stamp beside
    the index, skipped where the cache is read-only), so a process start costs a few ``stat`` calls, and any write
    to the index since is caught."""
    path = Path(path)
    if not path.exists():
        return False
    stamp = _stamp_path(path)
    signature = _stat_signature(path, exclude)
    try:
        if json.loads(stamp.read_text(encoding="utf-8")) == {"sha256": recorded, "stat": signature}:
            return True
    except (OSError, ValueError):
        pass
    if checksum(path, exclude=exclude) != recorded:
        return False
    write_json_if_writable(stamp, {"sha256": recorded, "stat": signature})  # read-only: checked again next start
    return True


def recorded_sha256(record: Path) -> str | None:
    """The ``sha256`` a JSON record beside an index holds; None where there is no record (built before checksums were
    recorded) or it names none. An unreadable record is a damaged index."""
    if not record.exists():
        return None
    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise IndexCorruptError(f"{record}: unreadable ({e}); delete it and its index to rebuild") from None
    return meta.get("sha256") if isinstance(meta, dict) else None


def require_intact(path: Path, recorded: str | None, what: str, *, exclude: frozenset[str] = frozenset()) -> None:
    """Refuse (:class:`IndexCorruptError`) an index whose bytes differ from those recorded when it was built."""
    if recorded is not None and not holds(path, recorded, exclude=exclude):
        raise IndexCorruptError(f"{path}: the {what} changed since it was built (its sha256 differs from the one "
                                f"recorded); delete it (rm -r '{path}') and the next run rebuilds it")


def _clear_stale(target: Path) -> None:
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)


_lock_guard = threading.Lock()
_thread_locks: dict[str, threading.RLock] = {}
_lock_depth: dict[str, tuple[int, int | None]] = {}  # path -> (depth, file descriptor holding the flock)


@contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Hold the build lock of one index (file or folder) against other processes and threads: two builders of the
    same index take turns, and the second, checking again under the lock, finds the first one's result and reuses
    it. Re-entrant within a thread. Where the cache cannot be written there is nothing to lock (a build there fails
    with its own message)."""
    target = Path(target)
    key = str(target.absolute())
    with _lock_guard:
        rlock = _thread_locks.setdefault(key, threading.RLock())
    with rlock:
        depth, fd = _lock_depth.get(key, (0, None))
        if depth == 0:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target.parent / f".{target.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                fd = None
        _lock_depth[key] = (depth + 1, fd)
        try:
            yield
        finally:
            depth, fd = _lock_depth.pop(key)
            if depth > 1:
                _lock_depth[key] = (depth - 1, fd)
            elif fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


@contextmanager
def writable(target: Path) -> Iterator[None]:
    """Turn a folder that cannot be written (read-only file system, no permission, a file in the way) into one line
    naming it."""
    try:
        yield
    except OSError as e:
        raise ConfigError(f"cannot write {target} ({e.strerror or e}): make {target.parent} writable, or build into "
                          "another folder (--cache-dir, $GRASP_CACHE_DIR, or the output path given)") from None


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` only if the block completes."""
    target = Path(target)
    with writable(target):
        target.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(target):  # another builder's temporary folder is never taken for a stale one
        with writable(target):
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
    with writable(target):
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


def write_json_if_writable(path: Path, obj: Any) -> None:
    """Write a record that only saves work later (a verification stamp, a checksum recorded late): skipped where
    the cache is read-only."""
    try:
        write_json(path, obj)
    except ConfigError:
        pass


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
