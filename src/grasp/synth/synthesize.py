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
from itertools import zip_longest
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from grasp.errors import GraspError
from grasp.plan.examples import write_examples
from grasp.plan.prompt import Example
from grasp.skb.queries import write_queries
from grasp.storage import atomic_file
from grasp.synth.patterns import KINDS, enumerate_patterns
from grasp.synth.sample import Sampler, Synthetic
from grasp.synth.verbalize import LLMVerbalizer, names_relations, verbalize

MAX_EXAMPLES = 12
DRAWN_QUERIES = 300  # the pool draw_examples chooses from
DRAWN_SEED_OFFSET = 1_000_003
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
               kinds: tuple[str, ...] = KINDS, progress: bool = False) -> SynthesisReport:
    """Draw ``n`` queries (fewer when the KB runs out of distinct ones), word them and write them to ``out_dir``."""
    rng = np.random.default_rng(seed)
    items, attempts = draw(skb, layout, n=n, seed=seed, max_answers=max_answers, rng=rng, kinds=kinds,
                           progress=progress)
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


def draw(skb, layout, *, n: int, seed: int, max_answers: int = 10, rng: np.random.Generator | None = None,
         kinds: tuple[str, ...] = KINDS, progress: bool = False) -> tuple[list[Synthetic], int]:
    """``n`` distinct unworded queries (fewer when the KB runs out of them) and the draws it took: a pattern kind
    (of ``kinds``) drawn first, then a pattern of it, then anchors."""
    patterns = {kind: ps for kind, ps in enumerate_patterns(skb.schema, kinds).items() if ps}
    if any(k != "text" for k in kinds) and not any(k != "text" for k in patterns):  # relational kinds asked, none fit
        raise GraspError(f"{skb.name}: no relation of its schema reaches a candidate type "
                         f"({len(skb.schema.relations)} relations over {len(skb.schema.node_types)} node types), so "
                         "no relational query can be made from it")
    rng = np.random.default_rng(seed) if rng is None else rng
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
    return items, attempts


def draw_examples(skb, layout, path: Path, *, seed: int = 13, n: int = DRAWN_QUERIES) -> list[Example]:
    """Worked examples for a KB that has none at all (no hand-written ones, no labelled or synthetic queries yet):
    queries drawn from the KB and worded by the templates (no LLM; seconds), chosen as `grasp synthesize` chooses
    them, written to ``path`` so that every later prompt shows the same ones. None where the KB gives no
    relational query (the planner then sees the schema alone)."""
    seed += DRAWN_SEED_OFFSET  # a stream of its own: not the queries `grasp synthesize` makes with the same seed
    try:
        items, _ = draw(skb, layout, n=n, seed=seed)
    except GraspError:
        return []
    verbalize(items, None, seed=seed)
    for i, it in enumerate(items):
        it.qid = f"d{i}"
    chosen = worked_examples(_distinct(items))
    write_examples(chosen, path)
    return chosen


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
    """A few queries that show the planner each shape in proportion and cover the most relations.

    Each pattern kind (text-only, 1 hop, 2 hops, two anchors, ...) gets a share of ``limit`` in proportion to its queries
    (at least one where room allows), so that a planner shown mostly hops does not learn to walk them for a question
    that only describes its answer. Only questions that name every relation they walk are shown (the LLM's wording
    where it does, else the template's). Within a kind: greedily the query adding the most relations not yet shown
    (ties: fewer answers, then file order), a new template before a repeated one. The chosen are shown with the
    kinds interleaved."""
    pool = [it for it in items if names_relations(it.text, it.facts)]
    by_kind: dict[str, list[Synthetic]] = {}
    for it in sorted(pool, key=lambda it: it.verbalizer == "template"):  # stable: the LLM's wording first
        by_kind.setdefault(_kind(it), []).append(it)
    quotas = _shares({k: len(v) for k, v in by_kind.items()}, limit)
    covered: set[str] = set()
    chosen_by_kind: dict[str, list[Synthetic]] = {k: [] for k in by_kind}
    for kind in sorted(by_kind, key=lambda k: -quotas[k]):
        templates: set[str] = set()
        left = list(by_kind[kind])
        while len(chosen_by_kind[kind]) < quotas[kind] and left:
            best = max(left, key=lambda it: (it.template not in templates,
                                             len({h["rel"] for h in it.plan["hops"]} - covered),
                                             -len(it.answer_ids), -left.index(it)))
            left.remove(best)
            chosen_by_kind[kind].append(best)
            templates.add(best.template)
            covered |= {h["rel"] for h in best.plan["hops"]}
    chosen = [it for row in zip_longest(*chosen_by_kind.values()) for it in row if it is not None]
    return [Example(it.qid, it.text, it.plan) for it in chosen]


def _kind(it: Synthetic) -> str:
    return it.template.split(":")[1]


def _shares(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """``limit`` split over the kinds in proportion to ``sizes`` (largest remainders), each kind at least one while
    there is room and none more than it has."""
    total = sum(sizes.values())
    if total == 0:
        return {k: 0 for k in sizes}
    limit = min(limit, total)
    quota = {k: min(n, max(1, int(limit * n / total))) if limit >= len(sizes) else 0 for k, n in sizes.items()}
    order = sorted(sizes, key=lambda k: (-(limit * sizes[k] / total - int(limit * sizes[k] / total)), -sizes[k]))
    while sum(quota.values()) < limit:
        grew = False
        for k in order:
            if sum(quota.values()) < limit and quota[k] < sizes[k]:
                quota[k] += 1
                grew = True
        if not grew:
            break
    while sum(quota.values()) > limit:  # the at-least-one floors overshot: take back from the largest
        k = max(quota, key=lambda k: quota[k])
        quota[k] -= 1
    return quota
