"""Choosing the fusion settings on validation: run the inputs once, grid-search each selection rule
over those runs (vectorised), pick the rule by its cross-validated Hit@1 (queries its grid did not
see), fit it on the whole split, save it with the index, and draw the static (w, k) Hit@1 surface
(the paper's Figure 4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from grasp import methods
from grasp.artifacts import final_fusion_artifact
from grasp.fuse.confidence import ConfidenceFit, ShapePrior, fit_confidence
from grasp.fuse.dynamic import GRAPH_SIZE_EDGES
from grasp.fuse.grid import (
    FusionTable,
    choose,
    cross_validate,
    folds,
    search_bucketed,
    search_confidence,
    search_dynamic,
    search_static,
)
from grasp.fuse.retriever import FusionSetting
from grasp.methods import reranked_method
from grasp.rerank.retriever import RerankFusionSetting
from grasp.rerank.zero_shot import zero_shot_choices
from grasp.results import Query, Ranking, Run
from grasp.workspace import Workspace

LINK_FLOORS = (0.0, 0.9)  # dynamic RRF: without, and with, the link-confidence risk step (plan_signals)
RERANK_DEPTHS = (30, 100)  # final fusion: reranked depths compared (the shipped settings were tuned at 30; paper 100)
N_FOLDS = 5
CONFIDENCE_RULE = "confidence"  # confidence RRF: the graph weighed by its plan's confidence (grasp.fuse.confidence)


def tune_fusion(ws: Workspace, *, split: str = "val", dense_method: str = "mfar", limit: int | None = None,
                heatmap: Path | None = None, link_floors: tuple[float, ...] = LINK_FLOORS,
                n_folds: int = N_FOLDS) -> tuple[FusionSetting, dict]:
    """Choose the fusion rule by cross-validation on the validation queries, then fit it on all of them.

    Rules, simplest first: static RRF (best (w, k)), static RRF's flattest good region (best 3x3
    neighbourhood), dynamic RRF for each link floor, and (``fusion.evidence``) confidence RRF, whose graph
    weight follows the plan's evidence-based confidence (:mod:`grasp.fuse.confidence`, fitted out of fold on the
    same folds). Each rule's held-out Hit@1
    over ``n_folds`` folds decides (ties: the simpler); the info says how the plain in-sample argmax would
    have fared."""
    queries = ws.queries(split=split, limit=limit)
    graph_run = methods.run(ws, "graph", queries)
    dense_run = methods.run(ws, dense_method, queries)
    mask = ws.skb.candidate_mask
    tables = {floor: FusionTable.build(graph_run, dense_run, queries, candidate_mask=mask, link_floor=floor)
              for floor in link_floors}
    plain = tables[link_floors[0]]  # static weights ignore the plan's signals
    rules = {"static": (plain, search_static), "static-flat": (plain, partial(search_static, flat=True))}
    floor_of = {f"dynamic@{floor:g}": floor for floor in link_floors}  # each dynamic rule's link floor
    rules |= {name: (tables[floor], search_dynamic) for name, floor in floor_of.items()}
    fit = plan_confidence(ws, graph_run, dense_run, queries, n_folds=n_folds) if ws.config.fusion.evidence else None
    if fit is not None:
        rules[CONFIDENCE_RULE] = (FusionTable.build(graph_run, dense_run, queries, candidate_mask=mask,
                                                    confidence=fit.oof), search_confidence)
    cv = cross_validate(rules, n_folds=n_folds, seed=ws.config.seed)
    chosen = choose(cv["cv"])
    fitted = {name: search(table) for name, (table, search) in rules.items()}
    best = fitted[chosen]
    static = fitted["static"]
    info = {"split": split, "n": len(queries), "chosen": chosen,
            "rules": {name: {"hit@1": r.hit1, "cv_hit@1": cv["cv"][name], **r.best, "settings": r.n_settings,
                             "within_1pt": r.within_1pt, **({"link_floor": floor_of[name]} if name in floor_of else {})}
                      for name, r in fitted.items()},
            "cv": cv, "templates": per_template(plain, queries, best.hits(rules[chosen][0]))}
    if fit is not None:
        info["confidence"] = fit.summary()
    common = {"val_hit1": best.hit1, "info": info, "dense_method": dense_method,
              "confidence": fit.model.to_json() if fit is not None else None}  # kept in every mode, for the report to judge
    if best.mode == "static":
        setting = FusionSetting("static", best.best["rrf_k"], w=best.best["w"], **common)
    elif best.mode == "confidence":
        setting = FusionSetting("confidence", best.best["rrf_k"], gamma=best.best["gamma"], scale=best.best["scale"],
                                **common)
    else:
        setting = FusionSetting("dynamic", best.best["rrf_k"], w_bucket=best.best["w_bucket"], m_risk=best.best["m_risk"],
                                link_floor=float(floor_of[chosen]), **common)
    ws.save_setting(setting, data={split: len(queries)}, context={"dense_method": dense_method})
    if heatmap is not None:
        draw_heatmap(static.surface, static.axes, heatmap, title=f"{ws.skb.name}: static RRF Hit@1 on {split}")
    return setting, info


def plan_confidence(ws: Workspace, graph_run: Run, dense_run: Run, queries: Sequence[Query], *,
                    n_folds: int = N_FOLDS) -> ConfidenceFit | None:
    """The evidence-based plan confidence fitted on ``queries`` (out of fold over the folds fusion's
    cross-validation uses), with the shape prior counted on the training queries whose plans are cached
    (none are planned for it); None where it cannot be fitted (the graph always right, or always wrong)."""
    train = [q for q in ws.queries(split=ws.config.mfar.train.train_split) if ws.planner.cached(q.text) is not None]
    shapes = ShapePrior.count(methods.run(ws, "graph", train), train) if train else None
    try:
        return fit_confidence(graph_run, dense_run, queries, folds=folds(len(queries), min(n_folds, len(queries)),
                                                                           ws.config.seed), shapes=shapes)
    except ValueError:
        return None


def per_template(table: FusionTable, queries: Sequence[Query], fused_hits: np.ndarray) -> dict[str, dict]:
    """Hit@1 per query template of each input alone and of the fusion: where fusion loses what an input had."""
    graph = table.hits_at_1(1.0, 0.0, 60)
    dense = table.hits_at_1(0.0, 1.0, 60)
    out: dict[str, dict] = {}
    for template in sorted({q.template or "-" for q in queries}):
        rows = np.array([(q.template or "-") == template for q in queries])
        out[template] = {"n": int(rows.sum()), "graph": float(graph[rows].mean()), "dense": float(dense[rows].mean()),
                         "fused": float(fused_hits[rows].mean())}
    return out


def draw_heatmap(surface: np.ndarray, axes: dict, path: Path, *, title: str, ylabel: str = "w (graph weight)",
                 mark: tuple[int, int] | None = None) -> None:
    """Hit@1 over the (w, k) grid, a star on ``mark`` (w row, k column; default: the best cell)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 6))
    im = ax.imshow(100 * surface, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(axes["k"])), [f"{k:g}" for k in axes["k"]])
    ax.set_yticks(range(0, len(axes["w"]), 2), [f"{w:.2f}" for w in axes["w"][::2]])
    ax.set_xlabel("k")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    i, j = mark if mark is not None else np.unravel_index(np.argmax(surface), surface.shape)
    ax.scatter([j], [i], marker="*", s=150, c="red")
    fig.colorbar(im, ax=ax, label="Hit@1 (%)")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def tune_rerank(ws: Workspace, *, trained: bool, split: str = "val", limit: int | None = None,
                depths: tuple[int, ...] = RERANK_DEPTHS, n_folds: int = N_FOLDS,
                bucket_edges: tuple[int, ...] = GRAPH_SIZE_EDGES) -> RerankFusionSetting:
    """The final fusion: RRF of the reranker's ranking with the upstream one. The reranked depth (each of
    ``depths`` up to the configured one), the rule (static: best cell or flattest region; bucketed: one such
    (w, k) per bucket of the upstream's graph candidates, cut at ``bucket_edges``) and, zero-shot under
    ``reranker.zero_shot=auto``, the reranker itself are chosen by cross-validation on the validation
    queries (ties: static before bucketed), then the rule is fitted on all of them."""
    queries = ws.queries(split=split, limit=limit)
    # the trained reranker stacks on the zero-shot one when that is tuned: every stage over the one before
    source = "grasp-zs" if trained and ws.artifact(final_fusion_artifact(False)) is not None else "fused"
    kinds: tuple[str | None, ...] = (None,) if trained else zero_shot_choices(ws.config.reranker)
    n_buckets = len(bucket_edges) + 1
    upstream, rules, made_with = None, {}, {}
    for kind in kinds:
        rr = reranked_method(ws, trained=trained, w=0.5, rrf_k=2.0, upstream=source, zero_shot=kind)
        if upstream is None:  # one upstream run (its rankings carry the plan signals), shared by every reranker
            stages = methods.retriever(ws, source).batch_search_stages(queries, rr.depth, progress=ws.progress)
            upstream = stages[source]
        prefix = f"{kind}:" if len(kinds) > 1 else ""
        scored, _ = rr.from_upstream(queries, upstream, rr.depth, progress=ws.progress)
        # a depth the user set wins at serving time (rerank_depth), so only that depth is tuned then
        deepest = rr.depth
        compared = {deepest} if "depth" in ws.config.reranker.model_fields_set else {d for d in depths if d < deepest}
        for depth in sorted(compared | {deepest}):
            if depth == deepest or not rr.reranker.pool_dependent:
                at_depth = within_depth(scored, upstream, depth)
            else:  # scores that depend on the pool are made from the pool serving will rerank
                rr.depth = depth
                at_depth, _ = rr.from_upstream(queries, upstream, depth, progress=ws.progress)
            for name, rule in final_fusion_rules(at_depth, upstream, queries, depth=depth,
                                                 prefix=prefix, candidate_mask=ws.skb.candidate_mask,
                                                 bucket_edges=bucket_edges).items():
                rules[name], made_with[name] = rule, (depth, kind)
    rules = dict(sorted(rules.items(), key=lambda item: "bucketed" in item[0]))  # simpler rules first (ties)
    cv = cross_validate(rules, n_folds=n_folds, seed=ws.config.seed)
    chosen = choose(cv["cv"])
    table, search = rules[chosen]
    best = search(table)
    static = best if best.mode == "static" else search_static(table)  # the (w, k) surface at that depth
    depth, kind = made_with[chosen]
    bucketed = {"bucket_edges": list(bucket_edges), "w_bucket": best.best["w_bucket"],
                "rrf_k_bucket": best.best["rrf_k_bucket"],
                "bucket_n": np.bincount(table.bucket, minlength=n_buckets).tolist()} if best.mode == "bucketed" else {}
    setting = RerankFusionSetting(w=static.best["w"], rrf_k=static.best["rrf_k"], depth=depth,
                                  val_hit1=best.hit1, split=split, n=len(queries), within_1pt=static.within_1pt,
                                  trained=trained, rule=chosen, upstream=source, zero_shot=kind,
                                  cv={name: round(v, 4) for name, v in cv["cv"].items()},
                                  argmax_right=cv["argmax_right"], surface=static.surface.round(4).tolist(),
                                  axes=static.axes, **bucketed)
    name = final_fusion_artifact(trained)
    check = {**ws.expects(name), **({"reranker.zero_shot": kind} if kind is not None else {})}
    ws.save_setting(setting, name, data={split: len(queries)}, context={"depth": setting.depth, "upstream": source},
                    check=check)
    return setting


def final_fusion_rules(scored: Run, upstream: Run, queries: Sequence[Query], *, depth: int,
                       prefix: str = "", candidate_mask: np.ndarray | None = None,
                       bucket_edges: tuple[int, ...] = GRAPH_SIZE_EDGES) -> dict[str, tuple[FusionTable, Callable]]:
    """The final fusion's selection rules for one reranker's ranking ``scored`` (reranked at ``depth``) over
    ``upstream``: static best cell, static flattest region, and the bucketed versions of both (one (w, k) per
    bucket of the graph stage's candidates, from the plan signals ``upstream`` carries), named ``{prefix}{rule}@{depth}``; each a table
    and a search over it, for :func:`cross_validate`."""
    table = FusionTable.build(scored, upstream, queries, candidate_mask=candidate_mask, edges=bucket_edges)
    n_buckets = len(bucket_edges) + 1
    return {f"{prefix}static@{depth}": (table, search_static),
            f"{prefix}static-flat@{depth}": (table, partial(search_static, flat=True)),
            f"{prefix}bucketed@{depth}": (table, partial(search_bucketed, n_buckets=n_buckets)),
            f"{prefix}bucketed-flat@{depth}": (table, partial(search_bucketed, n_buckets=n_buckets, flat=True))}


def within_depth(scored: Run, upstream: Run, depth: int) -> Run:
    """The reranker's ranking restricted to each query's upstream top ``depth`` (a shallower rerank: the
    reranker's scores do not depend on what else is in the pool)."""
    out = Run(scored.name)
    for qid, ranking in scored.items():
        up = upstream.get(qid)
        keep = set(up.node_ids[:depth].tolist()) if up is not None else set()
        mask = np.array([int(n) in keep for n in ranking.node_ids], dtype=bool)
        out.add(Ranking(qid, ranking.node_ids[mask], ranking.scores[mask], stage=ranking.stage, trace=ranking.trace))
    return out
