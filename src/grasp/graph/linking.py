"""Anchor linking (paper Section 3.1, appendix 7): embed each anchor's text, search the name-mode
or doc-mode index of its declared type, and keep the top-K matches whose cosine is at least
tau x the top-1 cosine. Defaults: (K, tau) = (5, 0.95) in name mode, (10, 0.90) in doc mode."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grasp.encode.node_vectors import NodeVectors
from grasp.plan.model import Anchor


@dataclass
class Binding:
    """The nodes an anchor variable may take, each with its cosine to the anchor text."""

    var: str
    node_ids: np.ndarray
    scores: np.ndarray

    def to_json(self, names: list[str] | None = None) -> dict:
        rows = [{"node_id": int(i), "cosine": round(float(s), 4)} for i, s in zip(self.node_ids, self.scores, strict=True)]
        if names is not None:
            for r in rows:
                r["name"] = names[r["node_id"]]
        return {"var": self.var, "bindings": rows}


_WORD = re.compile(r"[^\W_]+")


def _word_matches(word: str, name_word: str) -> bool:
    """Equal, or (letters only, three or more of them) one a prefix of the other: "chr" ~ "chromosome",
    while numbers match exactly ("2" is not "22")."""
    if word == name_word:
        return True
    short, long_ = sorted((word, name_word), key=len)
    return len(short) >= 3 and short.isalpha() and long_.isalpha() and long_.startswith(short)


def words_contained(text: str, name: str) -> bool:
    """Whether every word of ``text`` matches a word of ``name`` (:func:`_word_matches`), ignoring case
    ("Chr 22" in "chromosome 22"), so that an abbreviation the encoder scores low still counts as naming
    the node."""
    words, names = _WORD.findall(text.lower()), _WORD.findall(name.lower())
    return bool(words) and all(any(_word_matches(w, n) for n in names) for w in words)


def match_quality(text: str, best_name: str, best_cosine: float) -> float:
    """How well a name-mode anchor names its best node: 1.0 when the name holds every word of the anchor,
    otherwise their cosine. A low value means the anchor is a description rather than a name in the KB
    (the planner bound a phrase as an entity), and the plan built on it is not to be trusted."""
    if words_contained(text, best_name):
        return 1.0
    return float(best_cosine)


def name_qualities(anchors: Sequence[Anchor], bindings: dict[str, Binding],
                   names: Sequence[str]) -> list[tuple[Anchor, float]]:
    """Each name-mode anchor with its :func:`match_quality` (doc-mode anchors are descriptions by design and not
    judged); an anchor bound to no node scores 0."""
    out = []
    for a in anchors:
        if a.match_mode != "name":
            continue
        b = bindings.get(a.var)
        empty = b is None or b.node_ids.size == 0
        out.append((a, 0.0 if empty else match_quality(a.text, names[int(b.node_ids[0])], float(b.scores[0]))))
    return out


def link_confidence(anchors: Sequence[Anchor], bindings: dict[str, Binding], names: Sequence[str],
                    qualities: Sequence[tuple[Anchor, float]] | None = None) -> float | None:
    """The weakest name-mode anchor's :func:`match_quality` (None for a plan without one); ``qualities``: their
    :func:`name_qualities` when already computed."""
    if qualities is None:
        qualities = name_qualities(anchors, bindings, names)
    return min(q for _, q in qualities) if qualities else None


def keep_top(ids: np.ndarray, scores: np.ndarray, k: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` (already sorted) matches scoring at least ``tau`` x the best one."""
    ids, scores = ids[:k], scores[:k]
    valid = ids >= 0
    ids, scores = ids[valid], scores[valid]
    if ids.size == 0:
        return ids, scores
    top = scores[0]
    floor = tau * top if top > 0 else top
    keep = scores >= floor - 1e-9
    return ids[keep], scores[keep]


class AnchorLinker:
    def __init__(self, vectors: NodeVectors, *, name_k: int = 5, name_tau: float = 0.95,
                 doc_k: int = 10, doc_tau: float = 0.90) -> None:
        self.vectors = vectors
        self.params = {"name": (name_k, name_tau), "doc": (doc_k, doc_tau)}

    def link(self, anchors: list[Anchor]) -> dict[str, Binding]:
        if not anchors:
            return {}
        emb = self.vectors.encoder.encode_queries([a.text for a in anchors])
        out: dict[str, Binding] = {}
        for a, e in zip(anchors, emb, strict=True):
            k, tau = self.params[a.match_mode]
            ids, scores = self.vectors.search(e[None, :], a.match_mode, [a.label], k)
            ids, scores = keep_top(ids[0], scores[0].astype(np.float64), k, tau)
            out[a.var] = Binding(a.var, ids.astype(np.int64), scores)
        return out
