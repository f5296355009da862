"""A knowledge base nobody labelled: every stage that has an untuned default runs on it, so `auto` answers with the
three-stage pipeline and the graph branch; the switches that treat a prepared KB as new (no shipped artifacts, no
hand-written worked examples)."""

from __future__ import annotations

import shutil

import pytest

from grasp import methods
from grasp.api import Searcher
from grasp.artifacts import FUSION_SETTING
from grasp.config import GraspConfig, load_config
from grasp.fuse.retriever import FusionSetting
from grasp.packaged import DEMO_SKB
from grasp.rerank.zero_shot import UNTUNED_ZERO_SHOT
from grasp.workspace import Workspace
from tests.fake_llm import FakeChatServer
from tests.integration.test_planner import GOOD

pytestmark = pytest.mark.slow


def test_a_kb_with_no_queries_answers_with_the_graph_branch(toy_dir, tmp_path):
    shutil.rmtree(toy_dir / "qa")  # nobody labelled it
    with FakeChatServer([GOOD]) as srv:
        searcher = Searcher.open(toy_dir, overrides=[f"cache_dir={tmp_path / 'c'}", "planner.kind=openai",
                                                     f"planner.base_url={srv.url}", "planner.model=fake",
                                                     "planner.format=flat", "graph.engine=memory"])
        assert searcher.method == "grasp-zs"
        assert searcher.untuned == ["mFAR field weights (grasp train mfar)", "fusion (grasp tune fusion)",
                                    "final fusion (grasp tune rerank --zero-shot)"]
        assert any("untuned defaults" in n for n in searcher.notes)
        result = searcher.search("sodium channel genes on chromosome 2", k=5, explain=True)
    cfg = GraspConfig()
    graph = result.traces["graph"]
    assert graph.plan_status == "valid" and graph.n_cand == 3  # the toy's three genes on chromosome 2
    assert result.traces["fused"].mode == "static" and result.traces["fused"].rrf_k == cfg.fusion.rrf_k
    assert result.traces["fused"].weights == {"graph": cfg.fusion.w, "mfar": pytest.approx(1 - cfg.fusion.w)}
    final = result.traces["grasp-zs"]
    assert final.rrf_k == cfg.reranker.final_rrf_k and final.weights["reranker"] == cfg.reranker.final_w
    assert result.traces["reranker"].reranker == UNTUNED_ZERO_SHOT and result.traces["reranker"].depth == 30
    from_graph = [h for h in result.hits if h.stage_ranks["graph"] is not None]
    assert len(from_graph) == 3 and result.hits[0] in from_graph  # the graph's candidates lead
    if cfg.reranker.final_w == 0:  # no untuned reranker helped every KB: the fused ranking is served as it is
        assert [h.stage_ranks["fused"] for h in result.hits] == [1, 2, 3, 4, 5]


def test_readiness_and_the_untuned_parts(toy_dir, tmp_path):
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "c"), progress=False)
    ready = methods.readiness(ws)
    assert [m for m, missing in ready.items() if missing] == ["grasp"] and "grasp train reranker" in ready["grasp"]
    assert methods.best_method(ws) == "grasp-zs"
    untuned = methods.untuned(ws)
    assert untuned["bm25"] == [] and untuned["mfar"] == ["mFAR field weights (grasp train mfar)"]
    assert len(untuned["grasp-zs"]) == 3 and len(untuned["grasp"]) == 3 and untuned["graph"] == []
    drawing = Workspace(ws.skb, load_config(None, [f"cache_dir={tmp_path / 'c'}", "planner.draw_examples=true"]),
                        progress=False)
    assert methods.untuned(drawing)["graph"] == [methods.DRAWN_EXAMPLES_PART] and drawing.drawn_examples_path.exists()
    assert len(methods.untuned(drawing)["grasp-zs"]) == 4
    shipped = Workspace.open(DEMO_SKB, load_config(None, [f"cache_dir={tmp_path / 'c'}", "planner.draw_examples=true"]),
                             progress=False)
    assert methods.DRAWN_EXAMPLES_PART not in methods.untuned(shipped)["graph"]  # hand-written examples there
    ws.save_setting(FusionSetting("static", 20.0, w=0.3), data={"val": 4})  # a tuned fusion replaces the default
    assert "fusion (grasp tune fusion)" not in methods.untuned(ws)["fused"]
    assert methods.retriever(ws, "fused").setting.rrf_k == 20.0


def test_shipped_artifacts_can_be_switched_off(tmp_path):
    """The demo KB serves pkg's shipped stages; with artifacts.shipped=false it is a KB nobody prepared."""
    shipped = Workspace.open(DEMO_SKB, load_config(None, [f"cache_dir={tmp_path}"]), progress=False)
    assert shipped.artifact(FUSION_SETTING) is not None and methods.best_method(shipped) == "grasp"
    new = Workspace(shipped.skb, load_config(None, [f"cache_dir={tmp_path}", "artifacts.shipped=false"]),
                    progress=False)
    assert new.artifact(FUSION_SETTING) is None and methods.best_method(new) == "grasp-zs"
    assert methods.untuned(new)["grasp-zs"] and not methods.untuned(shipped)["grasp-zs"]


def test_the_planner_can_be_shown_no_worked_examples(tmp_path):
    ws = Workspace.open(DEMO_SKB, load_config(None, [f"cache_dir={tmp_path}", "planner.kind=cache"]), progress=False)
    bare = Workspace(ws.skb, load_config(None, [f"cache_dir={tmp_path}", "planner.kind=cache", "planner.examples=none"]),
                     progress=False)
    assert len(ws.planner.builder.examples) == 12 and bare.planner.builder.examples == []
    assert ws.planner.builder.hash != bare.planner.builder.hash  # plans made with examples are not replayed without


def test_the_planner_can_be_kept_from_the_hand_written_examples(tmp_path):
    """planner.examples=workspace: the KB's own examples (drawn from its train split, synthesized, or else drawn
    from the KB by templates), never the package's hand-written ones, so that a KB is planned without labels."""
    from grasp.plan.examples import write_examples
    from grasp.plan.prompt import read_examples

    config = [f"cache_dir={tmp_path}", "planner.kind=cache"]
    ws = Workspace.open(DEMO_SKB, load_config(None, config), progress=False)
    hand_written = ws.planner.builder.examples
    assert Workspace(ws.skb, load_config(None, [*config, "planner.examples=workspace"]),
                     progress=False).planner.builder.examples == []  # nothing synthesized yet: the schema alone
    own = Workspace(ws.skb, load_config(None, [*config, "planner.examples=workspace", "planner.draw_examples=true"]),
                    progress=False)
    drawn = own.planner.builder.examples  # or, asked for, queries drawn from the KB and worded by templates
    assert drawn == read_examples(own.drawn_examples_path) and len(drawn) == 12
    assert all(e.qid.startswith("d") for e in drawn) and not {e.query for e in drawn} & {e.query for e in hand_written}
    assert {len(e.plan["hops"]) for e in drawn} >= {0, 1, 2}  # the text-only shape beside the relational ones
    own.reset()
    assert own.planner.builder.examples == drawn  # drawn once, then read back
    write_examples(hand_written[:2], own.synth_examples_path)
    own.reset()
    assert own.planner.builder.examples == read_examples(own.synth_examples_path)
    assert len(own.planner.builder.examples) == 2
    ws.reset()
    assert ws.planner.builder.examples == hand_written  # auto: the hand-written ones win where they exist


def test_a_tuned_mfar_encoder_has_no_untuned_default(toy_dir, tmp_path):
    """With mfar.encoder_tuning=lora and no tuned encoder, mFAR and what builds on it cannot run (they are said not
    ready, instead of failing when built), and auto falls back to BM25."""
    ws = Workspace.open(toy_dir, load_config(None, [f"cache_dir={tmp_path}", "mfar.encoder_tuning=lora"]), progress=False)
    ready = methods.readiness(ws)
    assert [m for m, missing in ready.items() if missing] == ["mfar", "fused", "grasp-zs", "grasp"]
    assert "grasp train mfar" in ready["fused"] and methods.best_method(ws) == "bm25"


def test_the_planner_reads_worked_examples_from_a_file(tmp_path):
    """planner.examples_file replaces the examples planner.examples would pick (here the hand-written ones), so a
    measurement can show the planner a chosen subset; a malformed file is one error naming its line."""
    from grasp.errors import GraspError
    from grasp.plan.examples import write_examples

    config = [f"cache_dir={tmp_path}", "planner.kind=cache"]
    ws = Workspace.open(DEMO_SKB, load_config(None, config), progress=False)
    chosen = ws.planner.builder.examples[3:5]
    write_examples(chosen, tmp_path / "two.jsonl")
    two = Workspace(ws.skb, load_config(None, [*config, f"planner.examples_file={tmp_path / 'two.jsonl'}"]),
                    progress=False)
    assert two.planner.builder.examples == chosen and two.planner.builder.hash != ws.planner.builder.hash
    bare = Workspace(ws.skb, load_config(None, [*config, f"planner.examples_file={tmp_path / 'two.jsonl'}",
                                                "planner.examples=none"]), progress=False)
    assert bare.planner.builder.examples == []
    (tmp_path / "bad.jsonl").write_text('{"qid": 1, "query": "q", "plan": {}}\n{"qid": 2, "query": "q"}\n')
    broken = Workspace(ws.skb, load_config(None, [*config, f"planner.examples_file={tmp_path / 'bad.jsonl'}"]),
                       progress=False)
    with pytest.raises(GraspError, match=r"bad.jsonl, line 2: a worked example needs plan"):
        broken.planner  # noqa: B018
