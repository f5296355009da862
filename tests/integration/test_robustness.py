"""Robustness: an index build killed midway (SIGKILL, a real process) never leaves a half index
that is served; the next run resumes and finishes. Damaged index files are found at open and refused with
one line, never read; two builders of one index both succeed; a read-only cache and a cache path holding
quotes are handled."""

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

    with pytest.raises(IndexCorruptError, match="changed since it was built .* the next run rebuilds it"):
        KuzuBackend(skb, root, progress=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The toy KB with its BM25, graph and mFAR indexes built (by this code: every checksum recorded)."""
    root = tmp_path_factory.mktemp("built")
    toy = write_toy(root / "toy")
    cache = root / "cache"
    p = _grasp(cache, "index", "--skb", str(toy), "--method", "bm25", "--method", "graph", "--method", "mfar")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-1000:]
    return toy, cache


def _overwrite(path, start: int = 0) -> None:
    """Same-size garbage from byte ``start`` on (the header, when kept, still reads)."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(os.urandom(size - start))


def _damaged_copy(built, tmp_path, damage):
    import shutil

    toy, cache = built
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    damage(next(copy.glob("skb/*")))
    return toy, copy


@pytest.mark.parametrize("method, damage, refused", [
    # a node-vector matrix with its .npy header intact: once served silently with other results
    ("mfar", lambda root: _overwrite(next(root.glob("embeddings/name-gene-*.npy")), 128), "embedding matrix changed"),
    # a truncated mFAR field-rows file: once a numpy traceback, and not covered by `info --verify`
    ("mfar", lambda root: (lambda p: p.write_bytes(p.read_bytes()[:-8]))(next(root.glob("mfar/rows-*.npy"))),
     "mFAR field rows changed"),
    ("bm25", lambda root: _overwrite(next(root.glob("bm25-*/model/*.npy")), 128), "BM25 index changed"),
])
def test_a_damaged_index_is_refused_not_served(built, tmp_path, method, damage, refused):
    toy, cache = _damaged_copy(built, tmp_path, damage)
    p = _grasp(cache, "search", "sodium channel", "--skb", str(toy), "--method", method)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 2 and out == "" and "Traceback" not in err
    assert refused in err and "the next run rebuilds it" in err and err.strip().count("\n") == 0


def test_a_damaged_graph_database_is_refused_and_verify_sees_it(built, tmp_path):
    """Same-size garbage in Kùzu's file: once a MemoryError traceback, and `info --verify` said it held."""
    toy, cache = _damaged_copy(built, tmp_path, lambda root: _overwrite(root / "kuzu-v1" / "db", 4096))
    from grasp.errors import IndexCorruptError
    from grasp.graph.backends import KuzuBackend
    from grasp.skb import read_skb

    with pytest.raises(IndexCorruptError, match="Kùzu database changed since it was built"):
        KuzuBackend(read_skb(toy), next(cache.glob("skb/*")), progress=False)
    p = _grasp(cache, "info", "--skb", str(toy), "--verify")
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0 and "verified: CHANGED: graph" in out


def test_info_verify_recomputes_every_index(built):
    toy, cache = built
    p = _grasp(cache, "info", "--skb", str(toy), "--verify")
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert "verified: every recorded checksum holds" in out
    lines = [line for line in out.splitlines() if line.startswith("  ") and "sha256" in line]
    assert any(line.lstrip().startswith("graph ") and line.endswith("ok") for line in lines)
    assert any("/rows-" in line and line.endswith("ok") for line in lines)  # mFAR's field rows carry one too
    assert not [line for line in lines if "not recorded" in line]


def test_a_read_only_cache_missing_an_index_says_so(built, tmp_path, monkeypatch, capsys):
    """Writing under the cache fails as on a read-only file system (the OS is the boundary simulated)."""
    import errno
    import shutil

    from grasp.cli import main

    toy, cache = built
    copy = tmp_path / "ro"
    shutil.copytree(cache, copy)
    for index in next(copy.glob("skb/*")).glob("bm25-*"):
        shutil.rmtree(index)
    real_mkdir, real_open = os.mkdir, os.open

    def refuse(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(os, "mkdir", lambda path, *a, **k: refuse(path) if str(copy) in str(path) else real_mkdir(path, *a, **k))
    monkeypatch.setattr(os, "open", lambda path, flags, *a, **k: refuse(path) if str(copy) in str(path) and flags & os.O_CREAT
                        else real_open(path, flags, *a, **k))
    with pytest.raises(SystemExit) as exit_:
        main(["-q", "--cache-dir", str(copy), "search", "sodium", "--skb", str(toy), "--method", "bm25"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("error: cannot write ") and "(Read-only file system)" in err
    assert err.count("\n") == 1


def test_two_builders_of_one_index_take_turns(tmp_path):
    """The second builder once took the first one's temporary folder for a stale one and deleted it."""
    import threading

    from grasp.storage import atomic_dir, build_lock

    target = tmp_path / "index"
    inside, done, errors = threading.Event(), [], []

    def first():
        try:
            with atomic_dir(target) as tmp:
                (tmp / "part").write_text("first")
                inside.set()
                time.sleep(0.5)
            done.append("first")
        except Exception as e:  # noqa: BLE001 - the test reports it
            errors.append(e)

    def second():
        inside.wait()
        with build_lock(target):  # checks again under the lock: the first one's result is reused
            if not target.exists():
                with atomic_dir(target) as tmp:
                    (tmp / "part").write_text("second")
        done.append("second")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == [] and done == ["first", "second"]
    assert (target / "part").read_text() == "first"


def test_two_index_commands_on_one_empty_cache_both_succeed(tmp_path):
    toy = write_toy(tmp_path / "toy")
    cache = tmp_path / "cache"
    procs = [_grasp(cache, "index", "--skb", str(toy), "--method", "bm25", "--method", "graph") for _ in range(2)]
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-500:] for _, err in results]
    assert len(list(cache.glob("skb/*/bm25-*/complete.json"))) == 1
    assert len(list(cache.glob("skb/*/kuzu-v1/complete.json"))) == 1


def test_a_cache_path_with_quotes_spaces_and_accents(tmp_path, capsys):
    """Kùzu once got the path pasted into COPY ... FROM '...': a quote in it broke the statement."""
    from grasp.cli import main

    toy = write_toy(tmp_path / "toy")
    cache = tmp_path / "it's a cäche"
    main(["-q", "--cache-dir", str(cache), "index", "--skb", str(toy), "--method", "graph"])
    assert "graph: ready" in capsys.readouterr().out
    from grasp.graph.backends import KuzuBackend
    from grasp.skb import read_skb

    backend = KuzuBackend(read_skb(toy), next(cache.glob("skb/*")), progress=False)
    assert backend._conn.execute("MATCH (n) RETURN count(*)").get_next()[0] == 9
    backend.close()
