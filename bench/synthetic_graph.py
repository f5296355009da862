"""How the graph stage scales: a synthetic SKB of 1M nodes / 10M edges with hub nodes, loaded
into the embedded Kùzu backend, and Stage-1 plans of 1 and 2 hops from hub and tail anchors,
timed on Kùzu and on the in-memory CSR executor (the baseline measured in the same run).

    python bench/synthetic_graph.py [--nodes 1000000] [--edges 10000000] [--reps 20] [--out DIR]

The graph: items (candidates, 90 %), tags (9 %) and vendors (1 %). item-has_tag->tag follows a
Zipf law (the top tag holds ~10 % of all tag edges), item-made_by->vendor likewise, and
item-related->item links items with a few hub items of very high degree. Nothing is written to
the project; the database goes to a temporary folder unless --out is given.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from grasp.graph.backends import KuzuBackend  # noqa: E402
from grasp.graph.compiler import CypherNames, compile_plan  # noqa: E402
from grasp.graph.linking import Binding  # noqa: E402
from grasp.graph.memory import MemoryExecutor  # noqa: E402
from grasp.plan.model import Plan  # noqa: E402
from grasp.skb import SKB, NodeTypeSpec, RelationSpec, Schema  # noqa: E402


def synthetic_skb(n_nodes: int, n_edges: int, seed: int = 0) -> SKB:
    rng = np.random.default_rng(seed)
    n_items, n_tags = int(n_nodes * 0.90), int(n_nodes * 0.09)
    n_vendors = n_nodes - n_items - n_tags
    node_type = np.concatenate([np.zeros(n_items), np.ones(n_tags), np.full(n_vendors, 2)]).astype(np.int16)
    tags0, vendors0 = n_items, n_items + n_tags
    schema = Schema(name="synthetic", node_types={"item": NodeTypeSpec(), "tag": NodeTypeSpec(), "vendor": NodeTypeSpec()},
                    relations=[RelationSpec(name="has_tag", source="item", target="tag"),
                               RelationSpec(name="made_by", source="item", target="vendor"),
                               RelationSpec(name="related", source="item", target="item")],
                    candidate_types=["item"])

    def zipf_targets(n: int, k: int) -> np.ndarray:
        return np.minimum(rng.zipf(1.3, size=n) - 1, k - 1)

    n_made = n_items
    n_tag = int((n_edges - n_made) * 0.4)
    n_rel = n_edges - n_made - n_tag
    src = np.concatenate([rng.integers(0, n_items, n_tag), np.arange(n_items), rng.integers(0, n_items, n_rel)])
    hubs = rng.integers(0, n_items, 50)
    rel_dst = np.where(rng.random(n_rel) < 0.2, hubs[rng.integers(0, 50, n_rel)], rng.integers(0, n_items, n_rel))
    dst = np.concatenate([tags0 + zipf_targets(n_tag, n_tags), vendors0 + zipf_targets(n_made, n_vendors), rel_dst])
    rel = np.concatenate([np.zeros(n_tag), np.ones(n_made), np.full(n_rel, 2)]).astype(np.int16)
    names = [f"n{i}" for i in range(n_nodes)]
    return SKB(schema, node_type, names, [{} for _ in range(n_nodes)], src.astype(np.int32), rel, dst.astype(np.int32),
               fingerprint=f"synthetic-{n_nodes}-{n_edges}-{seed}")


PLANS = {
    "1 hop: vendor -> items": ({"anchors": [{"var": "V", "text": "v", "label": "vendor", "match_mode": "name"}],
                                "hops": [{"from": "V", "rel": "made_by", "to_var": "T", "to_label": "item"}]}, "vendor"),
    "1 hop: tag -> items": ({"anchors": [{"var": "G", "text": "g", "label": "tag", "match_mode": "name"}],
                             "hops": [{"from": "G", "rel": "has_tag", "to_var": "T", "to_label": "item"}]}, "tag"),
    "2 hops: vendor -> item -> related items": (
        {"anchors": [{"var": "V", "text": "v", "label": "vendor", "match_mode": "name"}],
         "hops": [{"from": "V", "rel": "made_by", "to_var": "I", "to_label": "item"},
                  {"from": "I", "rel": "related", "to_var": "T", "to_label": "item"}]}, "vendor"),
    "2 branches: tag & vendor -> items": (
        {"anchors": [{"var": "G", "text": "g", "label": "tag", "match_mode": "name"},
                     {"var": "V", "text": "v", "label": "vendor", "match_mode": "name"}],
         "hops": [{"from": "G", "rel": "has_tag", "to_var": "T", "to_label": "item"},
                  {"from": "V", "rel": "made_by", "to_var": "T", "to_label": "item"}]}, "tag+vendor"),
}


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    t0 = time.perf_counter()
    skb = synthetic_skb(args.nodes, args.edges)
    t1 = time.perf_counter()
    mem = MemoryExecutor(skb)
    t2 = time.perf_counter()
    root = args.out or Path(tempfile.mkdtemp(prefix="grasp-synth-"))
    kz = KuzuBackend(skb, root, buffer_pool_mb=4096, progress=False)
    t3 = time.perf_counter()
    deg = np.bincount(np.concatenate([skb.edge_src, skb.edge_dst]), minlength=skb.num_nodes)
    print(f"graph: {skb.num_nodes:,} nodes, {skb.num_edges:,} edges; max degree {deg.max():,}, median {int(np.median(deg))}")
    print(f"build SKB {t1 - t0:.1f} s, CSR executor {t2 - t1:.1f} s, Kùzu bulk load {t3 - t2:.1f} s; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")

    names = CypherNames(skb.schema)
    rng = np.random.default_rng(1)
    first = {t: int(np.flatnonzero(skb.node_type == i)[0]) for i, t in enumerate(["item", "tag", "vendor"])}
    count = {t: int((skb.node_type == i).sum()) for i, t in enumerate(["item", "tag", "vendor"])}
    print("\n| plan | anchors | n_cand (median) | Kùzu p50 ms | Kùzu p95 ms | CSR p50 ms | CSR p95 ms | Kùzu / CSR (p50) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for title, (body, _) in PLANS.items():
        plan = Plan.model_validate({**body, "target": {"var": "T", "labels": ["item"], "relevance_text": ""},
                                    "risk_level": "normal"})
        for which in ("hub", "tail"):
            tk, tm, ncand = [], [], []
            for _ in range(args.reps):
                bindings = {}
                for a in plan.anchors:
                    base, n = first[a.label], count[a.label]
                    # hubs: the Zipf head (ids 0-4 of the type); tail: a random id from the long tail
                    local = rng.integers(0, 5, 3) if which == "hub" else rng.integers(n // 2, n, 3)
                    bindings[a.var] = Binding(a.var, (base + np.unique(local)).astype(np.int64),
                                              np.linspace(0.9, 0.8, np.unique(local).size))
                q = compile_plan(plan, bindings, names)
                s = time.perf_counter()
                ids_k, _ = kz.run(q)
                tk.append(time.perf_counter() - s)
                s = time.perf_counter()
                ids_m, _ = mem.execute(plan, bindings)
                tm.append(time.perf_counter() - s)
                assert ids_k.size == ids_m.size, "Kùzu and the CSR executor disagree"
                ncand.append(ids_k.size)
            print(f"| {title} | {which} | {int(np.median(ncand)):,} | {pct(tk, 50):.1f} | {pct(tk, 95):.1f} | "
                  f"{pct(tm, 50):.1f} | {pct(tm, 95):.1f} | {pct(tk, 50) / max(pct(tm, 50), 1e-6):.1f}x |")
    kz.close()


if __name__ == "__main__":
    main()
