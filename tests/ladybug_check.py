"""Run in a process of its own (Kùzu and LadybugDB cannot share one): random plans, including directed hops and
branches meeting below the target, on LadybugDB and on the in-memory executor; prints one JSON line."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grasp.graph.backends import LadybugBackend  # noqa: E402
from grasp.graph.compiler import CypherNames, compile_plan  # noqa: E402
from grasp.graph.memory import MemoryExecutor  # noqa: E402
from tests.random_plans import random_plan, random_skb  # noqa: E402


def main() -> None:
    skb = random_skb(7)
    with tempfile.TemporaryDirectory() as tmp:
        lb = LadybugBackend(skb, Path(tmp), buffer_pool_mb=512)
        mem, names, rng = MemoryExecutor(skb), CypherNames(skb.schema), np.random.default_rng(0)
        checked = nonempty = 0
        for _ in range(40):
            plan, bindings = random_plan(skb, rng)
            ids_m, s_m = mem.execute(plan, bindings)
            q = compile_plan(plan, bindings, names)
            ids_l, s_l = lb.run(q)
            om, ol = np.argsort(ids_m), np.argsort(ids_l)
            if not (np.array_equal(ids_m[om], ids_l[ol]) and np.allclose(s_m[om], s_l[ol])):
                print(json.dumps({"ok": False, "cypher": q.cypher}))
                return
            checked += 1
            nonempty += ids_m.size > 0
        lb.close()
        print(json.dumps({"ok": True, "plans": checked, "nonempty": nonempty, "path": lb.path.name,
                          "kuzu_loaded": "kuzu" in sys.modules}))


if __name__ == "__main__":
    main()
