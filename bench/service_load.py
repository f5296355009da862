"""Load on the REST service: C concurrent clients on loopback for D seconds, each posting queries
from the KB's query file to /search; counts errors and prints latency percentiles, next to one
client alone measured in the same run (the baseline: the service answers one query at a time,
so the 20-client latency is mostly queueing).

    python bench/service_load.py [--skb DIR] [--method auto] [--clients 20] [--seconds 60] [--port 8765]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from grasp.packaged import DEMO_SKB  # noqa: E402

DEMO = DEMO_SKB


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 600) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {proc.stderr.read()[-2000:]}")
        try:
            return httpx.get(url + "/health", timeout=2).json()
        except httpx.HTTPError:
            time.sleep(0.5)
    raise SystemExit("the server did not come up in time")


def hammer(url: str, queries: list[str], seconds: float, clients: int) -> tuple[list[float], int, int]:
    lat: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop = time.time() + seconds

    def client(i: int) -> None:
        with httpx.Client(timeout=120) as c:
            j = i
            while time.time() < stop:
                t0 = time.perf_counter()
                try:
                    r = c.post(url + "/search", json={"query": queries[j % len(queries)], "k": 10})
                    ok = r.status_code == 200 and r.json()["hits"] is not None
                except httpx.HTTPError:
                    ok = False
                dt = 1000 * (time.perf_counter() - t0)
                with lock:
                    lat.append(dt) if ok else errors.__setitem__(0, errors[0] + 1)
                j += clients

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors[0], len(lat) + errors[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", type=Path, default=DEMO)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    cmd = [sys.executable, "-m", "grasp.cli", "-q", "--set", "planner.kind=cache", "--set", "planner.on_miss=no_trade",
           "serve", "--skb", str(args.skb), "--method", args.method, "--port", str(args.port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        health = wait_ready(url, proc)
        queries = [json.loads(line)["query"] for line in open(args.skb / "qa" / "queries.jsonl", encoding="utf-8")]
        alone, err1, _ = hammer(url, queries, min(15.0, args.seconds), 1)
        lat, errors, total = hammer(url, queries, args.seconds, args.clients)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{health['kb']}, method {health['method']}: {args.clients} clients x {args.seconds:.0f} s on loopback\n")
    print("| load | requests | errors | req/s | p50 ms | p95 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, xs, errs, secs in (("1 client (baseline)", alone, err1, min(15.0, args.seconds)),
                                 (f"{args.clients} clients", lat, errors, args.seconds)):
        p = np.percentile(xs, [50, 95, 99]) if xs else [float("nan")] * 3
        print(f"| {name} | {len(xs) + errs} | {errs} | {len(xs) / secs:.1f} | {p[0]:.0f} | {p[1]:.0f} | {p[2]:.0f} |")
    if errors:
        raise SystemExit(f"{errors} of {total} requests failed")


if __name__ == "__main__":
    main()
