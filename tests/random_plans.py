"""Random SKBs and random valid plans over them, for the engine-equality tests (no engine imported here:
a helper process that must load LadybugDB instead of Kùzu uses them too)."""

from __future__ import annotations

import numpy as np

from grasp.graph.linking import Binding
from grasp.plan.model import Plan
from grasp.plan.validate import check_plan
from grasp.skb import SKB, NodeTypeSpec, RelationSpec, Schema


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


def compare_with_memory(skb: SKB, backend, *, plans: int, seed: int) -> dict:
    """Run ``plans`` random plans on ``backend`` (a CypherBackend) and on the in-memory executor; the counts of
    what was compared, and the Cypher of the first plan whose ids or scores differ (None when all agree)."""
    from collections import Counter

    from grasp.graph.compiler import CypherNames, compile_plan
    from grasp.graph.memory import MemoryExecutor

    mem, names, rng = MemoryExecutor(skb), CypherNames(skb.schema), np.random.default_rng(seed)
    out = {"plans": 0, "nonempty": 0, "directed": 0, "meeting": 0, "mismatch": None}
    for _ in range(plans):
        plan, bindings = random_plan(skb, rng)
        ids_m, s_m = mem.execute(plan, bindings)
        q = compile_plan(plan, bindings, names)
        ids_b, s_b = backend.run(q)
        om, ob = np.argsort(ids_m), np.argsort(ids_b)
        if not (np.array_equal(ids_m[om], ids_b[ob]) and np.allclose(s_m[om], s_b[ob])):
            out["mismatch"] = q.cypher
            return out
        degree = Counter(v for h in plan.hops for v in (h.from_var, h.to_var))
        out["plans"] += 1
        out["nonempty"] += int(ids_m.size > 0)
        out["directed"] += int(any(h.direction for h in plan.hops))
        out["meeting"] += int(any(d >= 3 and v != "T" for v, d in degree.items()))  # branches joining below T
    return out
