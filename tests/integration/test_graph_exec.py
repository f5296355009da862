"""Stage-1 execution: the compiled Cypher on Kùzu and the in-memory executor give the paper's scores."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from grasp.errors import GraspError
from grasp.graph.compiler import CypherNames, compile_plan
from grasp.graph.linking import Binding, keep_top
from grasp.graph.memory import MemoryExecutor
from grasp.plan.validate import check_plan
from grasp.skb import SKB, NodeTypeSpec, RelationSpec, Schema
from tests.random_plans import compare_with_memory, random_skb

kuzu = pytest.importorskip("kuzu")  # conftest has loaded xllamacpp first: the other order aborts the process


@pytest.fixture(scope="module")
def rand_graph(tmp_path_factory):
    from grasp.graph.backends import KuzuBackend

    skb = random_skb(7)
    return skb, KuzuBackend(skb, tmp_path_factory.mktemp("kuzu"), buffer_pool_mb=128)


def test_memory_executor_equals_cypher_on_random_plans(rand_graph):
    skb, kz = rand_graph
    result = compare_with_memory(skb, kz, plans=60, seed=0)
    assert result["mismatch"] is None, result["mismatch"]
    # the comparison is not vacuous: plans with candidates, directed hops, branches joining below the target
    assert result["plans"] == 60 and result["nonempty"] > 20 and result["directed"] > 10 and result["meeting"] > 5


def test_score_is_sum_of_cosines_max_over_paths(toy_skb, tmp_path):
    from grasp.graph.backends import KuzuBackend

    raw = {"anchors": [{"var": "C", "text": "x", "label": "chromosome", "match_mode": "name"},
                       {"var": "P", "text": "y", "label": "process", "match_mode": "name"}],
           "hops": [{"from": "C", "rel": "on_chromosome", "to_var": "T", "to_label": "gene"},
                    {"from": "P", "rel": "involved_in", "to_var": "T", "to_label": "gene"}],
           "target": {"var": "T", "labels": ["gene"], "relevance_text": ""}, "risk_level": "normal"}
    plan = check_plan(raw, toy_skb.schema).plan
    bindings = {"C": Binding("C", np.array([7, 6]), np.array([0.9, 0.5])),
                "P": Binding("P", np.array([4, 5]), np.array([0.7, 0.6]))}
    # genes on chr 2 (7): 1, 2, 8; involved in 4: 1, 8; in 5: 2
    want = {1: 0.9 + 0.7, 8: 0.9 + 0.7, 2: 0.9 + 0.6}
    for engine in (MemoryExecutor(toy_skb), KuzuBackend(toy_skb, tmp_path, buffer_pool_mb=64)):
        if isinstance(engine, MemoryExecutor):
            ids, scores = engine.execute(plan, bindings)
        else:
            ids, scores = engine.run(compile_plan(plan, bindings, CypherNames(toy_skb.schema)))
        assert dict(zip(ids.tolist(), np.round(scores, 6).tolist(), strict=True)) == pytest.approx(want)


def test_query_text_never_contains_user_text(toy_skb):
    evil = "x' }) MATCH (n) DETACH DELETE n //"
    raw = {"anchors": [{"var": "C", "text": evil, "label": "chromosome", "match_mode": "name"}],
           "hops": [{"from": "C", "rel": "on_chromosome", "to_var": "T", "to_label": "gene"}],
           "target": {"var": "T", "labels": ["gene"], "relevance_text": evil}, "risk_level": "normal"}
    plan = check_plan(raw, toy_skb.schema).plan
    q = compile_plan(plan, {"C": Binding("C", np.array([7]), np.array([1.0]))}, CypherNames(toy_skb.schema))
    assert "DELETE" not in q.cypher and evil not in q.cypher
    assert all(isinstance(v, (int, float, list)) for v in q.params.values())


def test_cypher_names_are_safe_identifiers():
    schema = Schema(name="p", node_types={"gene/protein": NodeTypeSpec(), "effect/phenotype": NodeTypeSpec()},
                    relations=[RelationSpec(name="off-label use", source="gene/protein", target="effect/phenotype"),
                               RelationSpec(name="off label use", source="gene/protein", target="gene/protein")],
                    candidate_types=["gene/protein"])
    names = CypherNames(schema)
    assert names.label["gene/protein"] == "gene_protein"
    assert names.rel["off-label use"] == "off_label_use" and names.rel["off label use"] == "off_label_use_2"


def test_keep_top_threshold():
    ids, s = keep_top(np.array([3, 1, 2, 9]), np.array([0.9, 0.86, 0.84, 0.5]), 5, 0.95)
    assert ids.tolist() == [3, 1]  # 0.84 < 0.95 * 0.9
    ids, _ = keep_top(np.array([3, 1, 2]), np.array([0.9, 0.89, 0.88]), 2, 0.5)
    assert ids.tolist() == [3, 1]


@pytest.mark.parametrize("cypher", [
    "MATCH (n:gene) DETACH DELETE n RETURN 1 AS id",
    "CREATE (n:gene {id: 1}) RETURN n.id AS id",
    "MATCH (n) SET n.name = 'x' RETURN n.id AS id",
    "CALL db.labels() YIELD label RETURN label",
    "LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l",
])
def test_read_only_guard_refuses_writes(cypher, toy_skb, tmp_path):
    from grasp.errors import GraspError
    from grasp.graph.backends import KuzuBackend
    from grasp.graph.compiler import CompiledQuery, assert_read_only

    with pytest.raises(GraspError, match="read-only"):
        assert_read_only(cypher)
    backend = KuzuBackend(toy_skb, tmp_path, buffer_pool_mb=64)
    with pytest.raises(GraspError):
        backend.run(CompiledQuery(cypher))
    assert backend.run(CompiledQuery("MATCH (n:gene) RETURN n.id AS id, 0.0 AS score"))[0].size == 4


def test_reserved_words_are_not_identifiers():
    schema = Schema(name="r", node_types={"set": NodeTypeSpec(), "match": NodeTypeSpec()},
                    relations=[RelationSpec(name="delete", source="set", target="match")], candidate_types=["set"])
    names = CypherNames(schema)
    assert names.label == {"set": "N_set", "match": "N_match"} and names.rel == {"delete": "R_delete"}


def test_local_llm_loads_after_kuzu_is_open(tmp_path):
    """xllamacpp imported after kuzu aborts the process; the backend imports them in a safe order."""
    import subprocess
    import sys

    code = ("from grasp.graph.backends import KuzuBackend\n"
            "from tests.conftest import write_toy\n"
            "from grasp.skb import read_skb\n"
            f"skb = read_skb(write_toy(__import__('pathlib').Path({str(tmp_path)!r}) / 'toy'))\n"
            f"KuzuBackend(skb, __import__('pathlib').Path({str(tmp_path)!r}) / 'kz', progress=False)\n"
            "import xllamacpp\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-500:]


def test_directed_hops_follow_the_stored_direction(tmp_path):
    """p1 is_a p0 is_a p2: from the anchor p0, a backward hop reaches what is a p0 (p1), a forward hop
    what p0 is (p2), an undirected hop both; on the in-memory engine and on Kùzu alike."""
    from grasp.graph.backends import KuzuBackend

    schema = Schema(name="dag", node_types={"process": NodeTypeSpec()}, candidate_types=["process"],
                    relations=[RelationSpec(name="is_a", source="process", target="process")])
    skb = SKB(schema, np.zeros(3, dtype=np.int16), ["p0", "p1", "p2"], [{}, {}, {}], np.array([1, 0], dtype=np.int32),
              np.array([0, 0], dtype=np.int16), np.array([0, 2], dtype=np.int32), fingerprint="dag")
    kz, mem, names = KuzuBackend(skb, tmp_path, buffer_pool_mb=64), MemoryExecutor(skb), CypherNames(schema)
    bindings = {"A": Binding("A", np.array([0]), np.array([1.0]))}
    for direction, expected in (("backward", [1]), ("forward", [2]), (None, [1, 2])):
        # the hop walks from the anchor A to T; "forward": A is the source, A -is_a-> T
        hop = {"from": "A", "rel": "is_a", "to_var": "T", "to_label": "process", "dir": direction}
        check = check_plan({"anchors": [{"var": "A", "text": "p0", "label": "process", "match_mode": "name"}],
                            "hops": [hop], "target": {"var": "T", "labels": ["process"]}}, schema)
        assert check.status == "valid" and check.plan.hops[0].direction == direction
        compiled = compile_plan(check.plan, bindings, names)
        assert ("->" in compiled.cypher or "<-" in compiled.cypher) == (direction is not None)
        for ids, _ in (mem.execute(check.plan, bindings), kz.run(compiled)):
            assert sorted(ids.tolist()) == expected, (direction, compiled.cypher)


def test_a_direction_the_types_already_fix_is_dropped(toy_skb):
    hop = {"from": "C", "rel": "on_chromosome", "to_var": "T", "to_label": "gene", "dir": "forward"}
    check = check_plan({"anchors": [{"var": "C", "text": "chromosome 2", "label": "chromosome", "match_mode": "name"}],
                        "hops": [hop], "target": {"var": "T", "labels": ["gene"]}}, toy_skb.schema)
    assert check.status == "repaired" and check.plan.hops[0].direction is None
    assert "direction 'forward' dropped ('on_chromosome' runs gene -> chromosome)" in check.repairs[0]


def test_a_node_returned_twice_is_ranked_once():
    """A database holding a node or edge twice (an interrupted load run again) must not rank a node twice."""
    from grasp.graph.backends import _rows_to_arrays

    ids, scores = _rows_to_arrays([(1, 0.5), (2, 0.3), (1, 0.9)])
    assert ids.tolist() == [1, 2] and scores.tolist() == [0.9, 0.3]


def test_the_row_loop_without_pandas_equals_the_columnar_fetch(rand_graph, monkeypatch):
    """Kùzu's result comes back through get_as_df; without pandas, row by row: the same arrays."""
    skb, kz = rand_graph
    result = compare_with_memory(skb, kz, plans=15, seed=3)
    assert result["mismatch"] is None and result["nonempty"] > 3
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    again = compare_with_memory(skb, kz, plans=15, seed=3)
    assert again["mismatch"] is None and again["nonempty"] == result["nonempty"]


def test_ladybug_equals_the_in_memory_executor_on_random_plans():
    """LadybugDB, Kùzu's maintained fork, runs the same compiled Cypher to the same scores (in a process of its
    own: the two engines register the same native types)."""
    import importlib.util
    import json
    import subprocess
    import sys

    from tests.conftest import REPO, skip_unless_ci

    if importlib.util.find_spec("ladybug") is None:
        skip_unless_ci("ladybug (dev extra) is not installed")
    out = subprocess.run([sys.executable, str(REPO / "tests" / "ladybug_check.py")], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["mismatch"] is None, result["mismatch"]
    assert result["plans"] == 40 and result["nonempty"] > 5 and result["path"] == "ladybug-v1"
    assert not result["kuzu_loaded"]


def test_the_two_embedded_engines_refuse_to_share_a_process(toy_skb, tmp_path):
    import sys

    from grasp.errors import ConfigError
    from grasp.graph.backends import LadybugBackend

    assert "kuzu" in sys.modules  # this module runs Kùzu
    with pytest.raises(ConfigError, match="cannot share a process"):
        LadybugBackend(toy_skb, tmp_path)


def test_kuzu_prepares_each_query_text_once(toy_skb, tmp_path, monkeypatch):
    """Kùzu 0.11 keeps memory behind every statement it prepares (``execute(text, params)`` prepares one), so a
    service grew ~50 KB per graph query: the backend prepares a text once per parameter types and reuses it."""
    from grasp.graph.backends import KuzuBackend
    from grasp.graph.compiler import CompiledQuery

    kz = KuzuBackend(toy_skb, tmp_path, buffer_pool_mb=64)
    text = "MATCH (g:gene) WHERE g.id IN $ids RETURN g.id AS id, $w AS score"
    first = kz.run(CompiledQuery(text, {"ids": [0, 1], "w": 0.5}))
    statement = kz._statements[next(iter(kz._statements))]
    again = kz.run(CompiledQuery(text, {"ids": [2, 8], "w": 0.25}))
    assert len(kz._statements) == 1 and kz._statements[next(iter(kz._statements))] is statement
    assert first[0].tolist() == [0, 1] and first[1].tolist() == [0.5, 0.5]
    assert again[0].tolist() == [2, 8] and again[1].tolist() == [0.25, 0.25]  # new values, not the first ones
    kz.run(CompiledQuery(text, {"ids": [0], "w": 1}))  # an int where a float was: a statement of its own
    assert len(kz._statements) == 2
    monkeypatch.setattr(KuzuBackend, "MAX_STATEMENTS", 2)
    kz.run(CompiledQuery(text.replace("$w AS", "$w + 0.0 AS"), {"ids": [1], "w": 0.5}))
    assert len(kz._statements) == 2  # the least recently used dropped
    with pytest.raises(GraspError, match="rejected the compiled query"):
        kz.run(CompiledQuery("MATCH (g:nosuchlabel) RETURN g.id AS id, 1.0 AS score", {}))
