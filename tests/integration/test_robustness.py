"""Robustness: an index build killed midway (SIGKILL, a real process) never leaves a half index
that is served; the next run resumes and finishes. Corrupt index files are named, not crashed on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import REPO, write_toy

pytestmark = pytest.mark.slow


def _big_toy(path, n=6000):
    nodes = [{"id": i, "type": "gene", "name": f"GENE{i}", "fields": {"full_name": f"protein {i % 97} subunit {i}"}}
             for i in range(n)]
    nodes.append({"id": n, "type": "chromosome", "name": "chromosome 1", "fields": {}})
    edges = [(i, "on_chromosome", n) for i in range(0, n, 7)]
    queries = [{"id": 0, "query": "protein 5 subunit", "answer_ids": [5], "split": "test"}]
    return write_toy(path, nodes=nodes, edges=edges, queries=queries)


def _grasp(cache, *args):
    env = {**os.environ, "GRASP_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO / "src")}
    return subprocess.Popen([sys.executable, "-m", "grasp.cli", "-q", *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_killed_embedding_build_resumes_and_never_serves_half(tmp_path):
    skb = _big_toy(tmp_path / "big")
    cache = tmp_path / "cache"
    proc = _grasp(cache, "index", "--skb", str(skb), "--method", "dense")
    deadline = time.time() + 300
    first_chunk = None
    while time.time() < deadline and first_chunk is None:
        first_chunk = next(iter(cache.glob("skb/*/embeddings/doc-gene-*.partial/000000.npy")), None)
        if proc.poll() is not None:
            pytest.fail(f"the build ended before it could be killed: {proc.stderr.read()[-500:]}")
        time.sleep(0.2)
    assert first_chunk is not None, "no chunk was written in time"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    finals = [p for p in cache.glob("skb/*/embeddings/doc-gene-*.npy")]
    assert finals == []  # killed midway: no matrix that looks complete
    # a search now builds the rest (resuming from the saved chunk) and answers
    out = _grasp(cache, "search", "protein 5 subunit", "--skb", str(skb), "--method", "dense", "-k", "3")
    stdout, stderr = out.communicate(timeout=600)
    assert out.returncode == 0, stderr[-1000:]
    assert "GENE" in stdout
    (final,) = cache.glob("skb/*/embeddings/doc-gene-*.npy")
    assert np.load(final, mmap_mode="r").shape == (6000, 384)
    assert not list(cache.glob("skb/*/embeddings/*.partial"))


def test_corrupt_graph_database_is_named(tmp_path):
    toy = write_toy(tmp_path / "toy")
    cache = tmp_path / "cache"
    p = _grasp(cache, "index", "--skb", str(toy), "--method", "bm25")
    assert p.wait(timeout=300) == 0
    from grasp.graph.backends import KuzuBackend
    from grasp.skb import read_skb

    skb = read_skb(toy)
    root = next(cache.glob("skb/*"))
    KuzuBackend(skb, root, progress=False).close()
    db = root / "kuzu-v1" / "db"
    (db if db.is_file() else next(p for p in db.rglob("*") if p.is_file())).write_bytes(b"\x00garbage" * 10)
    from grasp.errors import IndexCorruptError

    with pytest.raises(IndexCorruptError, match="delete it to rebuild"):
        KuzuBackend(skb, root, progress=False)
