"""Small real fixtures: a toy open-format SKB written to disk by the tests themselves."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

with contextlib.suppress(ImportError):  # before anything loads kuzu: the other order aborts the process
    import xllamacpp  # noqa: F401

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
from grasp.packaged import DEMO_SKB  # noqa: E402,F401 - the tests' name for the bundled demo KB

SHARED = REPO.parent / "shared"  # the workplace's shared data (CI has it beside the clone)


def skip_unless_ci(reason: str) -> None:
    """Skip on a developer's machine that lacks a test resource; fail under CI (CI=1), where every
    resource the suite needs must be there, so that a missing one never passes as a skip."""
    import os

    if os.environ.get("CI"):
        pytest.fail(f"CI=1 and {reason}", pytrace=False)
    pytest.skip(reason)


SCHEMA = {
    "name": "toy",
    "description": "genes and GO terms",
    "node_types": {
        "gene": {"name_field": "name", "text_fields": ["full_name", "aliases"]},
        "process": {"name_field": "name", "text_fields": ["definition"]},
        "chromosome": {"name_field": "name", "text_fields": []},
    },
    "relations": [
        {"name": "involved_in", "source": "gene", "target": "process"},
        {"name": "on_chromosome", "source": "gene", "target": "chromosome"},
        {"name": "is_a", "source": "process", "target": "process"},
    ],
    "candidate_types": ["gene", "process"],
}

NODES = [
    {"id": 0, "type": "gene", "name": "B3GALT6", "fields": {"full_name": "beta-1,3-galactosyltransferase 6", "aliases": ["beta3GalT6", "EDSSPD2"]}},
    {"id": 1, "type": "gene", "name": "SCN1A", "fields": {"full_name": "sodium voltage-gated channel alpha subunit 1", "aliases": ["NAC1"]}},
    {"id": 2, "type": "gene", "name": "KCNQ2", "fields": {"full_name": "potassium voltage-gated channel subfamily Q member 2"}},
    {"id": 3, "type": "process", "name": "glycosaminoglycan biosynthesis", "fields": {"definition": "The chemical reactions resulting in the formation of glycosaminoglycans."}},
    {"id": 4, "type": "process", "name": "sodium ion transport", "fields": {"definition": "The directed movement of sodium ions into, out of or within a cell."}},
    {"id": 5, "type": "process", "name": "ion transport", "fields": {"definition": "The directed movement of charged atoms or small charged molecules."}},
    {"id": 6, "type": "chromosome", "name": "chromosome 1", "fields": {}},
    {"id": 7, "type": "chromosome", "name": "chromosome 2", "fields": {}},
    {"id": 8, "type": "gene", "name": "SCN2A", "fields": {"full_name": "sodium voltage-gated channel alpha subunit 2"}},
]

EDGES = [
    (0, "involved_in", 3), (1, "involved_in", 4), (8, "involved_in", 4), (2, "involved_in", 5),
    (0, "on_chromosome", 6), (1, "on_chromosome", 7), (8, "on_chromosome", 7), (2, "on_chromosome", 7),
    (4, "is_a", 5),
]

QUERIES = [
    {"id": 0, "query": "galactosyltransferase gene", "answer_ids": [0], "template": "gene_text", "split": "test"},
    {"id": 1, "query": "sodium channel genes on chromosome 2", "answer_ids": [1, 8], "template": "gene_chr", "split": "test"},
    {"id": 2, "query": "movement of sodium ions", "answer_ids": [4], "template": "go_def", "split": "train"},
    {"id": 3, "query": "potassium channel", "answer_ids": [2], "template": "gene_text", "split": "val"},
]


def write_toy(directory: Path, *, gzip: bool = False, nodes=None, edges=None, schema=None, queries=None) -> Path:
    """Write the toy SKB (optionally altered) in the open format, as plain or gzipped files."""
    import gzip as gz

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "schema.json").write_text(json.dumps(schema if schema is not None else SCHEMA, indent=1))
    node_lines = [n if isinstance(n, str) else json.dumps(n) for n in (nodes if nodes is not None else NODES)]
    edge_lines = ["source\trelation\ttarget"] + [
        e if isinstance(e, str) else "\t".join(map(str, e)) for e in (edges if edges is not None else EDGES)
    ]
    for name, lines in (("nodes.jsonl", node_lines), ("edges.tsv", edge_lines)):
        text = "\n".join(lines) + "\n"
        if gzip:
            with gz.open(directory / f"{name}.gz", "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            (directory / name).write_text(text)
    (directory / "qa").mkdir(exist_ok=True)
    (directory / "qa" / "queries.jsonl").write_text(
        "\n".join(json.dumps(q) for q in (queries if queries is not None else QUERIES)) + "\n"
    )
    return directory


@pytest.fixture
def toy_dir(tmp_path: Path) -> Path:
    return write_toy(tmp_path / "toy")


@pytest.fixture
def toy_skb(toy_dir: Path):
    from grasp.skb import read_skb

    return read_skb(toy_dir)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("GRASP_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="session")
def minilm():
    """The bundled MiniLM encoder (real weights, loaded once per test session)."""
    from grasp.config import EncoderConfig
    from grasp.encode import build_encoder

    return build_encoder(EncoderConfig(max_length=128, batch_size=16, precision="fp32"))  # as sentence-transformers


@pytest.fixture(scope="session")
def prepared_toy(tmp_path_factory):
    """A toy SKB with every zero-shot stage prepared (plans from a local fake LLM endpoint, fusion
    tuned with the dense partner, the zero-shot final fusion tuned) and a Searcher over it
    (method grasp-zs: graph, dense, fused, reranker). The fake endpoint stays up for the session."""
    from grasp.api import Searcher
    from grasp.cli import main
    from grasp.config import load_config
    from tests.fake_llm import FakeChatServer
    from tests.integration.test_planner import GOOD

    root = tmp_path_factory.mktemp("prepared")
    toy = write_toy(root / "toy")
    with FakeChatServer([GOOD]) as srv:
        overrides = [f"cache_dir={root / 'cache'}", "planner.kind=openai", "planner.format=flat", f"planner.base_url={srv.url}",
                     "planner.model=fake", "graph.engine=memory", "encoder.max_length=128"]
        base = ["-q"] + [x for o in overrides for x in ("--set", o)]
        main([*base, "tune", "fusion", "--skb", str(toy), "--split", "test", "--dense-method", "dense"])
        main([*base, "tune", "rerank", "--skb", str(toy), "--zero-shot", "--split", "test"])
        searcher = Searcher.open(toy, method="auto", config=load_config(None, overrides))
        yield searcher, srv


def free_port() -> int:
    """A TCP port free on loopback now (for the test servers)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BOLT_PASSWORD = "grasp-test-pw"
BOLT_DATABASES = "randgraph,toy,service"  # one database per test module that loads a graph


@pytest.fixture(scope="session")
def bolt_server(tmp_path_factory):
    """A real Bolt server (ArcadeDB with its Bolt plugin) in a helper process (see tests/bolt_server.py),
    shared by the tests that need one; under CI=1 a server that cannot start is a failure."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("arcadedb_embedded") is None or importlib.util.find_spec("neo4j") is None:
        skip_unless_ci("arcadedb-embedded and neo4j (dev extras) provide the Bolt test server")
    bolt, http = free_port(), free_port()
    work = tmp_path_factory.mktemp("arcade")
    helper = Path(__file__).with_name("bolt_server.py")
    proc = subprocess.Popen([sys.executable, str(helper), str(work / "db"), str(bolt), str(http), BOLT_PASSWORD,
                             BOLT_DATABASES], cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # blocks until READY, or "" if the helper died
    if line.strip() != "READY":
        proc.kill()
        skip_unless_ci("the ArcadeDB Bolt server could not start in its helper process")
    yield f"bolt://127.0.0.1:{bolt}"
    proc.stdin.close()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
