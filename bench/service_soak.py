"""Memory under sustained load: one `grasp serve`, N clients for M minutes, a mix of the KB's own queries (plans
cached) and queries nobody asked before (each a KB query with words appended: a plan-cache miss, a new query vector,
new candidate pools); the server's RSS and anonymous RSS sampled every few seconds. Prints RSS per minute and the
growth after warm-up; the target is RSS flat within 10 % after warm-up.

    python bench/service_soak.py [--skb DIR] [--clients 4] [--minutes 30] [--warmup-minutes 3] [--new-share 0.3]
        [--set KEY=VALUE ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from service_load import wait_ready  # noqa: E402

from grasp.packaged import DEMO_SKB  # noqa: E402

WORDS = ("library", "tool", "fast", "small", "python", "gene", "protein", "disease", "parser", "server", "network",
         "image", "audio", "database", "test", "framework", "binding", "daemon", "plugin", "theme", "font", "driver")


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of a process, in KiB, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["RssAnon"].split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", type=Path, default=DEMO_SKB)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup-minutes", type=float, default=3)
    ap.add_argument("--new-share", type=float, default=0.3, help="share of requests that are new queries")
    ap.add_argument("--sample-s", type=float, default=5)
    ap.add_argument("--port", type=int, default=8767)
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="config override for the server (default: plans replayed from the cache, no LLM)")
    ap.add_argument("--json", type=Path, help="write the samples and the summary here")
    args = ap.parse_args()
    overrides = args.overrides or ["planner.kind=cache", "planner.on_miss=no_trade"]
    url = f"http://127.0.0.1:{args.port}"
    cmd = [sys.executable, "-m", "grasp.cli", "-q", *[x for o in overrides for x in ("--set", o)], "serve",
           "--skb", str(args.skb), "--method", args.method, "--port", str(args.port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    queries = [json.loads(line)["query"] for line in open(args.skb / "qa" / "queries.jsonl", encoding="utf-8")]
    samples: list[tuple[float, int, int]] = []
    counts = {"ok": 0, "errors": 0}
    latencies: list[float] = []
    lock = threading.Lock()
    try:
        health = wait_ready(url, proc)
        t_start = time.time()
        stop = t_start + 60 * args.minutes

        def client(i: int) -> None:
            rng = random.Random(i)
            with httpx.Client(timeout=300) as c:
                while time.time() < stop:
                    q = rng.choice(queries)
                    if rng.random() < args.new_share:
                        q = f"{q} {' '.join(rng.sample(WORDS, 2))} {rng.randrange(10**6)}"
                    t0 = time.perf_counter()
                    try:
                        ok = c.post(url + "/search", json={"query": q, "k": 10}).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    with lock:
                        counts["ok" if ok else "errors"] += 1
                        latencies.append(1000 * (time.perf_counter() - t0))

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
        for t in threads:
            t.start()
        while time.time() < stop:
            samples.append((time.time() - t_start, *memory_kb(proc.pid)))
            time.sleep(args.sample_s)
        for t in threads:
            t.join(timeout=600)
        samples.append((time.time() - t_start, *memory_kb(proc.pid)))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    warm = [s for s in samples if s[0] >= 60 * args.warmup_minutes]
    base, last = warm[0], warm[-1]
    peak = max(s[1] for s in warm)
    growth = 100 * (last[1] - base[1]) / base[1]
    summary = {"kb": health["kb"], "method": health["method"], "clients": args.clients, "minutes": args.minutes,
               "new_share": args.new_share, "requests": counts["ok"] + counts["errors"], "errors": counts["errors"],
               "p50_ms": float(np.percentile(latencies, 50)), "rss_start_mb": samples[0][1] / 1024,
               "rss_after_warmup_mb": base[1] / 1024, "rss_end_mb": last[1] / 1024, "rss_peak_mb": peak / 1024,
               "anon_after_warmup_mb": base[2] / 1024, "anon_end_mb": last[2] / 1024,
               "growth_after_warmup_pct": growth, "overrides": overrides}
    print(f"{summary['kb']}, method {summary['method']}: {args.clients} clients x {args.minutes:g} min, "
          f"{100 * args.new_share:.0f} % new queries; {summary['requests']} requests, {summary['errors']} errors, "
          f"p50 {summary['p50_ms']:.0f} ms\n")
    print("| minute | RSS MB | anonymous RSS MB |")
    print("|---:|---:|---:|")
    for minute in range(int(args.minutes) + 1):
        at = [s for s in samples if minute * 60 <= s[0] < (minute + 1) * 60] or samples[-1:]
        print(f"| {minute} | {at[-1][1] / 1024:.0f} | {at[-1][2] / 1024:.0f} |")
    print(f"\nafter warm-up ({args.warmup_minutes:g} min): RSS {base[1] / 1024:.0f} -> {last[1] / 1024:.0f} MB "
          f"({growth:+.1f} %), peak {peak / 1024:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
