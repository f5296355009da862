"""The bank of verified plans: shapes, masking, deduplication, its file, and the nearest examples per query."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grasp.encode.encoder import Encoder
from grasp.errors import FormatError
from grasp.plan.bank import BankEntry, ExampleRetriever, PlanBank, deduplicate, mask_anchors, plan_shape


def plan(anchor: str, rel: str = "on_chromosome", relevance: str = "") -> dict:
    return {"anchors": [{"var": "C", "text": anchor, "label": "chromosome", "match_mode": "name"}],
            "hops": [{"from": "C", "rel": rel, "to_var": "T", "to_label": "gene"}],
            "target": {"var": "T", "labels": ["gene"], "relevance_text": relevance}, "risk_level": "normal"}


class WordEncoder(Encoder):
    """Bag of words hashed into 64 dimensions: questions sharing words are near (deterministic)."""

    dim, model_id = 64, "words"

    def encode(self, texts, *, progress=False, desc=""):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace("?", " ").split():
                out[i, sum(map(ord, w)) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_plans_differing_only_in_what_a_question_fills_in_share_a_shape():
    assert plan_shape(plan("chromosome 2", relevance="sodium")) == plan_shape(plan("chr 7", relevance="potassium"))
    assert plan_shape(plan("chromosome 2")) != plan_shape(plan("chromosome 2", relevance="sodium"))
    assert plan_shape(plan("chromosome 2")) != plan_shape(plan("chromosome 2", rel="located_on"))


def test_anchor_names_are_masked_by_their_type():
    p = plan("Chromosome 2")
    p["anchors"].append({"var": "D", "text": "ion transport", "label": "process", "match_mode": "doc"})
    assert mask_anchors("genes on chromosome 2 doing ion transport", p) == "genes on <chromosome> doing ion transport"
    longest_first = {"anchors": [{"text": "SCN1", "label": "gene"}, {"text": "SCN1A", "label": "gene"}]}
    assert mask_anchors("is SCN1A like SCN1?", longest_first) == "is <gene> like <gene>?"


def test_deduplication_keeps_the_best_verified_phrasings_of_each_shape():
    entries = [BankEntry("a", "genes on chr 1", plan("chr 1"), "train", gold_rank=3, n_cand=10),
               BankEntry("b", "genes on chr 2", plan("chr 2"), "train", gold_rank=1, n_cand=50),
               BankEntry("c", "Genes  on chr 2", plan("chr 2"), "train", gold_rank=1, n_cand=5),   # b's question again
               BankEntry("d", "genes on chr 3", plan("chr 3"), "synthetic"),
               BankEntry("e", "other shape", plan("chr 4", rel="located_on"), "train", gold_rank=9, n_cand=9)]
    assert [e.qid for e in deduplicate(entries, per_shape=2)] == ["a", "c", "e"]
    assert [e.qid for e in deduplicate(entries, per_shape=1)] == ["c", "e"]
    assert [e.qid for e in deduplicate(entries, per_shape=9)] == ["a", "c", "d", "e"]


def test_a_bank_round_trips_and_its_version_follows_its_plans(tmp_path):
    bank = PlanBank([BankEntry("1", "genes on chr 2", plan("chr 2"), "train", 1, 4)], {"splits": ["train"]})
    bank.save(tmp_path)
    again = PlanBank.load(tmp_path)
    assert again.entries == bank.entries and again.version == bank.version
    record = json.loads((tmp_path / "bank.json").read_text())
    assert record["entries"] == 1 and record["shapes"] == 1 and record["splits"] == ["train"]
    changed = PlanBank([BankEntry("1", "genes on chr 2", plan("chr 2", rel="located_on"), "train", 1, 4)])
    assert changed.version != bank.version
    assert PlanBank.load(tmp_path / "none") is None
    (tmp_path / "bank.jsonl").write_text(json.dumps({"qid": "1"}) + "\n{not json\n")
    with pytest.raises(FormatError, match=r"bank\.jsonl:1: not a bank entry"):
        PlanBank.load(tmp_path)


def test_the_nearest_questions_become_the_examples_never_the_query_itself():
    bank = PlanBank([BankEntry("1", "genes on chromosome 2", plan("chromosome 2"), "train", 1, 3),
                     BankEntry("2", "which process is ion transport part of", plan("x", rel="is_a"), "train", 1, 2),
                     BankEntry("3", "genes located on chromosome 7 near the centromere", plan("chromosome 7"), "train", 2, 9)])
    calls = []

    def factory():
        calls.append(1)
        return WordEncoder()

    nearest = ExampleRetriever(bank, factory, k=2, match="query")
    assert calls == []  # the encoder is made on the first query, not before
    got = nearest.examples("genes on chromosome 7")
    assert [e.qid for e in got] == ["3", "1"]  # most similar (3 of its 4 words shared) last, next to the query
    assert [e.qid for e in nearest.examples("Genes on Chromosome 2")] == ["2", "3"]  # its own question left out
    assert len(calls) == 1
    assert nearest.tag != ExampleRetriever(bank, WordEncoder(), k=3, match="query").tag
    masked = ExampleRetriever(bank, WordEncoder(), k=1, match="masked")
    assert masked.examples("genes on <chromosome>")[0].qid == "1"


def test_shape_statistics_count_anchors_hops_relations_and_distinct_shapes():
    from grasp.plan.model import Plan
    from grasp.plan.summary import shape_statistics

    text_only = {"anchors": [{"var": "T", "text": "sodium channel", "label": "gene", "match_mode": "doc"}],
                 "hops": [], "target": {"var": "T", "labels": ["gene"], "relevance_text": "sodium channel"}}
    plans = [Plan.model_validate(p) for p in (plan("chr 2"), plan("chr 7"), plan("chr 7", rel="located_on"), text_only)]
    stats = shape_statistics(plans)
    assert stats["plans"] == 4
    assert stats["anchors"] == {"1": 1.0}
    assert stats["hops"] == {"0": 0.25, "1": 0.75}
    assert stats["match_modes"] == {"name": 3, "doc": 1}
    assert stats["relations"] == {"on_chromosome": 2, "located_on": 1}
    assert stats["distinct_shapes"] == 3  # the two on_chromosome plans differ only in the anchor's name
    assert shape_statistics([])["plans"] == 0
