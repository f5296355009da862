"""mFAR with no trained weights: which fixed weighting of its (field, scorer) pairs ranks best, on validation.

Each query's per-field BM25 and dense scores are computed once; each weighting below then scores the same
candidates. Printed: Hit@1 and MRR of mFAR alone per KB and weighting.

- uniform: every active (field, scorer) pair alike (mFAR's zero initialisation);
- per-scorer: half the weight to BM25, half to dense, each spread evenly over its fields;
- document: BM25 and dense on the whole document (the ``single`` field) only, half each;
- document+name: BM25 and dense on the whole document and on the name, a quarter each.

    python bench/mfar_untrained.py --skb ../shared/data/skb/bio --skb ../shared/data/skb/pkg [--split val]

(``mfar.untrained=document``, the default, serves the "document" weighting; ``uniform`` the first.)
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from grasp import methods
from grasp.config import load_config
from grasp.eval.evaluate import evaluate_run
from grasp.results import Ranking, Run
from grasp.text.mfar.model import FieldWeights
from grasp.workspace import Workspace


def weightings(names: list[str], active: list[bool]) -> dict[str, np.ndarray]:
    f = len(names) // 2
    lexical, dense = np.array(active[:f], float), np.array(active[f:], float)

    def only(fields: set[str]) -> np.ndarray:
        w = np.array([a and n.split(":", 1)[1] in fields for n, a in zip(names, active, strict=True)], float)
        return w / w.sum()
    return {"uniform": np.array(active, float) / sum(active),
            "per-scorer": np.concatenate([0.5 * lexical / lexical.sum(), 0.5 * dense / max(dense.sum(), 1)]),
            "document": only({"single"}), "document+name": only({"single", "name"})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", action="append", required=True)
    ap.add_argument("--split", default="val")
    args = ap.parse_args()
    rows = {}
    for path in args.skb:
        ws = Workspace.open(path, load_config(None, ["artifacts.shipped=false", "planner.kind=cache"]), progress=False)
        mfar = methods.retriever(ws, "mfar")
        queries = ws.queries(split=args.split)
        q_emb = mfar.index.encoder.encode_queries([q.text for q in queries])
        tokens = mfar.index.tokenize([q.text for q in queries])
        scored = [mfar.field_scores(q_emb[i], [t[i] for t in tokens]) for i in range(len(queries))]
        active = [True] * mfar.index.n_fields + list(mfar.index.has_dense)
        for label, w in weightings(mfar.weight_names(), active).items():
            run = Run(label)
            for q, (cand, lex, dense) in zip(queries, scored, strict=True):
                s = FieldWeights.combine(torch.from_numpy(w[None]).float(), torch.from_numpy(lex[None]),
                                         torch.from_numpy(dense[None]))[0].numpy()
                run.add(Ranking.from_scores(q.qid, mfar.index.node_ids[cand], s, k=100))
            rep = evaluate_run(run, queries, candidate_mask=ws.skb.candidate_mask)
            rows.setdefault(label, {})[ws.skb.name] = (rep.means["hit@1"], rep.means["mrr"])
        print(f"{ws.skb.name}: done", flush=True)
    names = list(next(iter(rows.values())))
    print("\n| weighting | " + " | ".join(f"{n} Hit@1 | {n} MRR" for n in names) + " |")
    print("|---|" + "---:|" * (2 * len(names)))
    for label, per in rows.items():
        print(f"| {label} | " + " | ".join(f"{100 * per[n][0]:.1f} | {100 * per[n][1]:.1f}" for n in names) + " |")


if __name__ == "__main__":
    main()
