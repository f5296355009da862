"""Two query-time kernels at STaRK's sizes, each against the way it was done before, in the same run.

    python bench/search_kernels.py [--rows 1100000] [--dim 384] [--result-rows 500000] [--repeat 5]

- exact vector search over a float16 matrix of ``--rows`` unit vectors (1.1M: MAG's authors, the largest
  type an anchor is linked in): the one-pass scan that converts every chunk to float32 (the baseline) vs
  :class:`grasp.encode.index.ExactIndex`'s two passes (half precision over every row, the shortlist
  rescored in float32); ms per anchor, and whether the top 100 agree;
- fetching a Kùzu result of ``--result-rows`` (id, score) rows (one hub anchor's candidates): Python's
  row loop (``has_next``/``get_next``, the baseline) vs the columnar export grasp uses (``get_as_df``).

Best of ``--repeat`` for each variant; the two variants of a kernel alternate, so machine noise hits both.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def best(fns: dict, repeat: int) -> dict[str, float]:
    times = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name] = min(times[name], time.perf_counter() - t)
    return times


def vector_search(rows: int, dim: int, repeat: int) -> None:
    from grasp.encode.index import ExactIndex

    rng = np.random.default_rng(0)
    matrix = np.empty((rows, dim), dtype=np.float16)
    for lo in range(0, rows, 100_000):  # built in slices: a float32 copy of the whole would double the memory
        x = rng.standard_normal((min(100_000, rows - lo), dim), dtype=np.float32)
        matrix[lo:lo + len(x)] = x / np.linalg.norm(x, axis=1, keepdims=True)
    ids = np.arange(rows)
    query = matrix[rows // 3].astype(np.float32) + 0.05 * rng.standard_normal(dim, dtype=np.float32)
    scan = ExactIndex(matrix, ids, chunk_rows=65536)
    two = ExactIndex(matrix, ids, chunk_rows=65536)
    t = best({"scan": lambda: scan._scan(query[None], 100), "two-pass": lambda: two.search(query, 100)}, repeat)
    (a_ids, a_s), (b_ids, b_s) = scan._scan(query[None], 100), two.search(query, 100)
    same = np.array_equal(np.sort(a_ids[0]), np.sort(b_ids[0])) and np.allclose(np.sort(a_s[0]), np.sort(b_s[0]), atol=1e-6)
    print(f"| exact search, {rows:,} x {dim} float16, top 100 | one-pass float32 scan | {1000 * t['scan']:,.1f} ms | "
          f"two-pass | {1000 * t['two-pass']:,.1f} ms | {t['scan'] / t['two-pass']:.1f}x | top 100 equal: {same} |")


def kuzu_fetch(result_rows: int, repeat: int) -> None:
    from grasp.graph.backends import _fetch_columns, _import_engine, _rows_to_arrays

    kuzu = _import_engine("kuzu", "ladybug")
    with tempfile.TemporaryDirectory() as tmp:
        db = kuzu.Database(str(Path(tmp) / "db"))
        conn = kuzu.Connection(db)
        conn.execute("CREATE NODE TABLE T(id INT64, PRIMARY KEY (id))")
        np.savetxt(Path(tmp) / "n.csv", np.arange(result_rows), fmt="%d")
        conn.execute(f"COPY T FROM '{(Path(tmp) / 'n.csv').as_posix()}' (header=false)")
        cypher = "MATCH (n:T) WITH n.id AS id, n.id * 0.5 AS s RETURN id, s"

        def loop():
            result, rows = conn.execute(cypher), []
            while result.has_next():
                rows.append(result.get_next())
            result.close()
            return _rows_to_arrays(rows)

        def columns():
            result = conn.execute(cypher)
            try:
                return _fetch_columns(result)
            finally:
                result.close()

        t = best({"loop": loop, "columns": columns}, repeat)
        (a_ids, a_s), (b_ids, b_s) = loop(), columns()
        same = np.array_equal(a_ids, b_ids) and np.array_equal(a_s, b_s)
        print(f"| Kùzu result, {result_rows:,} rows | row loop | {1000 * t['loop']:,.1f} ms | columnar | "
              f"{1000 * t['columns']:,.1f} ms | {t['loop'] / t['columns']:.1f}x | arrays equal: {same} |")
        conn.close()
        db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--result-rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| kernel | baseline | time | new | time | speed-up | check |\n|---|---|---:|---|---:|---:|---|")
    vector_search(args.rows, args.dim, args.repeat)
    kuzu_fetch(args.result_rows, args.repeat)


if __name__ == "__main__":
    main()
