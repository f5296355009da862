"""Embeddings on disk: one ``.npy`` matrix per (model, text layout, node set), memory-mapped.

The file name carries a hash of everything that determines the vectors (the encoder's
``model_id``, the layout key, the SKB fingerprint, the node ids), so a changed model or layout
never silently reuses old vectors. Building is resumable: chunks are saved as they finish in a
``.partial`` folder, and the final matrix is renamed into place only when complete.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from grasp.encode.encoder import Encoder
from grasp.errors import IndexCorruptError
from grasp.storage import (
    atomic_file,
    build_lock,
    checksum,
    recorded_sha256,
    require_intact,
    stable_hash,
    writable,
    write_json,
)


class EmbeddingStore:
    """A folder of embedding matrices keyed by content."""

    def __init__(self, root: Path, *, dtype: str = "float16", chunk: int = 4096) -> None:
        self.root = Path(root)
        self.dtype = np.dtype(dtype)
        self.chunk = chunk

    def path_for(self, name: str, key: dict[str, Any]) -> Path:
        return self.root / f"{name}-{stable_hash(key)}.npy"

    def _full_key(self, key: dict[str, Any], node_ids: np.ndarray, encoder: Encoder) -> dict[str, Any]:
        return {**key, "model": encoder.model_id, "dtype": self.dtype.name,
                "nodes": stable_hash(np.asarray(node_ids).tolist())}

    def exists(self, name: str, key: dict[str, Any], node_ids: np.ndarray, encoder: Encoder) -> bool:
        """Whether the matrix for these nodes is complete on disk (nothing is built)."""
        return self.path_for(name, self._full_key(key, node_ids, encoder)).exists()

    def get(
        self,
        name: str,
        key: dict[str, Any],
        node_ids: np.ndarray,
        text_of: Callable[[int], str],
        encoder: Encoder,
        *,
        progress: bool = True,
    ) -> np.ndarray:
        """The (len(node_ids), dim) matrix for these nodes, built if missing (memory-mapped)."""
        key = self._full_key(key, node_ids, encoder)
        path = self.path_for(name, key)
        if not path.exists():
            with build_lock(path):
                if not path.exists():
                    self._build(path, key, node_ids, text_of, encoder, progress, name)
        return self._load(path, len(node_ids), encoder.dim)

    def _load(self, path: Path, n: int, dim: int) -> np.ndarray:
        require_intact(path, recorded_sha256(path.with_suffix(".json")), "embedding matrix")
        try:
            arr = np.load(path, mmap_mode="r")
        except (ValueError, OSError) as e:
            raise IndexCorruptError(f"{path}: unreadable embedding file ({e}); delete it to rebuild") from None
        if arr.shape != (n, dim):
            raise IndexCorruptError(f"{path}: shape {arr.shape}, expected {(n, dim)}; delete it to rebuild")
        return arr

    def _build(self, path: Path, key: dict, node_ids: Sequence[int], text_of: Callable[[int], str],
               encoder: Encoder, progress: bool, name: str) -> None:
        partial = path.with_suffix(".partial")
        with writable(partial):
            partial.mkdir(parents=True, exist_ok=True)
        meta_path = partial / "key.json"
        if meta_path.exists() and json.loads(meta_path.read_text()) != json.loads(json.dumps(key, default=str)):
            shutil.rmtree(partial)
            partial.mkdir(parents=True)
        write_json(meta_path, key)
        n = len(node_ids)
        n_chunks = (n + self.chunk - 1) // self.chunk
        bar = tqdm(total=n, desc=f"embedding {name}", unit="text", disable=not progress)
        for c in range(n_chunks):
            lo, hi = c * self.chunk, min(n, (c + 1) * self.chunk)
            chunk_path = partial / f"{c:06d}.npy"
            if not chunk_path.exists():
                texts = [text_of(int(i)) for i in node_ids[lo:hi]]
                emb = encoder.encode(texts).astype(self.dtype)
                with atomic_file(chunk_path, "wb") as f:
                    np.save(f, emb)
            bar.update(hi - lo)
        bar.close()
        parts = [np.load(partial / f"{c:06d}.npy") for c in range(n_chunks)]
        full = np.concatenate(parts) if parts else np.zeros((0, encoder.dim), dtype=self.dtype)
        with atomic_file(path, "wb") as f:
            np.save(f, full)
        write_json(path.with_suffix(".json"), {**key, "shape": list(full.shape), "sha256": checksum(path)})
        shutil.rmtree(partial, ignore_errors=True)
