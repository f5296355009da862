"""Index build: wall time and peak memory of each step on one SKB, in a fresh cache folder.

    python bench/index_build.py --skb ../shared/data/skb/pkg [--sample 2000] [--precisions fp32,bf16]

Steps: load the SKB; render every candidate document; BM25; the Kùzu graph load; mFAR's
per-field BM25 indexes; then every encoder pass `grasp index` makes, once per precision
(``encoder.precision`` and ``reranker.precision``): the candidates' documents (doc mode), every
node's name (name mode), and the candidates' serializations for the zero-shot and the trained
reranker's stored vectors. Each encoder pass is timed on a seeded random sample of --sample texts
and extrapolated to all of them (the full passes take many minutes; the README gives a full
`grasp index` too). Each step runs in its own process, so its peak RSS is its own; BM25 over the
documents is the baseline the other steps are compared with (same run, same machine load).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap

STEPS = {
    "load SKB": "",
    "render documents": "docs = [ws.layout.document(ws.skb, int(i)) for i in ws.skb.candidate_ids]",
    "BM25 index": "methods.retriever(ws, 'bm25')",
    "Kùzu graph load": "from grasp.graph.build import build_engine; build_engine(ws.config.graph, ws.skb, ws.cache_dir, progress=ws.progress)",
    "mFAR field BM25 indexes": textwrap.dedent("""
        from grasp.text.mfar import FieldIndex
        FieldIndex(ws.skb, ws.layout, ws.encoder, ws.cache_dir, bm25=ws.config.bm25, dense_fields=[], progress=False)"""),
}

# encoder passes: (texts of the sampled ids, how many texts the full pass has, the encoder)
ENCODER_STEPS = {
    "dense embeddings, doc mode": ("ids = sample(ws.skb.candidate_ids); texts = [ws.layout.document(ws.skb, int(i)) for i in ids]; "
                                   "n = ws.skb.candidate_ids.size; encoder = ws.encoder"),
    "name vectors, name mode": ("from grasp.skb.documents import name_text; ids = sample(np.arange(ws.skb.num_nodes)); "
                                "texts = [name_text(ws.skb, int(i)) for i in ids]; n = ws.skb.num_nodes; encoder = ws.encoder"),
    "zero-shot reranker store": ("ids = sample(ws.skb.candidate_ids); texts = [ws.serializer(int(i)) for i in ids]; "
                                 "n = ws.skb.candidate_ids.size; encoder = ws.encoder"),
    "trained reranker store": textwrap.dedent("""
        from grasp.rerank.build import build_reranker
        from grasp.artifacts import RERANKER_ADAPTER
        ids = sample(ws.skb.candidate_ids); texts = [ws.serializer(int(i)) for i in ids]; n = ws.skb.candidate_ids.size
        encoder = build_reranker(ws.config.reranker, ws.encoder, ws.artifact(RERANKER_ADAPTER)).document_encoder"""),
}
TIME_ENCODER = textwrap.dedent("""
    encoder.encode(texts[:64])
    t = time.perf_counter(); encoder.encode(texts); extra['per_text_s'] = (time.perf_counter() - t) / len(texts)
    extra['n_texts'] = int(n)""")

RUNNER = """
import json, resource, sys, time
import numpy as np
t0 = time.perf_counter()
from grasp.config import load_config
from grasp.workspace import Workspace
from grasp import methods
SAMPLE = {sample}
extra = {{}}
def sample(ids):
    ids = np.asarray(ids)
    return np.random.default_rng(13).choice(ids, min(SAMPLE, ids.size), replace=False)
ws = Workspace.open({skb!r}, load_config(None, ["cache_dir={cache}", *{overrides!r}]), progress=False)
t1 = time.perf_counter()
{code}
t2 = time.perf_counter()
print(json.dumps({{"load_s": t1 - t0, "step_s": t2 - t1, "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, **extra}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--precisions", default="fp32,bf16", help="encoder precisions to time, the first is the baseline")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="grasp-build-")
    precisions = [p.strip() for p in args.precisions.split(",")]

    def run(code: str, overrides: list[str]) -> dict:
        src = RUNNER.format(sample=args.sample, skb=args.skb, cache=cache, code=code, overrides=overrides)
        out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{code[:60]}: {out.stderr[-1500:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    rows = []
    for name, code in STEPS.items():
        r = run(code, [])
        rows.append((name, {"": (r["load_s"] if name == "load SKB" else r["step_s"], r["peak_gb"])}))
    for name, code in ENCODER_STEPS.items():
        timed = {}
        for p in precisions:
            r = run(code + TIME_ENCODER, [f"encoder.precision={p}", f"reranker.precision={p}"])
            timed[p] = (r["per_text_s"] * r["n_texts"], r["peak_gb"])
        rows.append((f"{name} (all {r['n_texts']:,}, extrapolated from {min(args.sample, r['n_texts']):,})", timed))
    base = rows[[n for n, _ in rows].index("BM25 index")][1][""][0]
    print(f"{args.skb}\n\n| step | " + " | ".join(f"{p} s | {p} peak GB" for p in precisions)
          + f" | {precisions[0]} / BM25 | {' | '.join(f'{p} / {precisions[0]}' for p in precisions[1:])} |")
    print("|---|" + "---:|" * (2 * len(precisions) + len(precisions)))
    totals = dict.fromkeys(precisions, 0.0)
    for name, timed in rows:
        cells = [timed.get(p, timed.get("")) for p in precisions]
        for p, (secs, _) in zip(precisions, cells, strict=True):
            totals[p] += secs
        ratios = [f"{cells[0][0] / c[0]:.2f}x" for c in cells[1:]] if "" not in timed else ["" for _ in cells[1:]]
        print(f"| {name} | " + " | ".join(f"{secs:.1f} | {gb:.2f}" for secs, gb in cells)
              + f" | {cells[0][0] / base:.1f}x | " + " | ".join(ratios) + " |")
    print("| all steps | " + " | ".join(f"{totals[p]:.0f} | " for p in precisions) + " | "
          + " | ".join(f"{totals[precisions[0]] / totals[p]:.2f}x" for p in precisions[1:]) + " |")


if __name__ == "__main__":
    main()
