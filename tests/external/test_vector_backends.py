"""The demo KB with its vectors in Milvus Lite (FLAT): anchor linking, the dense baseline and mFAR's dense fields
answer as the exact backend does (top 10 equal up to ties), plans replayed from the shipped cache."""

from __future__ import annotations

import json

import pytest

from grasp.api import Searcher
from grasp.config import load_config
from tests.conftest import DEMO_SKB, skip_unless_ci

pytestmark = pytest.mark.slow

CONFIG = ["planner.kind=cache", "planner.on_miss=no_trade"]


def test_milvus_lite_answers_as_exact_on_the_demo(tmp_path):
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
    except ImportError:
        skip_unless_ci("pymilvus and milvus-lite are not installed (pip install -e '.[dev]')")
    queries = [json.loads(line)["query"] for line in (DEMO_SKB / "qa" / "queries.jsonl").open(encoding="utf-8")][:20]
    milvus = [*CONFIG, "vector_index.backend=milvus", "vector_index.milvus_index=FLAT",
              f"vector_index.milvus_uri={tmp_path / 'milvus.db'}"]
    for method in ("dense", "mfar", "graph"):
        exact = Searcher.open(DEMO_SKB, method=method, config=load_config(None, CONFIG))
        on_milvus = Searcher.open(DEMO_SKB, method=method, config=load_config(None, milvus))
        for q in queries:
            want, got = exact.search(q, 10).hits, on_milvus.search(q, 10).hits
            assert len(got) == len(want)
            for a, b in zip(want, got, strict=True):  # a tie may order two nodes either way
                assert a.score == pytest.approx(b.score, abs=1e-4)
                assert a.node_id == b.node_id or sum(abs(h.score - a.score) < 1e-4 for h in want) > 1
    assert (tmp_path / "milvus.db").is_dir()
    records = [json.loads(p.read_text()) for p in on_milvus.workspace.vectors_dir.glob("milvus-*.json")]
    ours = [r for r in records if r["uri"] == str(tmp_path / "milvus.db")]
    # the dense baseline's documents, mFAR's dense fields and the types anchors were linked in (built as first
    # used); an empty field makes no collection
    names = {r["collection"].rsplit("_", 1)[0] for r in ours}
    assert {"grasp_doc_package", "grasp_field_single", "grasp_name_package"} <= names, names
    assert all(r["rows"] > 0 for r in ours)
