"""Synthesis for one workspace: its LLM (the planner's client, when there is one), its cache and its folders."""

from __future__ import annotations

from grasp.plan.build import build_chat_client, degrade_missing_planner
from grasp.plan.cache import PlanCache
from grasp.synth.synthesize import SynthesisReport, synthesize
from grasp.synth.verbalize import LLMVerbalizer
from grasp.workspace import Workspace


def synthesize_workspace(ws: Workspace, *, n: int | None = None, seed: int | None = None,
                         val_share: float | None = None, max_answers: int | None = None,
                         llm: bool | None = None) -> SynthesisReport:
    """Synthesize into ``ws.synth_dir`` as the ``synth`` configuration says (each argument given overrides it); the
    planner's LLM words the queries where one is configured and present (the local model fetched, or an endpoint),
    else templates do."""
    cfg = ws.config.synth
    seed = ws.config.seed if seed is None else seed
    n, val_share = cfg.n if n is None else n, cfg.val_share if val_share is None else val_share
    max_answers, llm = cfg.max_answers if max_answers is None else max_answers, cfg.llm if llm is None else llm
    verbalizer = None
    config = ws.config.model_copy(deep=True)
    if llm and config.planner.kind != "cache" and degrade_missing_planner(config) is None:
        client = build_chat_client(config.planner, cache_root=config.cache_root, seed=seed)
        verbalizer = LLMVerbalizer(client, PlanCache(ws.synth_dir / "worded.jsonl"), seed=seed)
    return synthesize(ws.skb, ws.layout, ws.synth_dir, n=n, seed=seed, val_share=val_share, max_answers=max_answers,
                      llm=verbalizer, examples_path=ws.synth_examples_path, kinds=cfg.kinds,
                      progress=ws.progress)
