"""Static and dynamic RRF side by side on a split: both settings chosen by `grasp tune fusion`
(the static optimum is kept in fusion.json's info) applied to the same graph and mFAR runs.

    python bench/fusion_modes.py --skb ../shared/data/skb/bio [--split test]
"""

from __future__ import annotations

import argparse

from grasp.config import load_config
from grasp.eval.report import evaluate_run, markdown_table
from grasp.fuse.retriever import FusedRetriever, FusionSetting
from grasp.workspace import Workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--split", default="test")
    args = ap.parse_args()
    ws = Workspace.open(args.skb, load_config(None, ["planner.kind=cache", "planner.on_miss=no_trade"]), progress=False)
    chosen = ws.load_setting(FusionSetting)
    static = chosen.info["static"]
    dyn = chosen.info["dynamic"]
    settings = {
        f"static RRF (w {static['w']}, k {static['k']:g})": FusionSetting("static", static["k"], w=static["w"]),
        f"dynamic RRF (k {dyn['k']:g})": FusionSetting("dynamic", dyn["k"], w_bucket=dyn["w_bucket"], m_risk=dyn["m_risk"]),
    }
    queries = ws.queries(split=args.split)
    graph, mfar = ws.retriever("graph"), ws.retriever("mfar")
    g, m = graph.batch_search(queries, 100), mfar.batch_search(queries, 100)
    reports = []
    for label, setting in settings.items():
        rep = evaluate_run(FusedRetriever(graph, mfar, setting).fuse(g, m, 100), queries, candidate_mask=ws.skb.candidate_mask)
        rep.method = label
        reports.append(rep)
    print(f"{ws.skb.name}, {args.split} ({len(queries)} queries); chosen on validation: {chosen.mode}\n")
    print(markdown_table(reports))


if __name__ == "__main__":
    main()
