"""Which zero-shot reranker serves ``grasp-zs``: the configured one, or under ``reranker.zero_shot=auto`` the one
`grasp tune rerank --zero-shot` chose on validation (recorded in its final-fusion setting)."""

from __future__ import annotations

from grasp.config import RerankerConfig

ZERO_SHOT_RERANKERS = ("bi-encoder", "bm25", "hybrid")  # what reranker.zero_shot=auto chooses between on validation
UNTUNED_ZERO_SHOT = "bi-encoder"  # auto where nothing was tuned (how it was chosen: docs/defaults.md)


def zero_shot_reranker_id(cfg: RerankerConfig) -> str | None:
    """Which zero-shot reranker a zero-shot final fusion must have been tuned for: ``reranker.zero_shot`` (BM25
    over the pool or the bi-encoder), None for ``auto`` (any: the setting records the one tuning chose), or for
    kind llm-yes-no that LLM (untrained, it is its own zero-shot reranker)."""
    if cfg.kind == "llm-yes-no":
        return f"llm-yes-no:{cfg.model}"
    return None if cfg.zero_shot == "auto" else cfg.zero_shot


def zero_shot_choices(cfg: RerankerConfig) -> tuple[str, ...]:
    """The zero-shot rerankers `grasp tune rerank --zero-shot` compares: every one under ``auto``, else the
    configured one."""
    chosen = zero_shot_reranker_id(cfg)
    return ZERO_SHOT_RERANKERS if chosen is None else (chosen,)
