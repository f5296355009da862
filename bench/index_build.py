"""Index build: wall time and peak memory of each step on one SKB, in a fresh cache folder.

    python bench/index_build.py --skb ../shared/data/skb/pkg [--sample 2000]

Steps: load the SKB; render every candidate document; BM25; the Kùzu graph load; mFAR's
per-field BM25 indexes; and the dense embeddings, timed on the first --sample documents and
extrapolated to all (the full pass is 30+ minutes on these CPUs; the README gives the full
measured time). Each step runs in its own process, so its peak RSS is its own; BM25 over the
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
    "BM25 index": "ws.retriever('bm25')",
    "Kùzu graph load": "from grasp.graph.build import build_engine; build_engine(ws.config.graph, ws.skb, ws.cache_dir, progress=ws.progress)",
    "mFAR field BM25 indexes": textwrap.dedent("""
        from grasp.text.mfar import FieldIndex
        FieldIndex(ws.skb, ws.layout, ws.encoder, ws.cache_dir, bm25=ws.config.bm25, dense_fields=[], progress=False)"""),
    "dense embeddings (sample)": textwrap.dedent("""
        ids = ws.skb.candidate_ids[:SAMPLE]
        texts = [ws.layout.document(ws.skb, int(i)) for i in ids]
        ws.encoder.encode(texts[:64])
        t = time.perf_counter(); ws.encoder.encode(texts); extra['per_doc_s'] = (time.perf_counter() - t) / len(texts)
        extra['n_docs'] = int(ws.skb.candidate_ids.size)"""),
}

RUNNER = """
import json, resource, sys, time
t0 = time.perf_counter()
from grasp.config import load_config
from grasp.workspace import Workspace
SAMPLE = {sample}
extra = {{}}
ws = Workspace.open({skb!r}, load_config(None, ["cache_dir={cache}"]), progress=False)
t1 = time.perf_counter()
{code}
t2 = time.perf_counter()
print(json.dumps({{"load_s": t1 - t0, "step_s": t2 - t1, "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, **extra}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--sample", type=int, default=2000)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="grasp-build-")
    rows = []
    for name, code in STEPS.items():
        src = RUNNER.format(sample=args.sample, skb=args.skb, cache=cache, code=code)
        out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{name}: {out.stderr[-1500:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if name == "load SKB":
            r["step_s"] = r["load_s"]
        if "per_doc_s" in r:
            r["step_s"] = r["per_doc_s"] * r["n_docs"]
            name = f"dense embeddings (all {r['n_docs']:,}, extrapolated from {args.sample:,})"
        rows.append((name, r["step_s"], r["peak_gb"]))
    base = next(s for n, s, _ in rows if n == "BM25 index")
    print(f"{args.skb}\n\n| step | wall s | peak RSS GB | / BM25 |\n|---|---:|---:|---:|")
    for name, secs, gb in rows:
        print(f"| {name} | {secs:.1f} | {gb:.2f} | {secs / base:.1f}x |")


if __name__ == "__main__":
    main()
