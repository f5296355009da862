"""`grasp prepare`: the recipe in one command, every step skipped when what it makes is there, so that a run
interrupted midway resumes where it stopped; a KB without labelled queries keeps its untuned defaults."""

from __future__ import annotations

import shutil

import pytest

import grasp.lab.train
from grasp import methods
from grasp.api import prepare
from grasp.cli import main
from grasp.config import load_config
from grasp.lab.prepare import STEP_NAMES, summary
from grasp.workspace import Workspace
from tests.fake_llm import FakeChatServer
from tests.integration.test_planner import GOOD

pytestmark = pytest.mark.slow

SMALL = ["planner.kind=openai", "planner.model=fake", "planner.format=flat", "graph.engine=memory",
         "mfar.train.train_split=test", "mfar.train.val_split=test", "mfar.train.epochs=1", "mfar.train.batch_size=2",
         "reranker.train.train_split=test", "reranker.train.val_split=test", "reranker.train.epochs=1",
         "reranker.train.global_batch=2", "reranker.train.micro_batch=1", "reranker.train.group_size=4",
         "reranker.train.hard_negatives=5", "reranker.train.lora_r=4", "reranker.train.lora_alpha=8",
         "reranker.max_length=64"]


def test_an_interrupted_prepare_resumes_where_it_stopped(toy_dir, tmp_path, monkeypatch):
    with FakeChatServer([GOOD]) as srv:
        overrides = [f"cache_dir={tmp_path / 'c'}", f"planner.base_url={srv.url}", *SMALL]
        first = prepare(toy_dir, overrides=overrides, until="tune-fusion", progress=False)
        assert [o.step for o in first] == list(STEP_NAMES[:6])
        assert [o.status for o in first] == ["ran", "ran", "skipped", "ran", "ran", "ran"]  # labelled: no synthesis
        assert all(o.wall_s > 0 for o in first if o.status == "ran")

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt
        monkeypatch.setattr(grasp.lab.train, "train_reranker", interrupted)
        with pytest.raises(KeyboardInterrupt):
            prepare(toy_dir, overrides=overrides, progress=False)
        monkeypatch.undo()

        heard = []
        rest = prepare(toy_dir, overrides=overrides, progress=False, on_step=heard.append)
    status = {o.step: o.status for o in rest}
    assert heard == rest and list(status) == list(STEP_NAMES)
    assert [status[s] for s in ("synthesize", "plans", "train-mfar", "tune-fusion")] == ["skipped"] * 4  # made before
    assert [status[s] for s in ("train-reranker", "tune-rerank-zero-shot", "tune-rerank", "index-reranker")] == ["ran"] * 4
    ws = Workspace.open(toy_dir, load_config(None, overrides), progress=False)
    assert methods.best_method(ws) == "grasp" and not methods.untuned(ws)["grasp"]
    lines = summary(ws)
    assert lines[0] == "auto: grasp" and "  fusion (fusion.json): made on labelled queries, test 2" in lines, lines


def test_a_kb_without_queries_is_prepared_on_synthetic_ones(toy_dir, tmp_path, capsys):
    shutil.rmtree(toy_dir / "qa")
    with FakeChatServer([GOOD]) as srv:
        base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", f"planner.base_url={srv.url}",
                "--set", "synth.n=40", *(x for o in SMALL if "split" not in o for x in ("--set", o))]
        main([*base, "prepare", "--skb", str(toy_dir)])
    out = capsys.readouterr().out
    assert "synthesize           ran" in out and "queries (train" in out
    for step in STEP_NAMES[3:]:
        assert f"{step:<20} ran" in out, step
    assert "auto: grasp" in out and "fusion (fusion.json): made on synthetic queries, val" in out
    # the plans were made with the worked examples synthesis chose: a new process replays them
    ws = Workspace.open(toy_dir, load_config(None, [f"cache_dir={tmp_path / 'c'}", "planner.kind=cache",
                                                    "planner.model=fake", "planner.format=flat"]), progress=False)
    assert ws.planner.builder.examples and all(ws.planner.cached(q.text) is not None for q in ws.queries(split="train"))


def test_without_train_and_val_queries_the_learning_steps_wait(toy_dir, tmp_path, capsys):
    """The toy's labelled queries are all test queries but one per split: with a split that has none, nothing is
    trained and the stages keep their defaults."""
    main(["-q", "--cache-dir", str(tmp_path / "c"), "--set", "mfar.train.val_split=nope", "prepare", "--skb",
          str(toy_dir), "--until", "train-mfar"])
    out = capsys.readouterr().out
    assert "synthesize           ran" not in out
    assert f"{'plans':<20} not possible: no nope queries in" in out and "auto: grasp-zs" in out
