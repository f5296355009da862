"""Stage-1 execution: the compiled Cypher on Kùzu and the in-memory executor give the paper's scores."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from grasp.graph.compiler import CypherNames, compile_plan
from grasp.graph.linking import Binding, keep_top
from grasp.graph.memory import MemoryExecutor
from grasp.plan.model import Plan
from grasp.plan.validate import check_plan
from grasp.skb import SKB, NodeTypeSpec, RelationSpec, Schema

kuzu = pytest.importorskip("kuzu")  # conftest has loaded xllamacpp first: the other order aborts the process


def random_skb(seed: int, n: int = 300, e: int = 1500) -> SKB:
    rng = np.random.default_rng(seed)
    types = ["a", "b", "c"]
    rels = [RelationSpec(name="ab", source="a", target="b"), RelationSpec(name="bc", source="b", target="c"),
            RelationSpec(name="aa", source="a", target="a"), RelationSpec(name="ac", source="a", target="c"),
            RelationSpec(name="link", source="b", target="b"), RelationSpec(name="link", source="c", target="c")]
    schema = Schema(name="rand", node_types={t: NodeTypeSpec() for t in types}, relations=rels, candidate_types=types)
    node_type = rng.integers(0, 3, size=n).astype(np.int16)
    node_type[:3] = [0, 1, 2]
    src, rel, dst = [], [], []
    by_type = [np.flatnonzero(node_type == t) for t in range(3)]
    hub = by_type[0][0]
    for _ in range(e):
        r = int(rng.integers(0, len(rels)))
        s_t, d_t = types.index(rels[r].source), types.index(rels[r].target)
        s = hub if (s_t == 0 and rng.random() < 0.15) else rng.choice(by_type[s_t])
        src.append(s)
        rel.append(r)
        dst.append(rng.choice(by_type[d_t]))
    return SKB(schema, node_type, [f"n{i}" for i in range(n)], [{} for _ in range(n)],
               np.array(src, dtype=np.int32), np.array(rel, dtype=np.int16), np.array(dst, dtype=np.int32),
               fingerprint=f"rand{seed}")


def random_plan(skb: SKB, rng) -> tuple[Plan, dict[str, Binding]]:
    """A random tree of 1-3 branches into T, each a chain of 1-2 hops ending at an anchor, sometimes with a
    second branch joining the chain below T and with directed hops on same-type relations."""
    schema = skb.schema
    t_label = str(rng.choice(["a", "b", "c"]))
    anchors, hops, bindings = [], [], {}
    counter = iter(range(100))

    def bind(var, label):
        ids = skb.nodes_of_type(label)
        pick = rng.choice(ids, size=min(len(ids), int(rng.integers(1, 6))), replace=False)
        if rng.random() < 0.3:
            pick = np.append(pick, skb.nodes_of_type("a")[0]) if label == "a" else pick  # the hub
        pick = np.unique(pick)
        bindings[var] = Binding(var, pick, np.round(rng.uniform(0.3, 1.0, size=pick.size), 3))
        anchors.append({"var": var, "text": f"text {var}", "label": label, "match_mode": "name"})

    def neighbours_types(label):
        return [(r.name, r.target if r.source == label else r.source) for r in schema.relations
                if label in (r.source, r.target)]

    for _ in range(int(rng.integers(1, 4))):
        prev_var, prev_label = "T", t_label
        for depth in range(int(rng.integers(1, 3))):
            rel, lab = neighbours_types(prev_label)[int(rng.integers(0, len(neighbours_types(prev_label))))]
            var = f"V{next(counter)}"
            hop = {"from": var, "rel": rel, "to_var": prev_var, "to_label": prev_label}
            if lab == prev_label and rng.random() < 0.6:  # a same-type relation: often directed
                hop["dir"] = str(rng.choice(["forward", "backward"]))
            hops.append(hop)
            if depth == 0 and rng.random() < 0.3:  # a second branch joining at this intermediate variable
                rel2, lab2 = neighbours_types(lab)[int(rng.integers(0, len(neighbours_types(lab))))]
                side = f"V{next(counter)}"
                hops.append({"from": side, "rel": rel2, "to_var": var, "to_label": lab})
                bind(side, lab2)
            prev_var, prev_label = var, lab
            if depth == 0 and rng.random() < 0.2:
                bind(var, lab)  # an anchor in the middle of a chain
        if prev_var not in bindings:
            bind(prev_var, prev_label)
    if rng.random() < 0.2:
        bind("T", t_label)
    raw = {"anchors": anchors, "hops": hops[::-1], "target": {"var": "T", "labels": [t_label], "relevance_text": ""},
           "risk_level": "normal"}
    check = check_plan(raw, schema)
    assert check.usable, (check.reason, raw)
    return check.plan, bindings


@pytest.fixture(scope="module")
def rand_graph(tmp_path_factory):
    from grasp.graph.backends import KuzuBackend

    skb = random_skb(7)
    return skb, KuzuBackend(skb, tmp_path_factory.mktemp("kuzu"), buffer_pool_mb=128)


def test_memory_executor_equals_cypher_on_random_plans(rand_graph):
    skb, kz = rand_graph
    mem = MemoryExecutor(skb)
    names = CypherNames(skb.schema)
    rng = np.random.default_rng(0)
    nonempty = directed = meeting = 0
    for _ in range(60):
        plan, bindings = random_plan(skb, rng)
        ids_m, s_m = mem.execute(plan, bindings)
        q = compile_plan(plan, bindings, names)
        ids_k, s_k = kz.run(q)
        om, ok = np.argsort(ids_m), np.argsort(ids_k)
        assert np.array_equal(ids_m[om], ids_k[ok]), q.cypher
        assert np.allclose(s_m[om], s_k[ok]), q.cypher
        nonempty += ids_m.size > 0
        directed += any(h.direction for h in plan.hops)
        degree = Counter(v for h in plan.hops for v in (h.from_var, h.to_var))
        meeting += any(d >= 3 and v != "T" for v, d in degree.items())  # branches joining below the target
    assert nonempty > 20 and directed > 10 and meeting > 5  # the comparison is not vacuous


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
