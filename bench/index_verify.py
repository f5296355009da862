"""What checking the indexes at open costs a process start: every index of a KB's cache verified against the sha256
recorded when it was built, once in full (no stamp: the first start after a build or a change, and every start on a
read-only cache) and once with the stat stamps the full check leaves (every later start). Files are read from the
page cache after the first pass.

    python bench/index_verify.py --skb DIR [--skb DIR ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from grasp import inventory
from grasp.config import load_config
from grasp.storage import _stamp_path, holds
from grasp.workspace import Workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", type=Path, action="append", required=True)
    args = ap.parse_args()
    print("| KB | indexes | MB | full check s | stamped check ms | stamped / full |")
    print("|---|---:|---:|---:|---:|---:|")
    for skb in args.skb:
        ws = Workspace.open(skb, load_config(None, []), progress=False)
        entries = [e for e in inventory.indexes(ws.cache_dir) if e.sha256]
        exclude = {e.path: frozenset({"complete.json"}) if e.label.startswith("bm25") else frozenset() for e in entries}
        size = sum(p.stat().st_size for e in entries for p in ([e.path] if e.path.is_file() else e.path.rglob("*"))
                   if p.is_file())
        for e in entries:  # warm the page cache, so both passes read memory
            holds(e.path, e.sha256, exclude=exclude[e.path])
        for e in entries:
            _stamp_path(e.path).unlink(missing_ok=True)
        t0 = time.perf_counter()
        full = all(holds(e.path, e.sha256, exclude=exclude[e.path]) for e in entries)
        t_full = time.perf_counter() - t0
        t0 = time.perf_counter()
        stamped = all(holds(e.path, e.sha256, exclude=exclude[e.path]) for e in entries)
        t_stamped = time.perf_counter() - t0
        assert full and stamped, "an index changed since it was built"
        print(f"| {ws.skb.name} | {len(entries)} | {size / 2**20:.0f} | {t_full:.2f} | {1000 * t_stamped:.1f} | "
              f"{t_stamped / t_full:.4f} |")


if __name__ == "__main__":
    main()
