"""`grasp plans bank`: the bank of verified plans, built from a split's plans judged by execution and from the
synthesizer's plans (correct by construction)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from grasp import methods
from grasp.errors import GraspError
from grasp.plan.bank import BankEntry, PlanBank, deduplicate
from grasp.workspace import Workspace

HELD_OUT = frozenset({"test"})  # splits whose queries never enter a bank


def _without_bank(ws: Workspace) -> Workspace:
    """The workspace planning as it would without a bank: a bank's plans are made with the prompt's own examples."""
    if not ws.config.planner.bank:
        return ws
    config = ws.config.model_copy(update={"planner": ws.config.planner.model_copy(update={"bank": False})})
    return Workspace(ws.skb, config, progress=ws.progress)


def verified_entries(ws: Workspace, splits: Sequence[str], *, exclude_templates: Sequence[str] = (),
                     progress: bool = False) -> tuple[list[BankEntry], dict]:
    """The plans of the default queries of ``splits`` whose execution puts a gold answer among the graph's
    candidates (planned first where not cached), and counts of what was kept and why not."""
    if HELD_OUT & set(splits):
        raise GraspError(f"the {', '.join(sorted(HELD_OUT & set(splits)))} split never enters a bank")
    plain = _without_bank(ws)
    excluded = set(exclude_templates)
    queries = [q for q in plain.queries() if q.split in splits and q.template not in excluded]
    outcomes = plain.planner.plan_many(queries, progress=progress)
    graph = methods.retriever(plain, "graph")
    counts = {"considered": len(queries), "unusable": 0, "gold_not_reached": 0, "verified": 0}
    entries = []
    for q in queries:
        outcome = outcomes[q.qid]
        if not outcome.check.usable:
            counts["unusable"] += 1
            continue
        ranking = graph.search_query(q, None, outcome)  # every executed candidate
        gold = set(q.answer_ids)
        ranks = [r for r, node in enumerate(ranking.node_ids.tolist(), 1) if node in gold]
        if not ranks:
            counts["gold_not_reached"] += 1
            continue
        counts["verified"] += 1
        entries.append(BankEntry(q.qid, q.text, outcome.check.plan.dump(), "train", ranks[0], len(ranking)))
    return entries, counts


def synthetic_entries(ws: Workspace, *, exclude_templates: Sequence[str] = ()) -> list[BankEntry]:
    """The synthesizer's train queries with their plans (correct by construction), where `grasp synthesize` ran."""
    plans_path, queries_path = ws.synth_dir / "plans.jsonl", ws.synth_dir / "queries.jsonl"
    if not plans_path.exists() or not queries_path.exists():
        return []
    plan_of = {}
    for line in plans_path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            plan_of[r["query"]] = r["plan"]
    out, excluded = [], set(exclude_templates)
    for q in ws.queries(queries_path):
        if q.split in HELD_OUT or q.split == ws.config.mfar.train.val_split or q.template in excluded:
            continue
        if q.text in plan_of:
            out.append(BankEntry(f"synth:{q.qid}", q.text, plan_of[q.text], "synthetic"))
    return out


def build_bank(ws: Workspace, *, splits: Sequence[str] = ("train",), exclude_templates: Sequence[str] = (),
               synthetic: bool = True, progress: bool = False) -> PlanBank:
    """Verified plans of ``splits`` (and the synthesizer's), deduplicated by shape, with their provenance."""
    plain = _without_bank(ws)
    entries, counts = verified_entries(plain, splits, exclude_templates=exclude_templates, progress=progress)
    synth = synthetic_entries(ws, exclude_templates=exclude_templates) if synthetic else []
    kept = deduplicate(entries + synth, ws.config.planner.bank_per_shape)
    provenance = {"skb": ws.skb.name, "fingerprint": ws.skb.fingerprint, "splits": list(splits),
                  "queries_file": str(ws.default_queries_path()), "excluded_templates": sorted(exclude_templates),
                  "planner": plain.planner.model_id, "prompt": plain.planner.prompt_hash,
                  "format": ws.config.planner.format, **counts, "synthetic": len(synth),
                  "per_shape": ws.config.planner.bank_per_shape}
    return PlanBank(kept, provenance)
