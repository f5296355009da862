"""Planner latency for the one question a person just typed: one new question at a time, per engine and option.

    python bench/planner_latency.py --skb ../shared/data/skb/bio --skb ../shared/data/skb/pkg --skb src/grasp/data/demo
        [--n 30] [--seed 7] [--variants greedy,drafted,drafted-int8,llama.cpp,llama.cpp-ngram] [--answers]
        [--answer-variant drafted] [--reference EARLIER.json] [--json FILE]

The questions are new: ``--n`` (+1 for the warm-up) drawn per KB by the query synthesizer (`grasp synthesize`'s
sampler, template wording, ``--seed``), so no plan cache holds them and each has its answers. Each variant plans
them one at a time into a fresh plan cache, after one warm-up question (its time, which pays the system prompt's
first pass or its load from disk, is printed apart):

- greedy: the torch engine, one token per forward pass (plain greedy decoding; the baseline plans);
- drafted: the torch engine checking drafted tokens several per pass (the grammar's forced tokens, then tokens
  copied from the prompt; ``planner.draft_tokens``);
- drafted-int8: the same with every linear layer in int8 (``planner.precision=int8``);
- llama.cpp: the Q4_K_M file in llama.cpp (one slot, flash attention);
- llama.cpp-ngram: the same with llama.cpp's n-gram speculative decoding (``planner.llama_speculative``).

Per variant: p50 / p95 seconds per plan, plans identical to the greedy variant's, usable share and graph-only
Hit@1 (`grasp plans report`'s judge) on the same questions; BM25's p50 on the same questions is measured in the
same run as the machine's yardstick. ``--reference``: an earlier run's ``--json`` whose greedy plans are the baseline
when this run has no greedy variant (the same ``--n`` and ``--seed`` draw the same questions). ``--answers``: also
the whole GRASP answer to each new question in one warm process (the ``--answer-variant`` planner, a fresh plan
cache: plan + every stage), then the same questions again with their plans cached.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from grasp.api import Searcher  # noqa: E402
from grasp.config import load_config  # noqa: E402
from grasp.lab.plan_outcomes import plans_report  # noqa: E402
from grasp.plan.build import local_planner_path  # noqa: E402
from grasp.plan.cache import PlanCache  # noqa: E402
from grasp.plan.planner import Planner  # noqa: E402
from grasp.skb import load_skb, read_queries  # noqa: E402
from grasp.synth.synthesize import synthesize  # noqa: E402
from grasp.workspace import Workspace  # noqa: E402

VARIANTS = ("greedy", "drafted", "drafted-int8", "llama.cpp", "llama.cpp-ngram")


def make_client(variant: str, config):
    """The planner LLM client of one variant (loaded once, used for every KB)."""
    from grasp.plan.llm import LocalGGUFClient
    from grasp.plan.torch_llm import TorchChatClient

    cfg = config.planner
    path = local_planner_path(cfg, config.cache_root)
    if variant in ("greedy", "drafted", "drafted-int8"):
        return TorchChatClient.from_gguf(path, batch=cfg.batch, threads=cfg.threads, seed=config.seed,
                                         model_id=cfg.model, draft_tokens=0 if variant == "greedy" else cfg.draft_tokens,
                                         precision="int8" if variant == "drafted-int8" else cfg.precision)
    return LocalGGUFClient(path, n_ctx=cfg.n_ctx, threads=cfg.threads, slots=1, flash_attn=cfg.flash_attn,
                           seed=config.seed, model_id=cfg.model,
                           speculative="ngram_simple" if variant == "llama.cpp-ngram" else None)


def new_questions(ws: Workspace, n: int, seed: int, tmp: Path):
    """``n`` questions no plan cache holds: drawn and template-worded by the synthesizer (fixed by ``seed``)."""
    out = tmp / f"questions-{ws.skb.name}"
    synthesize(ws.skb, ws.layout, out, n=n, seed=seed, val_share=0.0)
    return read_queries(out / "queries.jsonl")[:n]


def fresh_planner(ws: Workspace, client, cache: Path) -> Planner:
    """The workspace's planner (its prompt, grammar and model id) with ``client`` and an empty plan cache."""
    base = ws.planner
    return Planner(ws.skb, client, PlanCache(cache), builder=base.builder, grammar=base.grammar, retries=base.retries,
                   max_tokens=base.max_tokens, model_id=base.model_id)


def use_planner(ws: Workspace, planner: Planner) -> None:
    """Make ``planner`` the workspace's, in the retrievers built from now on too."""
    ws.planner = planner
    ws.retrievers.clear()


def p(values, q) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", type=Path, action="append", required=True)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--answers", action="store_true", help="also the whole GRASP answer to each new question")
    ap.add_argument("--answer-variant", default="drafted", help="the planner of --answers")
    ap.add_argument("--reference", type=Path, help="an earlier run's --json: its greedy plans are the baseline")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    config = load_config(None, args.overrides)
    tmp = Path(tempfile.mkdtemp(prefix="planner-latency-"))
    kbs = {}
    for path in args.skb:
        ws = Workspace(load_skb(path), config, progress=False)
        questions = new_questions(ws, args.n + 1, args.seed, tmp)
        bm25 = Searcher(ws, "bm25")
        bm25.search(questions[0].text, k=10)
        bm25_s = []
        for q in questions[1:]:
            t0 = time.perf_counter()
            bm25.search(q.text, k=10, explain=False)
            bm25_s.append(time.perf_counter() - t0)
        kbs[path] = {"ws": ws, "warmup": questions[0], "questions": questions[1:], "bm25_s": bm25_s, "rows": {}}
        print(f"{ws.skb.name}: {len(questions) - 1} new questions, BM25 p50 {1000 * p(bm25_s, 50):.1f} ms", flush=True)

    for variant in variants:
        t0 = time.perf_counter()
        client = make_client(variant, config)
        print(f"{variant}: client loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        for kb in kbs.values():
            ws = kb["ws"]
            planner = fresh_planner(ws, client, tmp / f"{ws.skb.name}-{variant}.jsonl")
            t0 = time.perf_counter()
            planner.plan(kb["warmup"].text)
            first = time.perf_counter() - t0
            seconds, raws = [], {}
            for q in kb["questions"]:
                t0 = time.perf_counter()
                outcome = planner.plan(q.text)
                seconds.append(time.perf_counter() - t0)
                raws[q.qid] = outcome.raw
            use_planner(ws, planner)  # the report executes this variant's plans
            overall = next(r for r in plans_report(ws, kb["questions"])["rows"] if r["group"] == "all")
            row = {"first_s": round(first, 2), "p50_s": round(p(seconds, 50), 2), "p95_s": round(p(seconds, 95), 2),
                   "usable": overall["usable"], "hit@1": overall["hit@1"], "raws": raws}
            kb["rows"][variant] = row
            print(f"  {ws.skb.name} {variant}: p50 {row['p50_s']} s, p95 {row['p95_s']} s, first {row['first_s']} s, "
                  f"usable {row['usable']:.3f}, graph Hit@1 {row['hit@1']:.3f}", flush=True)
            if args.answers and variant == args.answer_variant:
                kb["answers"] = answer_times(ws, client, kb["questions"], tmp)
                print(f"  {ws.skb.name} whole answer: {kb['answers']}", flush=True)
        del client
        gc.collect()
    if args.reference is not None:
        earlier = json.loads(args.reference.read_text())
        for path, kb in kbs.items():
            greedy = earlier.get(str(path), {}).get("rows", {}).get("greedy")
            if greedy is not None and "greedy" not in kb["rows"]:
                kb["reference"] = greedy["raws"]
    report(kbs, variants, args)


def answer_times(ws: Workspace, client, questions, tmp: Path) -> dict:
    """Seconds of the whole GRASP answer to each new question in a warm process, then to the same questions
    with their plans cached."""
    use_planner(ws, fresh_planner(ws, client, tmp / f"{ws.skb.name}-answers.jsonl"))
    searcher = Searcher(ws, "grasp")
    searcher.search("warm-up: " + questions[0].text, k=10)  # load every model and index once
    out = {}
    for name in ("new", "cached"):
        times = []
        for q in questions:
            t0 = time.perf_counter()
            searcher.search(q.text, k=10)
            times.append(time.perf_counter() - t0)
        out[name] = {"p50_s": round(p(times, 50), 2), "p95_s": round(p(times, 95), 2)}
    return out


def report(kbs: dict, variants: list[str], args) -> None:
    print(f"\nnew questions per KB: {args.n} (synthesizer, seed {args.seed}); seconds per plan, one at a time\n")
    print("| KB | engine | p50 s | p95 s | first question s | same plan as greedy | usable | graph Hit@1 | "
          "BM25 p50 ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for kb in kbs.values():
        base = kb["rows"]["greedy"]["raws"] if "greedy" in kb["rows"] else kb.get("reference")
        for v in variants:
            row = kb["rows"][v]
            same = "—" if base is None else f"{sum(row['raws'][q] == base.get(q) for q in row['raws'])}/{len(row['raws'])}"
            print(f"| {kb['ws'].skb.name} | {v} | {row['p50_s']:.2f} | {row['p95_s']:.2f} | {row['first_s']:.1f} | "
                  f"{same} | {row['usable']:.3f} | {row['hit@1']:.3f} | {1000 * p(kb['bm25_s'], 50):.1f} |")
    if any("answers" in kb for kb in kbs.values()):
        print(f"\nwhole GRASP answer ({args.answer_variant} planner, one warm process)\n")
        print("| KB | new question p50 s | p95 s | cached question p50 s | p95 s |")
        print("|---|---:|---:|---:|---:|")
        for kb in kbs.values():
            a = kb.get("answers")
            if a:
                print(f"| {kb['ws'].skb.name} | {a['new']['p50_s']:.2f} | {a['new']['p95_s']:.2f} | "
                      f"{a['cached']['p50_s']:.2f} | {a['cached']['p95_s']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({str(k): {"rows": kb["rows"], "answers": kb.get("answers"),
                                                  "bm25_p50_s": p(kb["bm25_s"], 50)} for k, kb in kbs.items()},
                                        indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
