"""Run in a process of its own (Kùzu and LadybugDB cannot share one): random plans, including directed hops and
branches meeting below the target, on LadybugDB and on the in-memory executor; prints one JSON line."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grasp.graph.backends import LadybugBackend  # noqa: E402
from tests.random_plans import compare_with_memory, random_skb  # noqa: E402


def main() -> None:
    skb = random_skb(7)
    with tempfile.TemporaryDirectory() as tmp:
        lb = LadybugBackend(skb, Path(tmp), buffer_pool_mb=512)
        result = compare_with_memory(skb, lb, plans=40, seed=0)
        lb.close()
        print(json.dumps({**result, "path": lb.path.name, "kuzu_loaded": "kuzu" in sys.modules}))


if __name__ == "__main__":
    main()
