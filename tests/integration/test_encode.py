"""Encoders, the embedding store and vector indexes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from grasp.encode import EmbeddingStore, ExactIndex, NodeVectors, OpenAIEmbeddingEncoder
from grasp.encode.encoder import Encoder
from grasp.encode.index import merge_topk
from grasp.skb.documents import get_layout


class HashEncoder(Encoder):
    """A deterministic bag-of-characters encoder for store/index mechanics (the real model is tested below)."""

    def __init__(self, dim=16, model_id="hash-v1"):
        self.dim, self.model_id, self.calls = dim, model_id, 0

    def encode(self, texts, *, progress=False, desc=""):
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                out[i, ord(ch) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_exact_index_matches_brute_force_across_chunks():
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(5000, 24)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = np.arange(5000) * 3 + 7
    q = vecs[[10, 2000, 4999]] + 0.01
    idx = ExactIndex(vecs.astype(np.float16), ids, chunk_rows=1024)
    got_ids, got_s = idx.search(q, 10)
    full = q @ vecs.astype(np.float16).astype(np.float32).T
    want = np.argsort(-full, axis=1)[:, :10]
    assert np.array_equal(got_ids, ids[want])
    assert np.allclose(got_s, np.take_along_axis(full, want, 1), atol=1e-5)
    assert idx.search(q, 10_000)[0].shape == (3, 5000)


def test_two_pass_fp16_search_equals_the_float32_scan():
    """Above two_pass_rows a float16 matrix is searched in half precision, then its shortlist rescored in
    float32: the brute-force ranking (ties by row) and the one-pass scan's scores, duplicated rows included."""
    rng = np.random.default_rng(4)
    vecs = rng.normal(size=(20_000, 32)).astype(np.float32)
    vecs[5000:5040] = vecs[17]  # 41 identical rows: a tie the order must break by row
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float16)
    ids = np.arange(20_000) * 2 + 1
    q = np.concatenate([vecs[[17, 3, 19_999]].astype(np.float32) + 0.02, rng.normal(size=(5, 32))]).astype(np.float32)
    full = q @ vecs.astype(np.float32).T
    brute = np.lexsort((np.broadcast_to(np.arange(20_000), full.shape), -full), axis=1)  # score, then row
    scan = ExactIndex(vecs, ids, chunk_rows=1 << 20, two_pass_rows=1 << 20)   # one pass
    two = ExactIndex(vecs, ids, chunk_rows=4096)
    assert ExactIndex(vecs, ids).two_pass_rows == 8192  # the default: two passes over 20,000 rows
    default = ExactIndex(vecs, ids)
    for k in (1, 5, 100, 2000):
        (_, a_s), (b_ids, b_s) = scan.search(q, k), two.search(q, k)
        if k <= 100:  # deeper, scores 1e-7 apart swap places (GEMV vs GEMM rounding)
            assert np.array_equal(b_ids, ids[brute[:, :k]]), k
        assert np.allclose(b_s, np.take_along_axis(full, brute[:, :k], 1), atol=1e-6), k
        assert np.allclose(b_s, np.take_along_axis(full, (b_ids - 1) // 2, 1), atol=1e-6), k
        assert np.allclose(a_s, b_s, atol=1e-6), k  # the scan keeps some of the tied rows, at the same scores
        assert np.array_equal(default.search(q, k)[0], b_ids), k
    assert two.search(q[:1], 5)[0][0].tolist() == [ids[17]] + ids[5000:5004].tolist()


def test_faiss_index_recovers_nearest():
    pytest.importorskip("faiss")
    from grasp.encode import FaissIndex

    rng = np.random.default_rng(2)
    vecs = rng.normal(size=(2000, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx = FaissIndex(vecs, np.arange(2000), m=16, ef_search=64)
    ids, _ = idx.search(vecs[:20], 1)
    assert (ids[:, 0] == np.arange(20)).mean() >= 0.95


def test_merge_topk():
    a = (np.array([[1, 2]]), np.array([[0.9, 0.1]]))
    b = (np.array([[3, 4]]), np.array([[0.5, 0.4]]))
    ids, scores = merge_topk([a, b], 3)
    assert ids.tolist() == [[1, 3, 4]]


def test_store_is_keyed_by_model_and_layout_and_reused(tmp_path, toy_skb):
    enc = HashEncoder()
    nv = NodeVectors(toy_skb, enc, get_layout("generic"), tmp_path, progress=False)
    ids, m1 = nv.embeddings("doc", "gene")
    assert ids.tolist() == [0, 1, 2, 8] and m1.dtype == np.float16
    calls = enc.calls
    NodeVectors(toy_skb, enc, get_layout("generic"), tmp_path, progress=False).embeddings("doc", "gene")
    assert enc.calls == calls  # reused from disk
    NodeVectors(toy_skb, enc, get_layout("stark-prime"), tmp_path, progress=False).embeddings("doc", "gene")
    NodeVectors(toy_skb, HashEncoder(model_id="hash-v2"), get_layout("generic"), tmp_path, progress=False).embeddings("doc", "gene")
    assert len(list(tmp_path.glob("doc-gene-*.npy"))) == 3  # new layout, new model: new files
    nv.embeddings("name", "gene")
    assert len(list(tmp_path.glob("name-gene-*.npy"))) == 1


def test_store_resumes_after_interruption(tmp_path):
    enc = HashEncoder()
    store = EmbeddingStore(tmp_path, chunk=2)
    texts = [f"text {i}" for i in range(7)]
    ids = np.arange(7)

    class Boom(Exception):
        pass

    def failing(i):
        if i == 5:
            raise Boom
        return texts[i]

    with pytest.raises(Boom):
        store.get("x", {"k": 1}, ids, failing, enc, progress=False)
    assert not list(tmp_path.glob("*.npy"))  # no half matrix
    assert len(list(tmp_path.glob("*.partial/0*.npy"))) == 2
    done = enc.calls
    mat = store.get("x", {"k": 1}, ids, lambda i: texts[i], enc, progress=False)
    assert enc.calls - done == 3  # only the missing chunks
    assert np.allclose(mat, enc.encode(texts).astype(np.float16))
    assert not list(tmp_path.glob("*.partial"))


def test_corrupt_embedding_file_is_reported(tmp_path):
    from grasp.errors import IndexCorruptError

    enc = HashEncoder()
    store = EmbeddingStore(tmp_path)
    store.get("x", {"k": 1}, np.arange(3), lambda i: str(i), enc, progress=False)
    path = next(tmp_path.glob("x-*.npy"))
    path.write_bytes(b"garbage")
    with pytest.raises(IndexCorruptError, match="embedding matrix changed since it was built"):
        store.get("x", {"k": 1}, np.arange(3), lambda i: str(i), enc, progress=False)


@pytest.mark.slow
def test_bundled_minilm_encodes_offline(minilm):
    v = minilm.encode(["sodium channel", "sodium ion channel", "a recipe for bread"])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert minilm.model_id.startswith("st:sentence-transformers/all-MiniLM-L6-v2")


def test_token_budget_batches_match_sentence_transformers(minilm):
    """The encoder's own batching (sorted by token count, sized by tokens) gives the vectors that
    sentence-transformers' encode gives, in the caller's order, and fills batches with short texts."""
    texts = ["sodium", "a much longer text about voltage-gated potassium channels in neurons " * 6, "bread",
             "gene on chromosome 2", "x"] * 30
    mine = minilm.encode(texts)
    ref = minilm._model.encode(texts, batch_size=4, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(mine, ref, atol=2e-5)
    batches = minilm._batches(texts)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(texts)))
    assert max(len(b) for b in batches) > 2 * len(batches[0])  # many short texts per batch, few long ones
    lengths = [len(ids) for ids in minilm.tokenizer(texts, truncation=True, max_length=128)["input_ids"]]
    assert all(len(b) * max(lengths[i] for i in b) <= max(minilm.tokens_per_batch, 128) for b in batches)


def test_int8_encoder_is_close_and_cached_apart():
    """encoder.precision=int8 quantizes the Linear layers: vectors near fp32's, a model id of its own
    (so its vectors never mix with fp32's in the store), and refused with a clear error where it cannot run."""
    from grasp.config import EncoderConfig
    from grasp.encode import build_encoder
    from grasp.errors import ConfigError

    fp32 = build_encoder(EncoderConfig(max_length=128, precision="fp32"))
    int8 = build_encoder(EncoderConfig(max_length=128, precision="int8"))
    texts = ["sodium voltage-gated channel alpha subunit", "glycosaminoglycan biosynthesis", "python yaml parser"]
    a, b = fp32.encode(texts), int8.encode(texts)
    cos = (a * b).sum(1)
    assert cos.min() > 0.9 and not np.allclose(a, b, atol=1e-4)
    assert int8.model_id == fp32.model_id + ":int8"
    assert b[0] @ b[1] < b[0] @ int8.encode(["sodium ion channel"])[0]  # still ranks by meaning
    from grasp.encode.encoder import SentenceTransformerEncoder

    with pytest.raises(ConfigError, match="CPU option"):
        SentenceTransformerEncoder(precision="int8", device="meta")


def test_bf16_encoder_matches_fp32_and_serves_its_artifacts():
    """encoder.precision=bf16 (the default where the CPU multiplies bfloat16 natively) runs the matrix
    products in bfloat16: vectors within cosine 0.9999 of fp32's, cached apart (a model id of its own),
    and the same encoder for trained artifacts (mFAR weights and settings made over fp32 vectors serve
    it); int8, which moves vectors further, stays apart there too."""
    from grasp.config import EncoderConfig
    from grasp.encode import build_encoder
    from grasp.encode.encoder import encoder_id, encoder_weights_id, native_bf16, resolve_precision
    from grasp.errors import ConfigError

    fp32 = build_encoder(EncoderConfig(max_length=128, precision="fp32"))
    bf16 = build_encoder(EncoderConfig(max_length=128, precision="bf16"))
    texts = ["sodium voltage-gated channel alpha subunit", "glycosaminoglycan biosynthesis", "python yaml parser",
             "a much longer text about voltage-gated potassium channels in neurons " * 5]
    a, b = fp32.encode(texts), bf16.encode(texts)
    cos = (a * b).sum(1)
    assert cos.min() > 0.9995 and not np.array_equal(a, b)
    assert bf16.model_id == fp32.model_id + ":bf16" and bf16.precision == "bf16"
    cfgs = {p: EncoderConfig(max_length=128, precision=p) for p in ("fp32", "bf16", "int8")}
    assert encoder_id(cfgs["bf16"]) == bf16.model_id
    assert encoder_weights_id(cfgs["bf16"]) == encoder_weights_id(cfgs["fp32"]) == fp32.model_id
    assert encoder_weights_id(cfgs["int8"]) == fp32.model_id + ":int8"
    assert resolve_precision("auto", "cpu") == ("bf16" if native_bf16("cpu") else "fp32")
    assert resolve_precision("auto", "meta") == "fp32"
    with pytest.raises(ConfigError, match="must be one of"):
        resolve_precision("fp8", "cpu")


class _FakeEmbeddings(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/embeddings":
            self.send_response(404)
            self.end_headers()
            return
        enc = HashEncoder(dim=8)
        vecs = enc.encode(body["input"]) * 3.0  # unnormalised on purpose
        data = [{"index": i, "embedding": v.tolist()} for i, v in reversed(list(enumerate(vecs)))]
        payload = json.dumps({"data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_openai_compatible_endpoint():
    server = HTTPServer(("127.0.0.1", 0), _FakeEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        enc = OpenAIEmbeddingEncoder("fake-embedder", f"http://127.0.0.1:{server.server_port}/v1", batch_size=2)
        assert enc.dim == 8
        v = enc.encode(["abc", "xyz", "abd"])
        assert np.allclose(np.linalg.norm(v, axis=1), 1)
        assert np.allclose(v, HashEncoder(dim=8).encode(["abc", "xyz", "abd"]), atol=1e-6)  # order restored
    finally:
        server.shutdown()


def test_openai_endpoint_unreachable_fails_clearly():
    from grasp.errors import GraspError

    with pytest.raises(GraspError, match="failed after 2 tries"):
        OpenAIEmbeddingEncoder("m", "http://127.0.0.1:9/v1", retries=2, timeout_s=1)
