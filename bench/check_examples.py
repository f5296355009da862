"""Check that each worked example's plan retrieves its gold answers (Stage 1 alone).

    python bench/check_examples.py --skb ../shared/data/skb/bio

For every example in prompts/examples/<profile>.jsonl whose query is in the SKB's queries file,
runs the example plan through anchor linking, the graph engine and rescoring, and prints the
rank of the first gold answer and Recall@20.
"""

from __future__ import annotations

import argparse

import numpy as np

from grasp import methods
from grasp.config import load_config
from grasp.eval.metrics import score_query
from grasp.plan.prompt import load_examples, profile_of
from grasp.plan.validate import check_plan
from grasp.workspace import Workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    ws = Workspace.open(args.skb, load_config(None, [*args.overrides, "planner.kind=cache"]), progress=True)
    graph = methods.retriever(ws, "graph")
    gold = {q.text: q.answer_ids for q in ws.queries()}
    rows = []
    for ex in load_examples(profile_of(ws.skb)):
        if ex.query not in gold:
            continue
        plan = check_plan(ex.plan, ws.skb.schema).plan
        run = graph._execute(plan)  # link, execute and rescore, as Stage 1 does for a usable plan
        ids, scores = run.ids, run.scores
        ranked = ids[np.lexsort((ids, -scores))]
        s = score_query(ranked, np.asarray(gold[ex.query]), ("hit@1", "recall@20", "mrr"), ws.skb.candidate_mask)
        rows.append(s)
        first = int(round(1 / s["mrr"])) if s["mrr"] else None
        print(f"q{ex.qid}: n_cand {ids.size:>6}  first gold at {first}  recall@20 {s['recall@20']:.2f}  {ex.query[:70]}")
    print(f"\n{len(rows)} examples: retrieve a gold answer {sum(r['mrr'] > 0 for r in rows)}, "
          f"gold in the top 20 {sum(r['recall@20'] > 0 for r in rows)}, "
          f"mean Hit@1 {np.mean([r['hit@1'] for r in rows]):.2f}")


if __name__ == "__main__":
    main()
