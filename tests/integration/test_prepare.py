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
        assert [o.step for o in first] == list(STEP_NAMES[:5])
        assert [o.status for o in first] == ["ran"] * 5 and all(o.wall_s > 0 for o in first)

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
    assert [status[s] for s in ("plans", "train-mfar", "tune-fusion")] == ["skipped"] * 3  # made by the first run
    assert [status[s] for s in ("train-reranker", "tune-rerank-zero-shot", "tune-rerank", "index-reranker")] == ["ran"] * 4
    ws = Workspace.open(toy_dir, load_config(None, overrides), progress=False)
    assert methods.best_method(ws) == "grasp" and not methods.untuned(ws)["grasp"]
    lines = summary(ws)
    assert lines[0] == "auto: grasp" and "  fusion (fusion.json): made on test 2" in lines, "\n".join(lines)


def test_a_kb_without_labelled_queries_keeps_its_defaults(toy_dir, tmp_path, capsys):
    shutil.rmtree(toy_dir / "qa")
    main(["-q", "--cache-dir", str(tmp_path / "c"), "prepare", "--skb", str(toy_dir)])
    out = capsys.readouterr().out
    assert "validate             ran" in out and "index                ran" in out
    for step in STEP_NAMES[2:]:
        assert f"{step:<20} not possible: no labelled queries" in out, step
    assert "auto: grasp-zs" in out and "grasp-zs  ready, untuned: mFAR field weights (grasp train mfar)" in out
