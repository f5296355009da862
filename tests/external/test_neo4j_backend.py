"""The server backend (Neo4j 5 dialect over Bolt) against a real server: ArcadeDB, started
here on loopback with its Bolt plugin, which the official neo4j driver talks to."""

from __future__ import annotations

import pytest

from tests.conftest import BOLT_PASSWORD as PASSWORD
from tests.random_plans import compare_with_memory, random_skb


def _backend(uri, skb, db):
    from grasp.graph.backends import Neo4jBackend

    return Neo4jBackend(skb, uri, user="root", password=PASSWORD, database=db)


def test_server_backend_equals_memory_executor(bolt_server):
    skb = random_skb(11, n=150, e=600)
    backend = _backend(bolt_server, skb, "randgraph")
    result = compare_with_memory(skb, backend, plans=40, seed=3)  # directed hops and joining branches included
    assert result["mismatch"] is None, result["mismatch"]
    assert result["plans"] == 40 and result["nonempty"] > 8
    backend.close()


def test_server_backend_loads_once_and_reads_only(bolt_server, toy_skb):
    from grasp.errors import GraspError
    from grasp.graph.compiler import CompiledQuery

    backend = _backend(bolt_server, toy_skb, "toy")
    assert backend._loaded(toy_skb)
    with pytest.raises(GraspError, match="read-only"):  # refused before it reaches the server
        backend.run(CompiledQuery("MATCH (n:gene) DETACH DELETE n RETURN 1 AS id, 0.0 AS score"))
    ids, _ = backend.run(CompiledQuery("MATCH (n:gene) RETURN n.id AS id, 0.0 AS score"))
    assert sorted(ids.tolist()) == [0, 1, 2, 8]
    backend.close()


def _counts(backend, skb) -> tuple[dict[str, int], int]:
    with backend._session() as s:
        nodes = {t: s.run(f"MATCH (n:{backend.names.label[t]}) RETURN count(n) AS c").single()["c"]
                 for t in skb.schema.node_types}
        edges = s.run("MATCH (a)-[r]->(b) RETURN count(r) AS c").single()["c"]
    return nodes, edges


def test_an_interrupted_load_runs_again_without_duplicates(bolt_server, toy_skb):
    """A load interrupted before its completion marker (here: after every node and edge, the old loader's
    worst case, which doubled the graph on the next run) is cleared and run again: each node and edge once.
    A database holding another SKB's graph, or nodes grasp did not load, is refused."""
    from grasp.errors import GraspError

    backend = _backend(bolt_server, toy_skb, "toy")
    expected = ({t: int(c) for t, c in toy_skb.type_counts().items()}, int(toy_skb.num_edges))
    assert _counts(backend, toy_skb) == expected
    with backend._session() as s:  # the state an interruption just before the last step leaves
        s.run("MATCH (m:GraspMeta) DELETE m").consume()
        s.run("CREATE (m:GraspLoading {fingerprint: $f})", f=toy_skb.fingerprint).consume()
    assert not backend._loaded(toy_skb)
    backend.close()
    backend = _backend(bolt_server, toy_skb, "toy")
    assert backend._loaded(toy_skb) and _counts(backend, toy_skb) == expected
    assert backend._markers() == (toy_skb.fingerprint, None)
    with pytest.raises(GraspError, match="holds another SKB's graph"):
        _backend(bolt_server, random_skb(5, n=20, e=40), "toy")
    with backend._session() as s:
        s.run("MATCH (m:GraspMeta) DELETE m").consume()
    with pytest.raises(GraspError, match="holds nodes that grasp did not load"):
        _backend(bolt_server, toy_skb, "toy")
    backend.close()
