"""How Stage 1 orders a plan's candidates: the graph branch alone, on cached plans (no LLM call), with the query's
own text weighed in beside the plan's relevance text (`graph.query_weight`) and each text's match made of the dense
cosine and BM25 (`graph.lexical_weight`).

    python bench/stage1_rescore.py --skb ../shared/data/skb/bio --skb ../shared/data/skb/pkg --split val --split test
        [--query-weights 0,0.01,0.1,0.3,1] [--lexical-weights 0,0.25,0.5,0.75,1,2] [--json FILE]

Each plan is executed once; each candidate's anchor score, and its document's cosine and BM25 score (over the
candidates' best) with the relevance text and with the query, are kept; every (query_weight, lexical_weight) then
ranks them as Stage 1 does: anchor + match(relevance text) + query_weight x match(query), match = cosine +
lexical_weight x BM25 / best. Prints graph-only Hit@1 (and MRR) per KB and split, one row per lexical weight.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from grasp import methods
from grasp.config import load_config
from grasp.eval.evaluate import evaluate_run
from grasp.results import Ranking, Run
from grasp.workspace import Workspace

REPLAY = ["planner.kind=cache", "planner.on_miss=no_trade"]


def components(ws: Workspace, split: str) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per query: (qid, candidate ids, anchor scores, cosines and best-scaled BM25 with [relevance text, query];
    the relevance text's rows are 0 where the plan has none)."""
    graph, bm25 = methods.retriever(ws, "graph"), methods.retriever(ws, "bm25")
    graph.rescore = False  # the anchor scores alone; the matches below
    out = []
    for q in ws.queries(split=split):
        ranking = graph.search_query(q, None)
        ids, anchor = np.asarray(ranking.node_ids), np.asarray(ranking.scores, dtype=np.float64)
        relevance = ((ranking.trace.plan or {}).get("target") or {}).get("relevance_text") or ""
        cos, lex = np.zeros((2, ids.size)), np.zeros((2, ids.size))
        for i, text in enumerate((relevance, q.text)):
            if text and ids.size:
                cos[i] = graph.cosines([text], ids)[0]
                scores = bm25.node_scores(text, ids)
                lex[i] = scores / scores.max() if scores.max() > 0 else 0.0
        out.append((q.qid, ids, anchor, cos, lex))
    return out


def measure(ws: Workspace, split: str, query_weights: list[float], lexical_weights: list[float]) -> list[dict]:
    queries = ws.queries(split=split)
    parts = components(ws, split)
    rows = []
    for wl in lexical_weights:
        for wq in query_weights:
            run = Run(f"graph@{wq},{wl}")
            for qid, ids, anchor, cos, lex in parts:
                match = cos + wl * lex
                run.add(Ranking.from_scores(qid, ids, anchor + match[0] + wq * match[1], stage="graph", k=100))
            rep = evaluate_run(run, queries, candidate_mask=ws.skb.candidate_mask)
            rows.append({"skb": ws.skb.name, "split": split, "query_weight": wq, "lexical_weight": wl,
                         "n": len(queries), "hit@1": round(100 * rep.means["hit@1"], 1),
                         "mrr": round(100 * rep.means["mrr"], 1)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", action="append", required=True)
    ap.add_argument("--split", action="append", default=None)
    ap.add_argument("--query-weights", default="0,0.01,0.1,0.3,1")
    ap.add_argument("--lexical-weights", default="0,0.25,0.5,0.75,1,2")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    wq = [float(w) for w in args.query_weights.split(",")]
    wl = [float(w) for w in args.lexical_weights.split(",")]
    rows = []
    for skb in args.skb:
        ws = Workspace.open(skb, load_config(None, [*REPLAY, *args.overrides]), progress=False)
        for split in args.split or ["val"]:
            rows += measure(ws, split, wq, wl)
    print("graph-only Hit@1 (MRR); rows: graph.lexical_weight, columns: graph.query_weight\n")
    print("| KB | split | lexical \\ query | " + " | ".join(f"{w:g}" for w in wq) + " |")
    print("|---|---|---:|" + "---:|" * len(wq))
    for i in range(0, len(rows), len(wq)):
        r = rows[i]
        cells = " | ".join(f"{x['hit@1']:.1f} ({x['mrr']:.1f})" for x in rows[i:i + len(wq)])
        print(f"| {r['skb']} | {r['split']} | {r['lexical_weight']:g} | {cells} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
