"""Synthetic knowledge bases in STaRK's own processed format, at STaRK's shapes, with known answers.

STaRK's graphs are published only on the Hugging Face Hub, so this module writes stand-ins that the
STaRK reader (:func:`grasp.skb.stark.read_stark_skb`, the code a real download goes through) reads
exactly as it reads a download: ``node_info.pkl`` with STaRK's field names and nesting (Amazon's
reviews and Q&A, MAG's venues and counts, Prime's ``details`` dictionaries), ``edge_index.pt`` /
``edge_types.pt`` / ``node_types.pt``, the type dictionaries (not for MAG, whose STaRK release lacks
them) and a STaRK QA folder (``stark_qa/stark_qa.csv`` and ``split/*.index``).

At ``scale`` 1 the node and relation counts are STaRK's published totals (Amazon 1.04M nodes / 9.4M
relations, MAG 1.87M / 39.8M, Prime 129K / 8.1M); the split of the totals over types and relations
is an approximation. Degrees follow a power law (a few hubs hold a large share of the edges), and a
share of the names is hostile: quotes, backslashes, newlines, tabs, commas and non-ASCII text, as
real Amazon and MAG titles have.

The queries are STaRK-style questions whose gold answers are known by construction: *intersection*
queries name two nodes linked to the answer (gold: every node of the answer type linked to both), and
*text* queries name one linked node and a phrase planted in the answer's text (gold: that node).
``plans.jsonl`` holds the plan each query was built from, in the format `grasp plans import` reads,
so the graph branch can be measured without an LLM.
"""

from __future__ import annotations

import csv
import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grasp.skb.stark import _PRIME_PAIRS, DATASETS, PRIME_TYPES
from grasp.storage import atomic_dir

HOSTILE = ['"{}"', "{} \\ back\\slash", "{}\nsecond line", "{}\ttabbed", "{} – naïve Ünïcødé 東京 “smart”",
           "{} trailing\\", "{}, with; commas", "'{}'", "{}\r\nwindows line", '{} 12\\" x 4\\"']


@dataclass(frozen=True)
class Shape:
    """One STaRK dataset's shape at scale 1: nodes per type and stored edge rows per (relation, ends)."""

    types: dict[str, int]
    relations: list[tuple[str, str, str, float]]  # (relation, source type, target type, share of the edges)
    edges: int
    both_directions: bool       # STaRK stores each Prime edge twice, once per direction
    words: int                  # mean words of text per candidate node
    intersections: list[tuple[str, tuple[str, str], tuple[str, str], str]]  # target, (rel, type) x2, phrasing
    texts: list[tuple[str, tuple[str, str], str]]                           # target, (rel, type), phrasing


_PRIME_SHARES = {"expression present": 37.5, "synergistic interaction": 33.0, "ppi": 8.0, "interacts with": 7.2,
                 "phenotype present": 3.7, "side effect": 3.2, "parent-child": 3.0, "associated with": 2.0,
                 "contraindication": 0.77, "expression absent": 0.5, "indication": 0.23, "target": 0.2,
                 "off-label use": 0.07, "enzyme": 0.06, "transporter": 0.04, "phenotype absent": 0.03,
                 "carrier": 0.02, "linked to": 0.02}

SHAPES: dict[str, Shape] = {
    "amazon": Shape(
        types={"product": 957_192, "brand": 73_860, "category": 1_190, "color": 3_300},
        relations=[("also_buy", "product", "product", 0.30), ("also_view", "product", "product", 0.40),
                   ("has_brand", "product", "brand", 0.095), ("has_category", "product", "category", 0.17),
                   ("has_color", "product", "color", 0.035)],
        edges=9_443_802, both_directions=False, words=600,
        intersections=[("product", ("has_brand", "brand"), ("has_color", "color"),
                        "Looking for something from {a} in {b}, any suggestions?"),
                       ("product", ("has_brand", "brand"), ("also_buy", "product"),
                        "What {a} product do people buy together with {b}?")],
        texts=[("product", ("has_brand", "brand"), "I want a {a} product that is {phrase}.")],
    ),
    "mag": Shape(
        types={"author": 1_104_554, "institution": 8_690, "field_of_study": 59_480, "paper": 700_244},
        relations=[("author___affiliated_with___institution", "author", "institution", 0.03),
                   ("paper___cites___paper", "paper", "paper", 0.52),
                   ("paper___has_topic___field_of_study", "paper", "field_of_study", 0.25),
                   ("author___writes___paper", "author", "paper", 0.20)],
        edges=39_802_116, both_directions=False, words=180,
        intersections=[("paper", ("author___writes___paper", "author"),
                        ("paper___has_topic___field_of_study", "field_of_study"),
                        "Which papers by {a} are about {b}?"),
                       ("paper", ("paper___has_topic___field_of_study", "field_of_study"),
                        ("paper___cites___paper", "paper"), "Papers on {a} with a citation link to \"{b}\"")],
        texts=[("paper", ("author___writes___paper", "author"), "Find the paper by {a} that discusses {phrase}.")],
    ),
    "prime": Shape(
        types={"disease": 17_080, "gene/protein": 27_671, "molecular_function": 11_169, "drug": 7_957,
               "pathway": 2_516, "anatomy": 14_035, "effect/phenotype": 15_311, "biological_process": 28_642,
               "cellular_component": 4_176, "exposure": 818},
        relations=[(rel, s, t, _PRIME_SHARES[rel] / len(pairs)) for rel, pairs in _PRIME_PAIRS.items()
                   for s, t in pairs],
        edges=8_100_498, both_directions=True, words=120,
        intersections=[("drug", ("target", "gene/protein"), ("indication", "disease"),
                        "Which drug targets {a} and is indicated for {b}?"),
                       ("disease", ("associated with", "gene/protein"), ("phenotype present", "effect/phenotype"),
                        "What disease is linked to the {a} gene and presents with {b}?"),
                       ("gene/protein", ("interacts with", "biological_process"), ("expression present", "anatomy"),
                        "Which genes take part in {a} and are expressed in the {b}?")],
        texts=[("gene/protein", ("ppi", "gene/protein"), "Which protein interacts with {a} and is {phrase}?")],
    ),
}
_ORDER = {"amazon": ["product", "brand", "category", "color"],  # node id blocks, in STaRK's type order
          "mag": ["author", "institution", "field_of_study", "paper"], "prime": PRIME_TYPES}


class _Words:
    """A seeded pseudo-word vocabulary with Zipf-like word frequencies."""

    SYLLABLES = ["ka", "lo", "mi", "ren", "to", "vi", "sal", "dor", "pe", "qua", "nix", "ber", "ti", "zo", "fa",
                 "gel", "mu", "ra", "shi", "von", "el", "an", "ur", "cy", "pho", "tri", "lex", "bo", "ne", "xi"]

    def __init__(self, rng: np.random.Generator, size: int = 20_000) -> None:
        syl = np.array(self.SYLLABLES)
        words: set[str] = set()
        while len(words) < size:
            n = rng.integers(2, 4, size)
            parts = syl[rng.integers(0, syl.size, (size, 3))]
            words.update("".join(p[:k]) for p, k in zip(parts.tolist(), n.tolist(), strict=True))
        pool = np.array(sorted(words))  # sorted first: a set's order is not seeded
        self.vocab = pool[rng.permutation(pool.size)[:size]]
        weights = 1.0 / np.arange(1, size + 1) ** 1.05
        self.cdf = np.cumsum(weights) / weights.sum()
        self.rng = rng

    def sample(self, n: int) -> list[str]:
        picks = np.searchsorted(self.cdf, self.rng.random(n))
        return self.vocab[np.minimum(picks, self.vocab.size - 1)].tolist()  # the cdf may end a hair below 1

    def text(self, n: int) -> str:
        return " ".join(self.sample(max(1, n)))


def _power_law(rng: np.random.Generator, n: int, size: int, skew: float) -> np.ndarray:
    """``size`` draws from 0..n-1 where low indices are hubs: P(index < k) = (k / n) ** (1 / skew)."""
    return np.minimum((n * rng.random(size) ** skew).astype(np.int64), n - 1)


def _names(rng: np.random.Generator, words: _Words, kind: str, count: int, hostile: float) -> list[str]:
    """Names that are unique within a type (a serial number where words alone would clash), a share hostile."""
    names = []
    for i, w in enumerate(zip(words.sample(count), words.sample(count), strict=True)):
        base = f"{w[0].capitalize()} {w[1]} {kind[:3].upper()}-{i}"
        names.append(base)
    for i in np.flatnonzero(rng.random(count) < hostile).tolist():
        names[i] = HOSTILE[i % len(HOSTILE)].format(names[i])
    return names


def _phrase(rng: np.random.Generator, i: int) -> str:
    """A two-word phrase no other text contains (its words are outside the vocabulary)."""
    return f"zq{i:x}vel quorb{rng.integers(0, 1 << 30):x}"


def _node_info(dataset: str, t: str, name: str, i: int, words: _Words, n_words: int) -> dict:
    """One node's attributes with STaRK's field names and nesting for this dataset and type."""
    w = words
    if dataset == "amazon":
        if t != "product":
            return {"type": t, {"brand": "brand_name", "category": "category_name", "color": "color_name"}[t]: name}
        share = max(8, n_words // 10)
        return {"type": "product", "asin": f"B{i:09d}", "title": name, "brand": w.text(2).title(),
                "global_category": w.text(2), "category": [w.text(2) for _ in range(3)],
                "description": [w.text(share * 2)], "feature": [w.text(share // 2) for _ in range(4)],
                "rank": f"{i % 99_999:,} in {w.text(2)}", "price": f"${i % 500}.99",
                "details": {"dictionary": {"product_dimensions": f"{i % 30} x 4 x 2 inches ; {i % 7}.5 pounds"}},
                "review": [{"reviewerID": f"A{i}{k}", "summary": w.text(5), "reviewText": w.text(share),
                            "vote": str(k * 3), "overall": float(1 + k % 5), "style": {"Size:": "M"}}
                           for k in range(3)],
                "qa": [{"questionType": "yes/no", "answerType": "Y", "question": w.text(10) + "?",
                        "answer": w.text(share // 4)} for _ in range(2)]}
    if dataset == "mag":
        if t == "paper":
            return {"type": "paper", "title": name, "abstract": w.text(n_words), "Date": f"{1990 + i % 30}-0{1 + i % 9}-1{i % 9}",
                    "OriginalVenue": w.text(2).title(), "JournalDisplayName": w.text(3).title() if i % 2 else -1,
                    "ConferenceSeriesDisplayName": -1 if i % 2 else w.text(2).upper(), "DocType": "Journal",
                    "mag_id": 10_000_000 + i}
        return {"type": t, "DisplayName": name, "PaperCount": 1 + i % 300, "CitationCount": i % 5000, "Rank": 9000 + i % 900,
                "mag_id": 20_000_000 + i}
    details: dict = {}
    if t == "gene/protein":
        details = {"name": w.text(5), "alias": [w.text(1).upper() for _ in range(2)], "summary": w.text(n_words),
                   "type_of_gene": "protein-coding", "genomic_pos": [{"chr": str(1 + i % 22), "start": i * 100}]}
    elif t == "disease":
        details = {"mondo_definition": w.text(n_words), "umls_description": w.text(n_words // 3), "mondo_id": str(i)}
    elif t == "drug":
        details = {"description": w.text(n_words), "indication": w.text(20), "mechanism_of_action": w.text(30)}
    elif t in ("biological_process", "molecular_function", "cellular_component"):
        details = {"go_definition": w.text(n_words // 3)}
    return {"id": f"SYN:{i}", "type": t, "name": name, "source": {"gene/protein": "NCBI", "disease": "MONDO",
            "drug": "DrugBank"}.get(t, "SYN"), "details": details}


def _plant(info: dict, dataset: str, phrase: str) -> None:
    """Put ``phrase`` into the node's main text field (Amazon's description, MAG's abstract, Prime's summary)."""
    holder, key = {"amazon": (info.get("description"), 0), "mag": (info, "abstract"),
                   "prime": (info.get("details"), "summary")}[dataset]
    before = holder[key] if isinstance(holder, list) else holder.get(key, "")
    holder[key] = f"{before} {phrase}"


class _Adjacency:
    """Neighbours of a node through one (relation, source type, target type), both ways."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, n: int) -> None:
        both_s, both_d = np.concatenate([src, dst]), np.concatenate([dst, src])
        order = np.argsort(both_s, kind="stable")
        self.dst = both_d[order]
        self.ptr = np.searchsorted(both_s[order], np.arange(n + 1))

    def of(self, node: int) -> np.ndarray:
        return np.unique(self.dst[self.ptr[node]:self.ptr[node + 1]])


def generate(dataset: str, out: Path | str, *, scale: float = 1.0, seed: int = 0, n_queries: int = 300,
             words: int | None = None, hostile: float = 0.05, progress: bool = True) -> dict:
    """Write a synthetic STaRK ``dataset`` (amazon, mag, prime) under ``out`` (``processed/``, ``qa/``,
    ``plans.jsonl``, ``synthetic.json``), atomically. Returns the summary written to ``synthetic.json``."""
    import torch
    from tqdm.auto import tqdm

    if dataset not in SHAPES:
        raise ValueError(f"unknown STaRK dataset {dataset!r}; known: {', '.join(SHAPES)}")
    if scale <= 0:
        raise ValueError(f"scale must be positive, not {scale}")
    shape, spec = SHAPES[dataset], DATASETS[dataset]
    rng = np.random.default_rng(seed)
    vocab = _Words(rng)
    n_words = words or shape.words
    counts = {t: max(8, round(shape.types[t] * scale)) for t in _ORDER[dataset]}
    start, pos = {}, 0
    for t in _ORDER[dataset]:
        start[t], pos = pos, pos + counts[t]
    n_nodes = pos
    type_id = {name: k for k, name in spec.node_types.items()}
    rel_id = {name: k for k, name in spec.edge_types.items()}

    # edges: per (relation, ends) a power law on both ends, through a fixed shuffle so hubs are spread out
    perm = {t: rng.permutation(counts[t]) for t in _ORDER[dataset]}
    rows = max(len(shape.relations), round(shape.edges * scale / (2 if shape.both_directions else 1)))
    shares = np.array([r[3] for r in shape.relations])
    per_rel = np.maximum(1, np.round(rows * shares / shares.sum()).astype(np.int64))
    srcs, dsts, rels, adjacency = [], [], [], {}
    for (rel, s, t, _), m in zip(shape.relations, per_rel.tolist(), strict=True):
        a = start[s] + perm[s][_power_law(rng, counts[s], m, 1.6)]
        b = start[t] + perm[t][_power_law(rng, counts[t], m, 2.5)]
        keep = a != b
        a, b = a[keep], b[keep]
        srcs.append(a)
        dsts.append(b)
        rels.append(np.full(a.size, rel_id[rel], dtype=np.int64))
        adjacency[(rel, s, t)] = (a, b)
    src, dst, rel_ids = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(rels)
    if shape.both_directions:
        src, dst, rel_ids = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([rel_ids, rel_ids])

    names: list[str] = []
    node_types = np.zeros(n_nodes, dtype=np.int64)
    for t in _ORDER[dataset]:
        names += _names(rng, vocab, t, counts[t], hostile)
        node_types[start[t]:start[t] + counts[t]] = type_id[t]
    type_of = {type_id[t]: t for t in _ORDER[dataset]}

    def adj(rel: str, a: str, b: str) -> _Adjacency:
        key = (rel, a, b) if (rel, a, b) in adjacency else (rel, b, a)
        if not isinstance(adjacency[key], _Adjacency):
            adjacency[key] = _Adjacency(*adjacency[key], n_nodes)
        return adjacency[key]

    def linked(rel: str, anchor_type: str, target_type: str, node: int) -> np.ndarray:
        nb = adj(rel, anchor_type, target_type).of(node)
        return nb[node_types[nb] == type_id[target_type]]

    queries, plans, planted = [], [], {}
    kinds = [("x", q) for q in shape.intersections] + [("t", q) for q in shape.texts]
    attempts = 0
    while len(queries) < n_queries and attempts < 50 * n_queries:
        attempts += 1
        kind, tmpl = kinds[len(queries) % len(kinds)]
        target_type = tmpl[0]
        (r1, t1) = tmpl[1]
        cand = start[target_type] + int(rng.integers(counts[target_type]))
        first = linked(r1, target_type, t1, cand)
        if not first.size:
            continue
        a = int(rng.choice(first))
        anchors = [{"var": "A", "text": names[a], "label": t1, "match_mode": "name"}]
        hops = [{"from": "A", "rel": r1, "to_var": "T", "to_label": target_type}]
        if kind == "x":
            (r2, t2), phrasing = tmpl[2], tmpl[3]
            second = linked(r2, target_type, t2, cand)
            second = second[second != a]
            if not second.size:
                continue
            b = int(rng.choice(second))
            gold = np.intersect1d(linked(r1, t1, target_type, a), linked(r2, t2, target_type, b))
            gold = gold[gold != a]
            gold = gold[gold != b]
            if not 0 < gold.size <= 20 or cand not in gold:
                continue
            text, relevance = phrasing.format(a=names[a], b=names[b]), ""
            anchors.append({"var": "B", "text": names[b], "label": t2, "match_mode": "name"})
            hops.append({"from": "B", "rel": r2, "to_var": "T", "to_label": target_type})
        else:
            if cand in planted or cand == a:
                continue
            phrase = _phrase(rng, len(queries))
            planted[cand] = phrase
            gold, relevance = np.array([cand]), phrase
            text = tmpl[2].format(a=names[a], phrase=phrase)
        qid = len(queries)
        queries.append((qid, text, sorted(int(g) for g in gold)))
        plans.append({"query": text, "plan": {"anchors": anchors, "hops": hops,
                                              "target": {"var": "T", "labels": [target_type], "relevance_text": relevance},
                                              "risk_level": "normal"}})

    out = Path(out)
    summary = {"dataset": dataset, "scale": scale, "seed": seed, "nodes": n_nodes, "edge_rows": int(src.size),
               "types": counts, "queries": len(queries), "hostile_share": hostile, "words": n_words,
               "note": "synthetic STaRK-format SKB (grasp.testing.stark_synthetic); sizes at scale 1 are STaRK's totals, "
                       "their split over types and relations approximate"}
    with atomic_dir(out) as tmp:
        proc = tmp / "processed"
        proc.mkdir()
        info: dict[int, dict] = {}
        for i in tqdm(range(n_nodes), desc=f"{dataset} nodes", unit="node", disable=not progress, mininterval=2):
            info[i] = _node_info(dataset, type_of[int(node_types[i])], names[i], i, vocab, n_words)
        for node, phrase in planted.items():
            _plant(info[node], dataset, phrase)
        with open(proc / "node_info.pkl", "wb") as f:
            pickle.dump(info, f, protocol=pickle.HIGHEST_PROTOCOL)
        del info
        torch.save(torch.from_numpy(np.stack([src, dst])), proc / "edge_index.pt")
        torch.save(torch.from_numpy(rel_ids), proc / "edge_types.pt")
        torch.save(torch.from_numpy(node_types), proc / "node_types.pt")
        if dataset != "mag":  # STaRK's MAG release has no type dictionaries
            with open(proc / "node_type_dict.pkl", "wb") as f:
                pickle.dump(dict(spec.node_types), f)
            with open(proc / "edge_type_dict.pkl", "wb") as f:
                pickle.dump(dict(spec.edge_types), f)
        qa = tmp / "qa"
        (qa / "stark_qa").mkdir(parents=True)
        (qa / "split").mkdir()
        with open(qa / "stark_qa" / "stark_qa.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["id", "query", "answer_ids"])
            for qid, text, gold in queries:
                w.writerow([qid, text, str(gold)])
        n_q = len(queries)
        bounds = {"train": (0, int(0.6 * n_q)), "val": (int(0.6 * n_q), int(0.8 * n_q)), "test": (int(0.8 * n_q), n_q)}
        for split, (lo, hi) in bounds.items():
            (qa / "split" / f"{split}.index").write_text("".join(f"{q}\n" for q in range(lo, hi)))
        with open(tmp / "plans.jsonl", "w", encoding="utf-8") as f:
            for p in plans:
                f.write(json.dumps(p, ensure_ascii=False) + "\n")
        (tmp / "synthetic.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


__all__ = ["SHAPES", "HOSTILE", "generate"]
