"""Choosing Stage 2's fusion setting on validation: run the graph and the dense partner once,
grid-search static and dynamic RRF over those runs (vectorised), keep the better by Hit@1,
save it with the index, and draw the static (w, k) Hit@1 surface (the paper's Figure 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grasp.fuse.grid import FusionTable, search_dynamic, search_static
from grasp.fuse.retriever import FusionSetting
from grasp.rerank.retriever import RerankFusionSetting
from grasp.workspace import Workspace, final_fusion_artifact, reranked_method

LINK_FLOORS = (0.0, 0.9)  # dynamic RRF: without, and with, the link-confidence risk step (plan_signals)


def tune_fusion(ws: Workspace, *, split: str = "val", dense_method: str = "mfar", limit: int | None = None,
                heatmap: Path | None = None, link_floors: tuple[float, ...] = LINK_FLOORS) -> tuple[FusionSetting, dict]:
    """Static RRF over its (w, k) grid and dynamic RRF over its grid for each link floor; the best by Hit@1
    (ties: static, then the lower floor)."""
    queries = ws.queries(split=split, limit=limit)
    graph_run = ws.run("graph", queries)
    dense_run = ws.run(dense_method, queries)
    tables = {floor: FusionTable.build(graph_run, dense_run, queries, candidate_mask=ws.skb.candidate_mask,
                                       link_floor=floor) for floor in link_floors}
    static = search_static(tables[link_floors[0]])  # static weights ignore the plan's signals
    by_floor = {floor: search_dynamic(table) for floor, table in tables.items()}
    floor = max(link_floors, key=lambda f: (by_floor[f].hit1, -f))
    dynamic = by_floor[floor]
    best = dynamic if dynamic.hit1 > static.hit1 else static
    info = {"split": split, "n": len(queries), "dense_method": dense_method,
            "static": {"hit@1": static.hit1, **static.best, "settings": static.n_settings, "within_1pt": static.within_1pt},
            "dynamic": {"hit@1": dynamic.hit1, **dynamic.best, "link_floor": floor, "settings": dynamic.n_settings,
                        "within_1pt": dynamic.within_1pt},
            "dynamic_by_link_floor": {str(f): r.hit1 for f, r in by_floor.items()}}
    if best.mode == "static":
        setting = FusionSetting("static", best.best["k"], w=best.best["w"], val_hit1=best.hit1, info=info)
    else:
        setting = FusionSetting("dynamic", best.best["k"], w_bucket=best.best["w_bucket"], m_risk=best.best["m_risk"],
                                val_hit1=best.hit1, info=info, link_floor=floor)
    ws.save_setting(setting, data={split: len(queries)}, context={"dense_method": dense_method})
    if heatmap is not None:
        draw_heatmap(static.surface, static.axes, heatmap, title=f"{ws.skb.name}: static RRF Hit@1 on {split}")
    return setting, info


def draw_heatmap(surface: np.ndarray, axes: dict, path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 6))
    im = ax.imshow(100 * surface, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(axes["k"])), [f"{k:g}" for k in axes["k"]])
    ax.set_yticks(range(0, len(axes["w"]), 2), [f"{w:.2f}" for w in axes["w"][::2]])
    ax.set_xlabel("k")
    ax.set_ylabel("w (graph weight)")
    ax.set_title(title)
    i, j = np.unravel_index(np.argmax(surface), surface.shape)
    ax.scatter([j], [i], marker="*", s=150, c="red")
    fig.colorbar(im, ax=ax, label="Hit@1 (%)")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def tune_rerank(ws: Workspace, *, trained: bool, split: str = "val", limit: int | None = None) -> RerankFusionSetting:
    """Static RRF of the reranker's ranking with the fused one, (w, k) chosen on validation Hit@1."""
    queries = ws.queries(split=split, limit=limit)
    rr = reranked_method(ws, trained=trained, w=0.5, k=2.0)
    upstream = ws.run("fused", queries, rr.depth)
    scored, _ = rr.from_upstream(queries, upstream, rr.depth)
    table = FusionTable.build(scored, upstream, queries, candidate_mask=ws.skb.candidate_mask)
    static = search_static(table)
    setting = RerankFusionSetting(w=static.best["w"], k=static.best["k"], depth=rr.depth, val_hit1=static.hit1,
                                  split=split, n=len(queries), within_1pt=static.within_1pt, trained=trained)
    ws.save_setting(setting, final_fusion_artifact(trained), data={split: len(queries)}, context={"depth": rr.depth})
    return setting
