"""STaRK at full size on this machine: a synthetic SKB in STaRK's processed format, then every step of
indexing and answering, one process per step, with its wall time and peak RSS.

    python bench/stark_synthetic.py --dataset amazon|mag|prime --scale F --out DIR [--seed S]
           [--queries N] [--words W] [--measure] [--random-vectors] [--steps generate,index,...]

Without --measure it only writes the SKB (grasp.testing.stark_synthetic: processed/, qa/, plans.jsonl).
With --measure it runs, each in its own process and each only if the one before succeeded:

    generate   write the SKB (skipped when DIR already holds one with these settings)
    load       read it through the STaRK reader (what every later step pays first)
    index      grasp index --method bm25 --method graph --method mfar (Kùzu, Stage-1 vectors, mFAR fields)
    import     grasp plans import plans.jsonl (the generator's plans: no LLM is needed)
    graph      grasp eval --method graph --split test
    tune       grasp tune fusion --split val
    fused      grasp eval --method fused --split test

and prints one row per step: seconds, peak RSS (the step's own process), the peak of its anonymous memory (RSS
without memory-mapped file pages, sampled), and its result. The index cache,
the logs and bench.json go to --work (default DIR-work beside DIR; never the user's cache). Embedding a million long documents with MiniLM takes hours on
2 cores: --random-vectors fills the embedding store with seeded random unit vectors through the store's own
writer (documents are still rendered, queries still encoded by MiniLM), so that everything but the encoder
is measured at full size; the encoder's own rate is the separate ``encoder`` row (documents/s on 2,000 of
the SKB's documents, and the hours the whole SKB would take). Retrieval quality with random vectors means
nothing, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

STEPS = ["generate", "load", "index", "import", "graph", "tune", "fused"]


def _random_vector_encoder():
    """Patch the workspace so that document vectors are seeded random unit vectors (queries stay MiniLM)."""
    import numpy as np

    import grasp.workspace as ws_module
    from grasp.encode.encoder import Encoder, build_encoder

    class RandomDocumentVectors(Encoder):
        def __init__(self, cfg) -> None:
            self._real = build_encoder(cfg)  # encodes the queries, and says the model id and dimension
            self.model_id, self.dim = self._real.model_id, self._real.dim
            self._rng = np.random.default_rng(0)

        def encode(self, texts, *, progress=False, desc="encoding"):
            x = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
            return x / np.linalg.norm(x, axis=1, keepdims=True)

        def encode_queries(self, texts, *, progress=False):
            return self._real.encode_queries(texts, progress=progress)

    ws_module.build_encoder = RandomDocumentVectors
    print("bench: document vectors are seeded random unit vectors (--random-vectors): timings are real, "
          "retrieval quality is not", file=sys.stderr)


def step_main(argv: list[str]) -> None:
    """Run inside a step's own process: ``_step [--random-vectors] NAME ARGS``."""
    if argv and argv[0] == "--random-vectors":
        _random_vector_encoder()
        argv = argv[1:]
    name, rest = argv[0], argv[1:]
    if name == "generate":
        from grasp.testing.stark_synthetic import generate

        s = generate(**json.loads(rest[0]))
        print(f"{s['nodes']:,} nodes, {s['edge_rows']:,} edge rows, {s['queries']} queries")
    elif name == "load":
        from grasp.skb import load_skb

        t0 = time.perf_counter()
        skb = load_skb(rest[0])
        print(f"{skb!r} in {time.perf_counter() - t0:.0f} s")
    elif name == "encoder":
        encoder_rate(Path(rest[0]))
    else:
        from grasp.cli import main

        main(rest)


def encoder_rate(processed: Path, n: int = 2000) -> None:
    """MiniLM documents per second on ``n`` of the SKB's candidate documents, and the whole SKB's hours."""
    from grasp.config import GraspConfig
    from grasp.workspace import Workspace
    ws = Workspace.open(processed, GraspConfig(), progress=False)
    ids = ws.skb.candidate_ids
    texts = [ws.layout.document(ws.skb, int(i)) for i in ids[:: max(1, ids.size // n)][:n]]
    enc = ws.encoder
    enc.encode(texts[:64])
    t0 = time.perf_counter()
    enc.encode(texts)
    rate = len(texts) / (time.perf_counter() - t0)
    print(f"{rate:.1f} docs/s; all {ids.size:,} candidate documents: {ids.size / rate / 3600:.1f} h, "
          f"plus {ws.skb.num_nodes:,} names")


def _anon_gib(pid: int) -> float | None:
    """The process's anonymous resident memory (Linux: RssAnon), without memory-mapped file pages (index files
    the kernel can drop and reread), which the peak RSS counts too."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError):
        return None
    return None


def run_step(cmd: list[str], log: Path) -> tuple[float, float, float | None, int, str]:
    """(seconds, peak RSS in GiB, peak anonymous RSS sampled every 0.2 s (None off Linux), exit status, last output
    line) of one step in its own process."""
    t0 = time.perf_counter()
    anon: float | None = None
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = _anon_gib(proc.pid)
            anon = now if anon is None else max(anon, now or 0.0)
            time.sleep(0.2)
    seconds = time.perf_counter() - t0
    lines = [x for x in log.read_text(errors="replace").replace("\r", "\n").splitlines() if x.strip()]
    return seconds, usage.ru_maxrss / 2**20, anon, os.waitstatus_to_exitcode(status), (lines[-1] if lines else "")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_step":
        step_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True, choices=["amazon", "mag", "prime"])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--words", type=int, help="mean words of text per candidate (default: the dataset's)")
    ap.add_argument("--measure", action="store_true", help="run and time every step (see above)")
    ap.add_argument("--random-vectors", action="store_true", help="random document vectors instead of MiniLM's")
    ap.add_argument("--steps", help=f"comma-separated subset of {','.join(STEPS)},encoder")
    ap.add_argument("--work", type=Path, help="the index cache, logs and bench.json (default: OUT-work beside OUT)")
    args = ap.parse_args()

    gen = {"dataset": args.dataset, "out": str(args.out), "scale": args.scale, "seed": args.seed,
           "n_queries": args.queries, "words": args.words}
    if not args.measure:
        step_main(["generate", json.dumps(gen)])
        return
    steps = args.steps.split(",") if args.steps else [*STEPS, "encoder"]
    work = args.work or args.out.with_name(args.out.name + "-work")
    processed, cache, logs = args.out / "processed", work / "cache", work / "logs"
    me = [sys.executable, str(Path(__file__).resolve()), "_step"] + (["--random-vectors"] if args.random_vectors else [])
    grasp = [*me, "cli", "--cache-dir", str(cache), "--set", "planner.kind=cache", "--set", "planner.on_miss=no_trade"]
    skb = ["--skb", str(processed)]
    commands = {
        "generate": [*me, "generate", json.dumps(gen)],
        "load": [*me, "load", str(processed)],
        "index": [*grasp, "index", *skb, "--method", "bm25", "--method", "graph", "--method", "mfar"],
        "import": [*grasp, "plans", "import", str(args.out / "plans.jsonl"), *skb],
        "graph": [*grasp, "-q", "eval", *skb, "--method", "graph", "--split", "test"],
        "tune": [*grasp, "-q", "tune", "fusion", *skb, "--split", "val"],
        "fused": [*grasp, "-q", "eval", *skb, "--method", "fused", "--split", "test"],
        "encoder": [sys.executable, str(Path(__file__).resolve()), "_step", "encoder", str(processed)],
    }
    summary = args.out / "synthetic.json"
    if "generate" in steps and summary.exists():
        old = json.loads(summary.read_text())
        if all(old.get(k) == gen[k] for k in ("dataset", "scale", "seed")) and old.get("queries") == args.queries:
            steps.remove("generate")
            print(f"generate: skipped ({args.out} holds this SKB)")
    logs.mkdir(parents=True, exist_ok=True)
    print(f"{args.dataset} at scale {args.scale} in {args.out}" + (" (random document vectors)" if args.random_vectors else ""))
    print("| step | seconds | peak RSS GiB | of it anonymous, peak GiB | result |\n|---|---:|---:|---:|---|")
    rows = []
    for name in steps:
        seconds, rss, anon, code, last = run_step(commands[name], logs / f"{name}.log")
        rows.append({"step": name, "seconds": round(seconds, 1), "peak_rss_gib": round(rss, 2),
                     "peak_anon_gib": None if anon is None else round(anon, 2), "exit": code, "result": last[-160:]})
        print(f"| {name} | {seconds:.0f} | {rss:.2f} | {'-' if anon is None else f'{anon:.2f}'} | "
              f"{'ok' if code == 0 else f'FAILED ({code})'}: {last[-120:]} |", flush=True)
        if code != 0:
            print(f"stopped: see {logs / (name + '.log')}")
            break
    (work / "bench.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                     "steps": rows}, indent=1))


if __name__ == "__main__":
    main()
