"""The vector backends side by side in one run: build time, query latency and recall against exact search.

    python bench/vector_backends.py [--skb DIR ...] [--synthetic ROWS ...] [--queries 100] [--k 100]
        [--dim 384] [--seed 0] [--backend "milvus HNSW" ...] [--json FILE]

For each KB (``--skb``; the demo when neither ``--skb`` nor ``--synthetic`` is given) the document vectors of its largest candidate type (the matrix the
dense baseline and a descriptive anchor search; built and cached by the workspace, MiniLM) are searched with the
vectors of its own queries; for each ``--synthetic ROWS`` a STaRK-sized matrix of seeded unit vectors in clusters is
searched with noisy copies of some of its rows. Backends, each over the
same matrix: exact (grasp's default: every row scored), faiss HNSW, Milvus Lite FLAT and Milvus Lite HNSW (the same
pymilvus client a Milvus server is used through). One query at a time, as anchor linking and the dense baseline
search; recall@10 and recall@k are the share of exact search's ids found.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from grasp.config import VectorIndexConfig  # noqa: E402
from grasp.encode.index import VectorIndex, open_index  # noqa: E402


def kb_matrix(skb_dir: Path, n_queries: int) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(label, ids, matrix, query vectors) of a KB's largest candidate type, its own queries encoded."""
    from grasp.config import load_config
    from grasp.skb import read_queries
    from grasp.workspace import Workspace

    ws = Workspace.open(skb_dir, load_config(None, []), progress=False)
    types = ws.skb.schema.candidate_types
    largest = max(types, key=lambda t: len(ws.skb.nodes_of_type(t)))
    ids, matrix = ws.node_vectors.embeddings("doc", largest)
    queries = read_queries(skb_dir / "qa" / "queries.jsonl")[:n_queries]
    q = ws.encoder.encode_queries([x.text for x in queries])
    return f"{ws.skb.name}: {largest} docs", ids, matrix, np.asarray(q, dtype=np.float32)


def synthetic_matrix(rows: int, dim: int, n_queries: int, seed: int) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """Seeded unit vectors in clusters (text embeddings are not uniform on the sphere: uniform random vectors in 384
    dimensions are all nearly orthogonal, the case no ANN index is built for), and queries near some rows."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(rows // 100, 1), dim)).astype(np.float32)
    m = centers[rng.integers(0, len(centers), rows)] + rng.normal(scale=0.6, size=(rows, dim)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = m[rng.choice(rows, n_queries, replace=False)] + rng.normal(scale=0.5 / np.sqrt(dim), size=(n_queries, dim))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    return f"clustered random vectors, {rows:,} rows", np.arange(rows, dtype=np.int64), m.astype(np.float16), q


def build(backend: str, ids: np.ndarray, matrix: np.ndarray, root: Path, label: str) -> VectorIndex:
    """The index grasp would open with this backend configured (its defaults: HNSW's m 32, ef 128)."""
    kind, _, index_type = backend.partition(" ")
    config = VectorIndexConfig(backend=kind, **({"milvus_index": index_type} if kind == "milvus" else {}))
    return open_index(matrix, ids, config, label=label, key=["bench", label], root=root, progress=False)


def measure(label: str, ids: np.ndarray, matrix: np.ndarray, queries: np.ndarray, k: int, root: Path,
            backends: list[str], tag: str) -> list[dict]:
    out, truth = [], None
    for n, backend in enumerate(backends):
        t = time.perf_counter()
        index = build(backend, ids, matrix, root, tag)
        build_s = time.perf_counter() - t
        index.search(queries[:1], k)  # warm: memory maps, torch kernels, the gRPC channel
        lat, found = [], []
        for q in queries:
            t = time.perf_counter()
            got, _ = index.search(q[None, :], k)
            lat.append(1000 * (time.perf_counter() - t))
            found.append(got[0])
        found = np.stack(found)
        if n == 0:
            truth = found
        r10 = np.mean([len(set(a[:10]) & set(b[:10])) / min(10, len(b)) for a, b in zip(found, truth, strict=True)])
        rk = np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, truth, strict=True)])
        row = {"vectors": label, "rows": int(ids.size), "backend": backend, "build_s": round(build_s, 2),
               "p50_ms": round(float(np.percentile(lat, 50)), 2), "p95_ms": round(float(np.percentile(lat, 95)), 2),
               "recall@10": round(float(r10), 4), f"recall@{k}": round(float(rk), 4)}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def main() -> None:
    from grasp.packaged import DEMO_SKB

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", type=Path, action="append", default=None)
    ap.add_argument("--synthetic", type=int, action="append", default=[])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", dest="backends", action="append",
                    choices=["faiss HNSW", "milvus FLAT", "milvus HNSW"], help="measure only these (exact always)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    backends = ["exact", *(args.backends or ["faiss HNSW", "milvus FLAT", "milvus HNSW"])]  # exact: the truth
    kbs = args.skb if args.skb is not None else ([] if args.synthetic else [DEMO_SKB])
    sets = [kb_matrix(p, args.queries) for p in kbs]
    sets += [synthetic_matrix(rows, args.dim, args.queries, args.seed) for rows in args.synthetic]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, ids, matrix, queries) in enumerate(sets):
            rows += measure(label, ids, matrix, queries, args.k, Path(tmp), backends, f"set{i}")
    k = args.k
    print(f"\n| vectors | rows | backend | build s | p50 ms | p95 ms | recall@10 | recall@{k} |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['vectors']} | {r['rows']:,} | {r['backend']} | {r['build_s']:.2f} | {r['p50_ms']:.2f} | "
              f"{r['p95_ms']:.2f} | {r['recall@10']:.3f} | {r[f'recall@{k}']:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
