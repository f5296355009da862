"""Worked examples from a bank of verified plans against the prompt's static ones, on the same queries.

    python bench/plan_bank.py --skb DIR [--split val] [--limit 100] [--k 4 --k 8] [--match masked --match query]
        [--with-static 2] [--exclude-template T ... | --leave-out 3 --seed 0] [--json FILE]

``--k 0`` runs no bank-only setting.

Builds the bank from the train split (``--exclude-template``, or ``--leave-out N`` templates drawn with ``--seed``:
those templates left out, and the queries measured are then those templates' queries of ``--split``: shapes the
bank never saw; the prompt's hand-written examples made from those templates are then left out of every setting but
a first one that keeps all of them, the ceiling the bank is measured against), then plans the queries once per setting
(static examples; the bank with each k and similarity) and judges each setting's plans by execution
(`grasp plans report`): usable share, gold among the executed candidates, graph-only Hit@1 and MRR, the fused ranking's
Hit@1 (beside mFAR's alone on the same queries), and the planner's
seconds per plan (new plans only; with the batched torch engine, plans are made many at a time). Plans are cached:
a rerun costs no LLM call.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from grasp import methods  # noqa: E402
from grasp.config import load_config  # noqa: E402
from grasp.eval.evaluate import evaluate_run  # noqa: E402
from grasp.lab.bank import build_bank  # noqa: E402
from grasp.lab.plan_outcomes import plans_report  # noqa: E402
from grasp.skb import load_skb  # noqa: E402
from grasp.workspace import Workspace  # noqa: E402


def static_without(ws: Workspace, templates: set[str], path: Path) -> Path:
    """The prompt's hand-written examples less those made from a train query of ``templates``, written to ``path``."""
    from grasp.plan.examples import write_examples

    template_of = {q.qid: q.template for q in ws.queries()}
    kept = [e for e in ws.planner.builder.examples if template_of.get(e.qid) not in templates]
    write_examples(kept, path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", type=Path, required=True)
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--k", type=int, action="append", default=None)
    ap.add_argument("--match", action="append", default=None, choices=["masked", "query"])
    ap.add_argument("--exclude-template", dest="exclude", action="append", default=[])
    ap.add_argument("--leave-out", type=int, default=0, help="leave out this many templates, drawn by --seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--with-static", type=int, action="append", default=[],
                    help="also: the static examples kept, this many nearest added (planner.bank_keep_static)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    skb = load_skb(args.skb)
    base = load_config(None, args.overrides)
    ws = Workspace(skb, base, progress=False)
    if args.leave_out:
        import random

        templates = sorted({q.template for q in ws.queries() if q.template})
        args.exclude = sorted(set(args.exclude) | set(random.Random(args.seed).sample(templates, args.leave_out)))
    tag = "all" if not args.exclude else "without-" + "-".join(sorted(args.exclude))
    bank_dir = ws.cache_dir / "banks" / tag
    bank = build_bank(ws, exclude_templates=args.exclude)
    bank.save(bank_dir)
    print(f"bank {bank_dir}: {len(bank.entries)} plans, {bank.provenance['verified']} of "
          f"{bank.provenance['considered']} train plans verified", flush=True)
    queries = [q for q in ws.queries(split=args.split) if not args.exclude or q.template in set(args.exclude)]
    queries = queries[: args.limit]
    settings = [("static examples", [])]
    for k in args.with_static:
        settings.append((f"static + bank k={k} masked", ["planner.bank=true", f"planner.bank_dir={bank_dir}",
                                                          f"planner.bank_k={k}", "planner.bank_keep_static=true"]))
    for k in ([] if args.k == [0] else args.k or [4]):
        for match in args.match or ["masked"]:
            settings.append((f"bank k={k} {match}", ["planner.bank=true", f"planner.bank_dir={bank_dir}",
                                                      f"planner.bank_k={k}", f"planner.bank_match={match}"]))
    if args.exclude:  # the fair baseline: the hand-written examples of the left-out templates are left out too
        static = static_without(ws, set(args.exclude), bank_dir / "static-examples.jsonl")
        settings = [("static examples, all (the left-out templates' own included)", []),
                    *((name if i else "static examples, the left-out templates' removed",
                       [*extra, f"planner.examples_file={static}"]) for i, (name, extra) in enumerate(settings))]
    rows = []
    for name, extra in settings:
        run = Workspace(skb, load_config(None, [*args.overrides, *extra]), progress=False)
        t = time.perf_counter()
        outcomes = run.planner.plan_many(queries, progress=True)
        wall = time.perf_counter() - t
        new = [o for o in outcomes.values() if not o.cached]
        report = plans_report(run, queries)
        overall = next(r for r in report["rows"] if r["group"] == "all")
        fused = evaluate_run(methods.run(run, "fused", queries), queries, candidate_mask=skb.candidate_mask)
        row = {"setting": name, "queries": len(queries), "new_plans": len(new),
               "s_per_new_plan": round(wall / len(new), 2) if new else None,
               **{key: overall[key] for key in ("usable", "gold_in_candidates", "hit@1", "mrr")},
               "fused_hit@1": fused.means["hit@1"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{args.skb.name}, {args.split} ({len(queries)} queries"
          + (f" of the left-out templates {', '.join(args.exclude)}" if args.exclude else "") + ")\n")
    mfar = evaluate_run(methods.run(ws, "mfar", queries), queries, candidate_mask=skb.candidate_mask)
    print(f"mFAR alone on these queries: Hit@1 {mfar.means['hit@1']:.3f}\n")
    print("| setting | usable | gold in candidates | graph Hit@1 | graph MRR | fused Hit@1 | s per new plan |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s = "—" if r["s_per_new_plan"] is None else f"{r['s_per_new_plan']:.2f}"
        print(f"| {r['setting']} | {r['usable']:.3f} | {r['gold_in_candidates']:.3f} | {r['hit@1']:.3f} | "
              f"{r['mrr']:.3f} | {r['fused_hit@1']:.3f} | {s} |")
    if args.json:
        args.json.write_text(json.dumps({"skb": str(args.skb), "split": args.split, "exclude": args.exclude,
                                         "mfar_hit@1": mfar.means["hit@1"], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
