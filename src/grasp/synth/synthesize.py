"""`grasp synthesize`: training queries with gold answers, made from the knowledge base itself, written into the
workspace (never into the SKB directory).

Patterns of every kind the schema allows are drawn in turn (kind first, so that rare kinds are not drowned by
common ones), each draw executed for its gold answers (:mod:`grasp.synth.sample`), then put into words
(:mod:`grasp.synth.verbalize`), deduplicated and split into train and val. Written: ``queries.jsonl`` (the open
format's queries, ``template`` naming the pattern), ``plans.jsonl`` (each query's plan, verified by construction;
`grasp plans import` reads it) and the planner's worked examples for a KB that has none (a few, chosen to cover the
schema's relations; the planner reads them where no others exist).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from grasp.errors import GraspError
from grasp.plan.examples import write_examples
from grasp.plan.prompt import Example
from grasp.skb.queries import write_queries
from grasp.storage import atomic_file
from grasp.synth.patterns import enumerate_patterns
from grasp.synth.sample import Sampler, Synthetic
from grasp.synth.verbalize import LLMVerbalizer, verbalize

MAX_EXAMPLES = 12
IDLE_DRAWS = 2000  # draws in a row without a new query after which the KB is taken to have no more


@dataclass
class SynthesisReport:
    n: int
    attempts: int
    by_kind: dict[str, int]
    by_split: dict[str, int]
    by_verbalizer: dict[str, int]
    folder: Path
    examples: int

    def line(self) -> str:
        return (f"{self.n} queries ({', '.join(f'{k} {v}' for k, v in self.by_split.items())}; "
                f"{', '.join(f'{k} {v}' for k, v in self.by_kind.items())}) from {self.attempts} draws, worded by "
                f"{', '.join(f'{k} {v}' for k, v in self.by_verbalizer.items())}; {self.examples} worked examples; "
                f"in {self.folder}")


def synthesize(skb, layout, out_dir: Path, *, n: int = 2000, seed: int = 13, val_share: float = 0.2,
               max_answers: int = 10, llm: LLMVerbalizer | None = None, examples_path: Path | None = None,
               progress: bool = False) -> SynthesisReport:
    """Draw ``n`` queries (fewer when the KB runs out of distinct ones), word them and write them to ``out_dir``."""
    patterns = {kind: ps for kind, ps in enumerate_patterns(skb.schema).items() if ps}
    relational = [k for k in patterns if k != "text"]
    if not relational:
        raise GraspError(f"{skb.name}: no relation of its schema reaches a candidate type "
                         f"({len(skb.schema.relations)} relations over {len(skb.schema.node_types)} node types), so "
                         "no relational query can be made from it")
    rng = np.random.default_rng(seed)
    sampler = Sampler(skb, layout, seed=seed, max_answers=max_answers)
    items: list[Synthetic] = []
    seen: set = set()
    attempts, idle = 0, 0
    bar = tqdm(total=n, desc="synthesizing", unit="query", disable=not progress)
    kinds = list(patterns)
    while len(items) < n and idle < IDLE_DRAWS:  # until enough, or the KB stops giving new queries
        attempts += 1
        idle += 1
        kind = kinds[int(rng.integers(len(kinds)))]
        pattern = patterns[kind][int(rng.integers(len(patterns[kind])))]
        item = sampler.draw(pattern)
        if item is None:
            continue
        key = (item.template, tuple(item.extra["anchors"]), item.facts["text"].lower(), tuple(item.answer_ids))
        if key in seen:
            continue
        seen.add(key)
        items.append(item)
        idle = 0
        bar.update(1)
    bar.close()
    if not items:
        raise GraspError(f"{skb.name}: no usable query in {attempts} draws (every pattern gave no answer, more than "
                         f"{max_answers} answers, or an answer named by its own anchor)")
    verbalize(items, llm, seed=seed, progress=progress)
    items = _distinct(items)
    order = rng.permutation(len(items))
    n_val = int(round(val_share * len(items)))
    for rank, i in enumerate(order):
        items[i].split = "val" if rank < n_val else "train"
    for i, it in enumerate(items):
        it.qid = f"s{i}"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_queries([_query(it) for it in items], out_dir / "queries.jsonl")
    with atomic_file(out_dir / "plans.jsonl", "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps({"query": it.text, "plan": it.plan, "template": it.template}, ensure_ascii=False) + "\n")
    chosen = worked_examples([it for it in items if it.split == "train"])
    if examples_path is not None and chosen:
        write_examples(chosen, examples_path)
    return SynthesisReport(len(items), attempts, dict(Counter(it.template.split(":")[1] for it in items)),
                           {split: sum(it.split == split for it in items) for split in ("train", "val")},
                           dict(Counter(it.verbalizer for it in items)),
                           out_dir, len(chosen) if examples_path is not None else 0)


def _distinct(items: list[Synthetic]) -> list[Synthetic]:
    """The first of each question text (case and spacing aside)."""
    out, seen = [], set()
    for it in items:
        key = " ".join(it.text.lower().split())
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _query(it: Synthetic):
    from grasp.results import Query

    return Query(it.qid, it.text, it.answer_ids, it.split, it.template)


def worked_examples(items: list[Synthetic], limit: int = MAX_EXAMPLES) -> list[Example]:
    """A few queries whose plans together cover the most relations: greedily, the one adding the most relations
    not yet shown (ties: fewer answers, then file order), one per template."""
    chosen: list[Synthetic] = []
    covered: set[str] = set()
    templates: set[str] = set()
    pool = [it for it in items if it.verbalizer != "template"] or items
    while len(chosen) < limit:
        best = max((it for it in pool if it.template not in templates),
                   key=lambda it: (len({h["rel"] for h in it.plan["hops"]} - covered), -len(it.answer_ids)),
                   default=None)
        if best is None:
            break
        chosen.append(best)
        templates.add(best.template)
        covered |= {h["rel"] for h in best.plan["hops"]}
    return [Example(it.qid, it.text, it.plan) for it in chosen]
