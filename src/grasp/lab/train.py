"""Training the trainable stages of one workspace on its labelled queries: mFAR's field weights (and, with
``mfar.encoder_tuning=lora``, its encoder) and the reranker, each recorded with its manifest. `grasp train` and
`grasp prepare` both call these."""

from __future__ import annotations

from pathlib import Path

from grasp import methods
from grasp.artifacts import MFAR_ENCODER, MFAR_WEIGHTS, RERANKER_ADAPTER
from grasp.workspace import Workspace


def train_mfar(ws: Workspace, *, limit: int | None = None, announce=print) -> dict:
    """Train mFAR's field weights on the train split, early-stopping on val (resumes if interrupted); returns the
    training state (its log and best validation MRR)."""
    from grasp.text.mfar import train
    from grasp.text.mfar.train import tune_encoder

    cfg = ws.config.mfar
    train_q, val_q = ws.queries(split=cfg.train.train_split, limit=limit), ws.queries(split=cfg.train.val_split)
    if cfg.encoder_tuning == "lora" and ws.artifact(MFAR_ENCODER) is None:
        adapter = tune_encoder(methods.mfar_method(ws, trained=False, base_encoder=True), train_q, ws.mfar_dir,
                               ws.config.encoder.model, cfg, seed=ws.config.seed, progress=ws.progress)
        ws.record_artifact(MFAR_ENCODER, data={cfg.train.train_split: len(train_q)},
                           context={"mfar": cfg.model_dump(mode="json")})
        announce(f"mFAR encoder adapter in {adapter}; re-encoding mFAR's dense fields with it")
    retriever = methods.mfar_method(ws, trained=False)
    state = train(retriever, train_q, val_q, ws.mfar_dir, cfg, seed=ws.config.seed, progress=ws.progress)
    ws.record_artifact(MFAR_WEIGHTS, data={cfg.train.train_split: len(train_q), cfg.train.val_split: len(val_q)},
                       check=methods.mfar_expects(ws), context={"mfar": cfg.model_dump(mode="json")})
    ws.reset()  # what was built before reads the untrained weights
    return state


def reranker_records(ws: Workspace, *, pool: str = "fused", limit: int | None = None) -> tuple[list[dict], int]:
    """(training records from the ``pool`` method's top ``reranker.depth`` of the train split, queries read)."""
    from grasp.rerank import build_records

    cfg = ws.config.reranker
    queries = ws.queries(split=cfg.train.train_split, limit=limit)
    ranked = methods.run(ws, pool, queries, cfg.depth)
    return build_records(ranked, queries, depth=cfg.depth, hard_negatives=cfg.train.hard_negatives), len(queries)


def export_reranker_bundle(ws: Workspace, path: Path, *, pool: str = "fused", limit: int | None = None) -> dict:
    """Write the records, validation pools and candidate texts to a .json.xz bundle (to train elsewhere)."""
    from grasp.rerank.llm_yes_no import with_skb_instruction
    from grasp.rerank.records import validation_pools, write_bundle

    cfg = with_skb_instruction(ws.config.reranker, ws.skb)  # the LLM yes/no kind's; a bundle carries it
    records, n = reranker_records(ws, pool=pool, limit=limit)
    val = ws.queries(split=cfg.train.val_split)
    return write_bundle(path, records, validation_pools(methods.run(ws, pool, val, cfg.depth), val, cfg.depth),
                        ws.serializer, info={"skb": ws.skb.schema.name, "pool": pool, "reranker": cfg.model_dump(),
                                             "manifest": {"skb": ws.skb_identity, "data": {cfg.train.train_split: n},
                                                          "config": ws.expects(RERANKER_ADAPTER)}})


def train_reranker(ws: Workspace, *, pool: str = "fused", limit: int | None = None) -> dict:
    """LoRA-train the reranker on hard negatives from the ``pool`` method's top of the train split, validated as it
    trains on the first ``reranker.train.eval_queries`` val queries (resumable); returns the training state."""
    from grasp.rerank import train_reranker as train
    from grasp.rerank.llm_yes_no import with_skb_instruction
    from grasp.rerank.records import validation_pools

    cfg = with_skb_instruction(ws.config.reranker, ws.skb)
    records, n = reranker_records(ws, pool=pool, limit=limit)
    val = ws.queries(split=cfg.train.val_split, limit=cfg.train.eval_queries)
    val_pools = validation_pools(methods.run(ws, pool, val, cfg.depth), val, cfg.depth) if val else []
    state = train(records, ws.serializer, ws.reranker_dir, config=cfg, seed=ws.config.seed, progress=ws.progress,
                  val_pools=val_pools)
    ws.record_artifact(RERANKER_ADAPTER, data={cfg.train.train_split: n},
                       context={"pool": pool, "records": len(records), "reranker": cfg.model_dump(mode="json")})
    ws.reset()
    state["records"] = len(records)
    return state
