"""BM25 index build: grasp's chunked build against bm25s' own index step, on an SKB's candidate documents.

    python bench/bm25_build.py --skb DIR [--limit N] [--kinds bm25s,chunked]

Each build runs in its own process (so its peak RSS is its own) over the same rendered documents: ``bm25s``
tokenizes the whole corpus into Python lists and indexes them (what grasp did before); ``chunked`` is
:func:`grasp.text.bm25.index_in_chunks` (documents rendered, tokenized and reduced 20,000 at a time). Prints seconds,
peak RSS and whether the two score matrices agree.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def build(kind: str, skb_dir: str, limit: int | None, out: str) -> None:
    import bm25s
    import numpy as np

    from grasp.config import BM25Config
    from grasp.skb import load_skb
    from grasp.skb.documents import layout_for
    from grasp.text.bm25 import index_in_chunks, make_tokenizer

    skb = load_skb(skb_dir)
    layout, ids = layout_for(skb), skb.candidate_ids[:limit]
    cfg = BM25Config()
    tok, model = make_tokenizer(cfg), bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
    t0 = time.perf_counter()
    if kind == "bm25s":
        corpus = [layout.document(skb, int(i)) for i in ids]
        model.index(tok.tokenize(corpus, update_vocab=True, return_as="tuple", show_progress=False), show_progress=False)
    else:
        chunks = ([layout.document(skb, int(i)) for i in ids[lo:lo + 20_000]] for lo in range(0, ids.size, 20_000))
        index_in_chunks(model, tok, chunks)
    print(f"seconds {time.perf_counter() - t0:.1f}")
    np.save(out, np.asarray(model.scores["data"]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_build":
        build(sys.argv[2], sys.argv[3], int(sys.argv[4]) or None, sys.argv[5])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skb", required=True)
    ap.add_argument("--limit", type=int, default=0, help="first N candidate documents (default: all)")
    ap.add_argument("--kinds", default="bm25s,chunked",
                    help="builds to run, comma-separated (bm25s' own holds every token: leave it out at STaRK size)")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    import tempfile

    import numpy as np

    rows, data = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            out = str(Path(tmp) / f"{kind}.npy")
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, __file__, "_build", kind, args.skb, str(args.limit), out],
                                    stdout=subprocess.PIPE, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
            inner = proc.stdout.read().strip().split()[-1]
            rows[kind] = (float(inner), time.perf_counter() - t0, usage.ru_maxrss / 2**20)
            data[kind] = np.load(out)
    same = None
    if {"bm25s", "chunked"} <= set(data):
        same = data["bm25s"].shape == data["chunked"].shape and np.allclose(data["bm25s"], data["chunked"], rtol=1e-5)
    print(f"BM25 build over {args.skb} ({'all' if not args.limit else args.limit} candidate documents)")
    print("| build | index s | process s | peak RSS GiB | vs bm25s (index s, RSS) |\n|---|---:|---:|---:|---|")
    for kind, (index_s, proc_s, rss) in rows.items():
        base = rows.get("bm25s", rows[kinds[0]])
        print(f"| {kind} | {index_s:.1f} | {proc_s:.1f} | {rss:.2f} | {index_s / base[0]:.2f}x, {rss / base[2]:.2f}x |")
    if same is not None:
        print(f"score matrices equal: {same}")


if __name__ == "__main__":
    main()
