"""Every fusion selection rule `grasp tune fusion` compared (static best cell, static flattest region,
dynamic RRF per link floor, confidence RRF), each fitted on validation as fusion.json's info records it,
applied to the same graph and mFAR runs of a split: did cross-validation pick the rule that holds?

    python bench/fusion_modes.py --skb ../shared/data/skb/bio [--split test]
"""

from __future__ import annotations

import argparse

from grasp import methods
from grasp.config import load_config
from grasp.eval.evaluate import evaluate_run, markdown_table
from grasp.fuse.retriever import FusedRetriever, FusionSetting
from grasp.workspace import Workspace


def rule_setting(name: str, rule: dict, confidence: dict | None) -> FusionSetting:
    if name.startswith("static"):
        return FusionSetting("static", rule["rrf_k"], w=rule["w"])
    if name == "confidence":
        return FusionSetting("confidence", rule["rrf_k"], gamma=rule["gamma"], scale=rule["scale"], confidence=confidence)
    return FusionSetting("dynamic", rule["rrf_k"], w_bucket=rule["w_bucket"], m_risk=rule["m_risk"],
                         link_floor=float(rule.get("link_floor", name.split("@")[1])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--split", default="test")
    ap.add_argument("--set", action="append", default=[], help="configuration override (e.g. cache_dir=...)")
    args = ap.parse_args()
    ws = Workspace.open(args.skb, load_config(None, ["planner.kind=cache", "planner.on_miss=no_trade", *args.set]),
                        progress=False)
    chosen = ws.load_setting(FusionSetting)
    rules = chosen.info.get("rules")
    if not rules:
        raise SystemExit("fusion.json predates cross-validated tuning (no 'rules' in its info): rerun `grasp tune fusion`")
    queries = ws.queries(split=args.split)
    graph, mfar = methods.retriever(ws, "graph"), methods.retriever(ws, "mfar")
    g, m = graph.batch_search(queries, 100), mfar.batch_search(queries, 100)
    reports = []
    for name, rule in rules.items():
        rep = evaluate_run(FusedRetriever(graph, mfar, rule_setting(name, rule, chosen.confidence)).fuse(g, m, 100), queries,
                           candidate_mask=ws.skb.candidate_mask)
        rep.method = (f"{name}{' (chosen)' if name == chosen.info['chosen'] else ''}: "
                      f"val {100 * rule['hit@1']:.1f}, cv {100 * rule['cv_hit@1']:.1f}")
        reports.append(rep)
    print(f"{ws.skb.name}, {args.split} ({len(queries)} queries); rules fitted on {chosen.info['n']} "
          f"{chosen.info['split']} queries, chosen by {chosen.info['cv']['n_folds']}-fold cross-validation\n")
    print(markdown_table(reports))


if __name__ == "__main__":
    main()
