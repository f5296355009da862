"""The three stages end to end on the toy SKB through the CLI: plans (fake LLM endpoint), graph,
fusion tuned on a split, reranker trained and its final fusion tuned, then every method evaluated."""

from __future__ import annotations

import json

import pytest

from grasp.cli import main
from tests.fake_llm import FakeChatServer
from tests.integration.test_planner import GOOD

pytestmark = pytest.mark.slow


def test_all_stages(toy_dir, tmp_path, capsys):
    with FakeChatServer([GOOD]) as srv:
        base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "planner.kind=openai", "--set", "planner.format=flat",
                "--set", f"planner.base_url={srv.url}", "--set", "planner.model=fake", "--set", "graph.engine=memory",
                "--set", "reranker.train.train_split=test", "--set", "reranker.train.val_split=test", "--set", "reranker.train.epochs=1",
                "--set", "reranker.train.global_batch=2", "--set", "reranker.train.micro_batch=1", "--set", "reranker.train.group_size=4",
                "--set", "reranker.train.hard_negatives=5", "--set", "reranker.train.lora_r=4", "--set", "reranker.train.lora_alpha=8",
                "--set", "reranker.max_length=64", "--set", "reranker.train.lr=0.001"]
        skb = ["--skb", str(toy_dir)]
        main([*base, "tune", "fusion", *skb, "--split", "test", "--dense-method", "dense"])
        main([*base, "tune", "rerank", *skb, "--zero-shot", "--split", "test"])
        main([*base, "train", "reranker", *skb])
        main([*base, "tune", "rerank", *skb, "--split", "test"])
        capsys.readouterr()
        # the one scripted plan (genes on chromosome 2, rescored by "sodium channel") answers only query 1 at rank 1
        # and query 3 (KCNQ2) at rank 3; the fusion and the final fusions, tuned on these same queries, answer all
        expected = {"graph": (0.25, 1 / 3), "fused": (1.0, 1.0), "grasp-zs": (1.0, 1.0), "grasp": (1.0, 1.0)}
        for method in ("graph", "fused", "grasp-zs", "grasp"):
            out = tmp_path / f"{method}.json"
            main([*base, "eval", *skb, "--method", method, "--output-json", str(out)])
            rep = json.loads(out.read_text())
            assert rep["n"] == 4 and (rep["hit@1"], rep["mrr"]) == expected[method], (method, rep)
        main([*base, "report", *skb, "--split", "test", "--out", str(tmp_path / "report")])
        check_zero_shot_choice(base, skb, tmp_path / "c", capsys)
    md = (tmp_path / "report" / "ablation.md").read_text()
    assert "+ trained reranker (GRASP)" in md and "graph only (Stage 1)" in md
    assert (tmp_path / "report" / "ablation.png").stat().st_size > 1000
    # the sensitivity figures: final-fusion surfaces (both tuned above), the training curve (validated at its end)
    assert "## Sensitivity" in md and "of the static (w, k) grid lies within one point of its best" in md
    # the plan confidence fitted by tune fusion, judged on the report's split
    # (two test queries, one right: too few to hold one out, so the validation row says it is in sample)
    assert "## Plan confidence" in md and "| test | 2 | 50.0 | 1.000 |" in md and "| test (in sample) | 2 |" in md
    for png in ("final-fusion-trained.png", "final-fusion-zero-shot.png", "reranker-training.png", "reliability.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000, png


def test_grasp_needs_a_trained_reranker_first(toy_dir, tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "grasp.cli", "--cache-dir", str(tmp_path / "c"), "eval", "--skb",
                        str(toy_dir), "--method", "grasp"], capture_output=True, text=True)
    assert p.returncode == 2 and "run `grasp train reranker` first" in p.stderr


RULES = ("static", "static-flat", "bucketed", "bucketed-flat")  # the final fusion's selection rules


def check_zero_shot_choice(base, skb, cache, capsys):
    """reranker.zero_shot=auto: the zero-shot final fusion was tuned with both zero-shot rerankers and records
    the one cross-validation chose (setting and manifest); the trained one, tuned over grasp-zs, records that
    setting's checksum, so retuning grasp-zs with the other reranker makes it stale, and a configuration naming
    a reranker the setting was not tuned with does not load it."""
    from grasp.artifacts import checksum
    from grasp.rerank.zero_shot import ZERO_SHOT_RERANKERS

    (ws,) = (cache / "skb").iterdir()
    zs_path = ws / "rerank-fusion-zero-shot.json"
    zs = json.loads(zs_path.read_text())
    assert zs["zero_shot"] in ZERO_SHOT_RERANKERS and zs["rule"].startswith(zs["zero_shot"] + ":")
    assert sorted(zs["cv"]) == sorted(f"{kind}:{rule}@{d}" for kind in ("bi-encoder", "bm25", "hybrid")
                                      for rule in RULES for d in (30, 100))
    manifest = json.loads((ws / "rerank-fusion-zero-shot.json.manifest.json").read_text())
    assert manifest["config"]["reranker.zero_shot"] == zs["zero_shot"]
    trained = json.loads((ws / "rerank-fusion-trained.json.manifest.json").read_text())
    assert json.loads((ws / "rerank-fusion-trained.json").read_text())["upstream"] == "grasp-zs"
    assert trained["config"]["grasp-zs.sha256"] == checksum(zs_path)
    other = "bm25" if zs["zero_shot"] == "bi-encoder" else "bi-encoder"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*base, "--set", f"reranker.zero_shot={other}", "eval", *skb, "--method", "grasp-zs"])
    assert f"reranker.zero_shot: made with '{zs['zero_shot']}'" in capsys.readouterr().err
    main([*base, "--set", f"reranker.zero_shot={other}", "tune", "rerank", *skb, "--zero-shot", "--split", "test"])
    retuned = json.loads(zs_path.read_text())
    assert retuned["zero_shot"] == other and set(retuned["cv"]) == {f"{rule}@{d}" for rule in RULES for d in (30, 100)}
    with pytest.raises(SystemExit):
        main([*base, "eval", *skb, "--method", "grasp"])
    assert "grasp-zs.sha256: made with" in capsys.readouterr().err
