"""Encoder throughput on one SKB: documents and names per second, float32 vs bfloat16 vs int8, against
the previous batching (sentence-transformers' own ``encode``, 64 texts per batch, as on main before).

    python bench/encoder_throughput.py --skb ../shared/data/skb/bio [--n 1000] [--reps 2]

A seeded random sample of candidate documents (doc mode) and of node names (name mode); every
variant encodes the same texts, the variants alternate for ``--reps`` rounds and each keeps its
best round (these machines are noisy). Cosine columns compare each variant's vectors with the
float32 ones of the new batching.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--n", type=int, default=1000, help="documents (and 4x as many names) per variant")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()

    from grasp.encode.encoder import SentenceTransformerEncoder
    from grasp.skb import load_skb
    from grasp.skb.documents import layout_for, name_text

    skb = load_skb(args.skb)
    layout = layout_for(skb)
    rng = np.random.default_rng(args.seed)
    docs = [layout.document(skb, int(i)) for i in rng.choice(skb.candidate_ids, args.n, replace=False)]
    names = [name_text(skb, int(i)) for i in rng.choice(skb.num_nodes, 4 * args.n, replace=False)]
    fp32 = SentenceTransformerEncoder(max_length=256)
    int8 = SentenceTransformerEncoder(max_length=256, precision="int8")
    bf16 = SentenceTransformerEncoder(max_length=256, precision="bf16")  # emulated (slow) without native bfloat16

    def previous(texts):  # main before this change: sentence-transformers' encode, 64 texts a batch
        return fp32._model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                                  show_progress_bar=False)

    variants = {"previous batching, fp32 (baseline)": previous, "token-budget batches, fp32": fp32.encode,
                "token-budget batches, bf16": bf16.encode, "token-budget batches, int8": int8.encode}
    best: dict[tuple[str, str], float] = {}
    vecs: dict[tuple[str, str], np.ndarray] = {}
    for _ in range(args.reps):
        for kind, texts in (("docs", docs), ("names", names)):
            for name, fn in variants.items():
                fn(texts[:32])  # warm
                t = time.perf_counter()
                vecs[(name, kind)] = np.asarray(fn(texts), dtype=np.float32)
                dt = time.perf_counter() - t
                best[(name, kind)] = min(best.get((name, kind), dt), dt)
    ref = "token-budget batches, fp32"
    print(f"{args.skb}: {len(docs)} documents, {len(names)} names, best of {args.reps}\n")
    print("| variant | docs/s | docs / baseline | doc cosine min / mean | names/s | names / baseline | name cosine min |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = list(variants)[0]
    for name in variants:
        cd = (vecs[(name, "docs")] * vecs[(ref, "docs")]).sum(1)
        cn = (vecs[(name, "names")] * vecs[(ref, "names")]).sum(1)
        print(f"| {name} | {len(docs) / best[(name, 'docs')]:.1f} | {best[(base, 'docs')] / best[(name, 'docs')]:.2f}x "
              f"| {cd.min():.4f} / {cd.mean():.4f} | {len(names) / best[(name, 'names')]:.0f} "
              f"| {best[(base, 'names')] / best[(name, 'names')]:.2f}x | {cn.min():.4f} |")


if __name__ == "__main__":
    main()
