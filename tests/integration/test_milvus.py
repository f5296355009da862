"""The Milvus vector backend on Milvus Lite (the real embedded build, one folder per test): the same top-k as the
exact index, HNSW recall, loads that resume cleanly after an interruption, incomplete collections reloaded, and the
recorded checksum catching a changed vector."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grasp.config import VectorIndexConfig
from grasp.encode import ExactIndex, NodeVectors, milvus
from grasp.errors import ConfigError, GraspError
from grasp.skb.documents import get_layout
from tests.conftest import skip_unless_ci
from tests.integration.test_encode import HashEncoder


@pytest.fixture(autouse=True)
def _milvus_installed():
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
    except ImportError:
        skip_unless_ci("pymilvus and milvus-lite are not installed (pip install -e '.[dev]')")


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def vectors():
    return unit_rows(3000, 16, 0), np.arange(3000, dtype=np.int64) * 7 + 3


def open_milvus(tmp_path, vecs, ids, *, index_type="FLAT", name="grasp_test", **kw) -> milvus.MilvusIndex:
    return milvus.MilvusIndex(vecs, ids, uri=str(tmp_path / "m.db"), name=name, record=tmp_path / f"{name}.json",
                              index_type=index_type, batch_rows=500, progress=False, **kw)


def test_flat_gives_the_exact_top_k(tmp_path, vectors):
    vecs, ids = vectors
    queries = unit_rows(25, 16, 1)
    got_ids, got_scores = open_milvus(tmp_path, vecs, ids).search(queries, 10)
    want_ids, want_scores = ExactIndex(vecs, ids).search(queries, 10)
    assert got_ids.tolist() == want_ids.tolist()  # random vectors: no ties
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)


def test_hnsw_recall_against_exact(tmp_path, vectors):
    vecs, ids = vectors
    queries = unit_rows(50, 16, 2)
    got, _ = open_milvus(tmp_path, vecs, ids, index_type="HNSW", m=16, ef_search=64).search(queries, 10)
    want, _ = ExactIndex(vecs, ids).search(queries, 10)
    recall = np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got.tolist(), want.tolist(), strict=True)])
    assert recall >= 0.9


def test_k_past_the_rows_and_no_rows(tmp_path):
    vecs, ids = unit_rows(4, 8, 3), np.array([10, 11, 12, 13])
    got, scores = open_milvus(tmp_path, vecs, ids).search(vecs[:1], 10)
    assert got.shape == (1, 4) and got[0, 0] == 10 and scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    empty = open_milvus(tmp_path, unit_rows(4, 8, 3), ids, name="grasp_other").search(vecs[:2], 0)
    assert empty[0].shape == (2, 0)


def test_an_opened_collection_is_reused_not_reloaded(tmp_path, vectors):
    vecs, ids = vectors
    open_milvus(tmp_path, vecs, ids)
    # the same name with other vectors of the same shape: the loaded collection is what answers
    again = open_milvus(tmp_path, unit_rows(3000, 16, 9), ids)
    assert again.search(vecs[5:6], 1)[0][0, 0] == ids[5]
    record = json.loads((tmp_path / "grasp_test.json").read_text())
    assert record["rows"] == 3000 and record["collection"] == "grasp_test" and len(record["sha256"]) == 64
    assert record["sha256"] == milvus.content_sha256(ids, vecs)


def test_an_interrupted_load_is_dropped_and_loaded_again(tmp_path, vectors):
    from pymilvus import DataType

    vecs, ids = vectors
    client = milvus.connect(str(tmp_path / "m.db"))
    # what a load killed half way leaves: the build collection with some of the rows, nothing under the final name
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=16)
    client.create_collection("grasp_test" + milvus.LOADING, schema=schema)
    rows = [{"id": int(i), "vector": v.tolist()} for i, v in zip(ids[:700], vecs[:700], strict=True)]
    client.insert("grasp_test" + milvus.LOADING, rows)
    index = open_milvus(tmp_path, vecs, ids)
    assert sorted(client.list_collections()) == ["grasp_test"]
    assert index._count("grasp_test") == 3000
    assert index.verify()


def test_a_collection_missing_rows_is_loaded_again(tmp_path, vectors):
    vecs, ids = vectors
    first = open_milvus(tmp_path, vecs, ids)
    first.client.delete("grasp_test", ids=ids[:100].tolist())
    assert first._count("grasp_test") == 2900
    again = open_milvus(tmp_path, vecs, ids)
    assert again._count("grasp_test") == 3000
    assert again.search(vecs[:1], 1)[0][0, 0] == ids[0]


def test_the_checksum_finds_a_changed_vector(tmp_path, vectors):
    vecs, ids = vectors
    index = open_milvus(tmp_path, vecs, ids)
    record = json.loads((tmp_path / "grasp_test.json").read_text())
    assert index.verify() and milvus.verify_record(record)
    index.client.upsert("grasp_test", [{"id": int(ids[42]), "vector": vecs[43].tolist()}])
    assert not index.verify()
    assert not milvus.verify_record(record)
    assert not milvus.verify_record({**record, "collection": "grasp_gone"})


def test_info_verify_reads_the_collection_back(tmp_path, vectors):
    from grasp.inventory import indexes

    vecs, ids = vectors
    index = open_milvus(tmp_path, vecs, ids)
    [entry] = [e for e in indexes(tmp_path, verify=True) if e.label.startswith("milvus")]
    assert entry.label == "milvus grasp_test" and entry.verified is True and "3000 vectors" in entry.detail
    index.client.upsert("grasp_test", [{"id": int(ids[0]), "vector": vecs[1].tolist()}])
    [entry] = [e for e in indexes(tmp_path, verify=True) if e.label.startswith("milvus")]
    assert entry.verified is False


def test_node_vectors_on_milvus_match_exact(tmp_path, toy_skb):
    enc = HashEncoder()
    layout = get_layout("generic")
    exact = NodeVectors(toy_skb, enc, layout, tmp_path / "exact", progress=False)
    config = VectorIndexConfig(backend="milvus", milvus_index="FLAT")
    on_milvus = NodeVectors(toy_skb, enc, layout, tmp_path / "milvus", config, progress=False)
    q = enc.encode(["brca1 gene", "a disease of the heart"])
    for mode in ("name", "doc"):
        want = exact.search(q, mode, toy_skb.schema.type_names, 4)
        got = on_milvus.search(q, mode, toy_skb.schema.type_names, 4)
        np.testing.assert_allclose(got[1], want[1], atol=1e-5)
        # equal up to ties: the ids agree wherever the score is not tied with a neighbour
        for row_g, row_w, s in zip(got[0], want[0], want[1], strict=True):
            untied = [j for j in range(len(s)) if not np.isclose(s, s[j], atol=1e-5).sum() > 1]
            assert [row_g[j] for j in untied] == [row_w[j] for j in untied]
    assert (tmp_path / "milvus" / "milvus.db").is_dir()
    assert sorted(p.name.split("-")[1] for p in (tmp_path / "milvus").glob("milvus-*.json")) == ["doc"] * len(
        toy_skb.schema.type_names) + ["name"] * len(toy_skb.schema.type_names)


def test_an_unreachable_server_is_one_line():
    with pytest.raises(ConfigError, match=r"cannot open the Milvus server http://127\.0\.0\.1:9"):
        milvus.connect("http://127.0.0.1:9")


def test_collection_names_are_milvus_names():
    name = milvus.collection_name("doc-gene/protein", ["model", 3])
    assert name.startswith("grasp_doc_gene_protein_") and name.replace("_", "").isalnum()
    assert milvus.collection_name("doc-x", ["model", 3]) != milvus.collection_name("doc-x", ["model", 4])
    assert milvus.is_lite("/tmp/a/milvus.db") and not milvus.is_lite("http://host:19530")


def test_an_index_build_the_client_asked_for_twice_is_kept(tmp_path, vectors, monkeypatch):
    """A long build can outlive its connection: pymilvus asks again and the server says the index exists."""
    vecs, ids = vectors
    client = milvus.connect(str(tmp_path / "m.db"))
    real = client.create_index

    def asked_twice(name, params, **kw):
        real(name, params, **kw)
        raise RuntimeError("index already exists for field 'vector'; call drop_index first")

    monkeypatch.setattr(client, "create_index", asked_twice)
    index = open_milvus(tmp_path, vecs, ids)
    assert index.search(vecs[7:8], 1)[0][0, 0] == ids[7] and index.verify()
    monkeypatch.setattr(client, "create_index", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(GraspError, match=r"could not build the vector index \(grasp_other\): disk full"):
        open_milvus(tmp_path, vecs, ids, name="grasp_other")
