"""A knowledge base opened with a configuration: where its indexes and artifacts live, which
methods are ready, and the components its stages share.

:class:`Workspace` keeps house: a folder per SKB content fingerprint under the cache root (never
inside the SKB directory, which may be read-only), trained artifacts (its own, else the ones
shipped for the schema), typed settings saved and loaded as :class:`~grasp.storage.Setting`,
and each method's retriever built once on first use. The method table at the end is wiring only: each
stage's builder lives next to its stage (``graph/build.py``, ``text/mfar/build.py``, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from grasp.artifacts import checksum, verify, write_manifest
from grasp.config import GraspConfig
from grasp.encode.encoder import Encoder, build_encoder, encoder_weights_id
from grasp.encode.node_vectors import NodeVectors
from grasp.errors import ConfigError, FormatError
from grasp.eval.report import EvalReport, evaluate_run
from grasp.packaged import SHIPPED_MODELS
from grasp.results import Query, Run
from grasp.retriever import Retriever
from grasp.skb import SKB, default_queries_path, load_queries, load_skb, select_queries
from grasp.skb.documents import CandidateSerializer, DocumentLayout, layout_for
from grasp.storage import Setting, stable_hash

S = TypeVar("S", bound=Setting)

# trained artifacts, by their name in a workspace (stage modules are imported lazily: `import grasp` stays light)
MFAR_WEIGHTS = "mfar/weights.pt"       # `grasp train mfar`: the best field weights
MFAR_ENCODER = "mfar/encoder"          # `grasp train mfar` with mfar.encoder_tuning=lora: the encoder's LoRA adapter
ENCODER_TUNING_FIELDS = ("encoder_tuning", "encoder_epochs", "encoder_lr", "encoder_lora_r")
RERANKER_ADAPTER = "reranker/adapter"  # `grasp train reranker`: the LoRA adapter and its grasp_train.json
FUSION_SETTING = "fusion.json"         # `grasp tune fusion`: a FusionSetting


ZERO_SHOT_RERANKERS = ("bi-encoder", "bm25", "hybrid")  # what reranker.zero_shot=auto chooses between on validation


def zero_shot_reranker_id(cfg) -> str | None:
    """Which zero-shot reranker a zero-shot final fusion must have been tuned for: ``reranker.zero_shot`` (BM25
    over the pool or the bi-encoder), None for ``auto`` (any: the setting records the one tuning chose), or for
    kind llm-yes-no that LLM (untrained, it is its own zero-shot reranker)."""
    if cfg.kind == "llm-yes-no":
        return f"llm-yes-no:{cfg.model}"
    return None if cfg.zero_shot == "auto" else cfg.zero_shot


def zero_shot_choices(cfg) -> tuple[str, ...]:
    """The zero-shot rerankers `grasp tune rerank --zero-shot` compares: every one under ``auto``, else the
    configured one."""
    chosen = zero_shot_reranker_id(cfg)
    return ZERO_SHOT_RERANKERS if chosen is None else (chosen,)


def final_fusion_artifact(trained: bool) -> str:
    """`grasp tune rerank [--zero-shot]`: a RerankFusionSetting."""
    return f"rerank-fusion-{'trained' if trained else 'zero-shot'}.json"


ARTIFACT_LABELS = {MFAR_WEIGHTS: "mFAR weights", RERANKER_ADAPTER: "reranker adapter", FUSION_SETTING: "fusion setting",
                   final_fusion_artifact(True): "final fusion (trained reranker)",
                   final_fusion_artifact(False): "final fusion (zero-shot reranker)"}


def _setting_name(cls: type[Setting], name: str | None) -> str:
    if not (name or cls.artifact):
        raise ValueError(f"a {cls.__name__} has no file name of its own: pass one")
    return name or cls.artifact


class Workspace:
    """One SKB + one configuration + the folder holding their indexes."""

    def __init__(self, skb: SKB, config: GraspConfig | None = None, *, progress: bool = True) -> None:
        self.skb = skb
        self.config = config or GraspConfig()
        self.progress = progress
        self._retrievers: dict[str, Retriever] = {}

    @classmethod
    def open(cls, path: Path | str, config: GraspConfig | None = None, *, stark_dataset: str | None = None,
             progress: bool = True) -> Workspace:
        return cls(load_skb(path, stark_dataset=stark_dataset), config, progress=progress)

    # --- the cache layout -------------------------------------------------------------------

    @property
    def cache_dir(self) -> Path:
        return self.config.cache_root / "skb" / f"{self.skb.name}-{self.skb.fingerprint}"

    @property
    def vectors_dir(self) -> Path:
        return self.cache_dir / "embeddings"

    @property
    def plans_file(self) -> Path:
        """The writable plan cache (under the package's shipped plans)."""
        return self.cache_dir / "plans.jsonl"

    @property
    def examples_path(self) -> Path:
        """Worked examples selected from this SKB's train split by `grasp plans examples`."""
        return self.cache_dir / "examples.jsonl"

    @property
    def mfar_dir(self) -> Path:
        """Where `grasp train mfar` keeps checkpoints, the training log and the best weights."""
        cfg = self.config.mfar
        # settings added after this key was fixed join it only when changed: earlier training folders stay found
        later = {name for name in ("hard_negative_ranks", *ENCODER_TUNING_FIELDS) if getattr(cfg, name) == type(cfg).model_fields[name].default}
        key = [cfg.model_dump(exclude=later), encoder_weights_id(self.config.encoder), self.layout.key]
        return self.cache_dir / f"mfar-train-{stable_hash(key)}"

    @property
    def reranker_dir(self) -> Path:
        """Where `grasp train reranker` keeps its records, checkpoints and the adapter."""
        cfg = self.config.reranker
        # what the trained reranker *is* (base, kind, input); training settings live in its grasp_train.json
        identity = cfg.model_dump(include={"model", "kind", "max_length", "max_field_tokens", "max_neighbors"})
        return self.cache_dir / f"reranker-{stable_hash([identity, self.layout.key])}"

    # --- artifacts and settings -------------------------------------------------------------

    def artifact_path(self, name: str) -> Path:
        """Where this workspace writes a trained artifact: a setting's file (``fusion.json``, ...),
        ``mfar/weights.pt`` or ``reranker/adapter``."""
        if name.startswith("mfar/"):
            return self.mfar_dir / name.removeprefix("mfar/")
        if name.startswith("reranker/"):
            return self.reranker_dir / name.removeprefix("reranker/")
        return self.cache_dir / name

    def _artifact_candidates(self, name: str) -> list[tuple[Path, bool]]:
        from grasp.plan.prompt import profile_of

        return [(self.artifact_path(name), False), (SHIPPED_MODELS / self.skb.schema.name / name, True),
                (SHIPPED_MODELS / profile_of(self.skb) / name, True)]

    def artifact(self, name: str, *, check: dict[str, Any] | None = None, loadable: set[str] | None = None) -> Path | None:
        """A trained artifact: this workspace's own, else one shipped with the package for this
        schema or its prompt profile (``grasp/data/models/<name or profile>/<name>``: the demo KB, a
        slice of pkg, uses pkg's), else None. With ``check`` (what the configuration about to use it
        expects, :meth:`expects`) its manifest is verified first (:func:`grasp.artifacts.verify`)."""
        for path, shipped in self._artifact_candidates(name):
            if path.exists():
                if check is not None:
                    verify(path, label=ARTIFACT_LABELS.get(name, name), skb=self.skb_identity, expected=check,
                           shipped=shipped, on_mismatch=self.config.artifacts.on_mismatch, loadable=loadable)
                return path
        return None

    @property
    def skb_identity(self) -> dict[str, str]:
        return {"name": self.skb.name, "fingerprint": self.skb.fingerprint, "schema": self.skb.schema.name}

    def expects(self, name: str) -> dict[str, Any]:
        """What an artifact must have been made with to serve this configuration (:func:`mfar_expects`
        adds mFAR's weight list, dense fields and dimension)."""
        c = self.config
        reranker = {"reranker.model": c.reranker.model, "reranker.max_field_tokens": c.reranker.max_field_tokens,
                    "reranker.max_neighbors": c.reranker.max_neighbors}
        out: dict[str, Any] = {"layout": self.layout.key}
        if name in (MFAR_WEIGHTS, MFAR_ENCODER, FUSION_SETTING, final_fusion_artifact(False)):
            out["encoder"] = encoder_weights_id(c.encoder)
        if name in (MFAR_WEIGHTS, FUSION_SETTING, final_fusion_artifact(False), final_fusion_artifact(True)):
            out["mfar.encoder"] = mfar_encoder_id(self)  # what mFAR's ranking, fused downstream, was made with
        if name in (RERANKER_ADAPTER, final_fusion_artifact(True)):
            out.update(reranker)
        elif name == final_fusion_artifact(False):
            out.update({k: v for k, v in reranker.items() if k != "reranker.model"})
            if (zero_shot := zero_shot_reranker_id(c.reranker)) is not None:
                out["reranker.zero_shot"] = zero_shot
        if name == final_fusion_artifact(True) and (zs := self.artifact(final_fusion_artifact(False))) is not None:
            # a trained final fusion tuned over grasp-zs records which zero-shot setting it stacked on: retuning
            # that one leaves it stale (one tuned over the fused ranking never recorded it, and is not checked)
            out["grasp-zs.sha256"] = checksum(zs)
        return out

    def record_artifact(self, name: str, *, data: dict[str, int], context: dict[str, Any] | None = None,
                        check: dict[str, Any] | None = None, note: str = "") -> Path:
        """Write the manifest of an artifact this workspace just made (see :mod:`grasp.artifacts`)."""
        path = self.artifact_path(name)
        write_manifest(path, kind=name, skb=self.skb_identity, data=data, config=check or self.expects(name),
                       context={"planner": self.config.planner.model_dump(include={"kind", "model", "format",
                                                                                   "samples"}),
                                **(context or {})}, note=note)
        return path

    def load_setting(self, cls: type[S], name: str | None = None) -> S | None:
        """The setting of this type (its own file name unless ``name``), checked against its manifest, or
        None when none was saved."""
        name = _setting_name(cls, name)
        expected = self.expects(name)
        path = self.artifact(name, check=expected, loadable=set(expected))
        return cls.load(path) if path is not None else None

    def save_setting(self, setting: Setting, name: str | None = None, *, data: dict[str, int],
                     context: dict[str, Any] | None = None, check: dict[str, Any] | None = None) -> Path:
        """Save a tuned setting and its manifest (``data``: the split and number of queries it was tuned on;
        ``check``: what it was made with, when more than :meth:`expects` says)."""
        name = _setting_name(type(setting), name)
        setting.save(self.artifact_path(name))
        return self.record_artifact(name, data=data, context=context, check=check)

    def readiness(self) -> dict[str, str | None]:
        """For each method: None when it can run now, else what is missing and the command that makes it."""
        fusion = None if self.artifact(FUSION_SETTING) else "no fusion setting: grasp tune fusion"
        out: dict[str, str | None] = {"bm25": None, "dense": None, "graph": None,
                                      "mfar": None if self.artifact(MFAR_WEIGHTS) else "not trained: grasp train mfar",
                                      "fused": fusion}
        zs = None if self.artifact(final_fusion_artifact(False)) else "no final fusion: grasp tune rerank --zero-shot"
        out["grasp-zs"] = fusion or zs
        trained = (None if self.artifact(RERANKER_ADAPTER) else "no reranker: grasp train reranker") or (
            None if self.artifact(final_fusion_artifact(True)) else "no final fusion: grasp tune rerank")
        out["grasp"] = fusion or trained
        return out

    def best_method(self) -> str:
        """The most complete method that can run now: grasp, grasp-zs, fused, else bm25."""
        ready = self.readiness()
        return next(m for m in ("grasp", "grasp-zs", "fused", "bm25") if ready[m] is None)

    # --- components the stages share --------------------------------------------------------

    @cached_property
    def layout(self) -> DocumentLayout:
        try:
            return layout_for(self.skb, self.config.document_layout)
        except KeyError as e:
            raise ConfigError(str(e.args[0])) from None

    @cached_property
    def encoder(self) -> Encoder:
        return build_encoder(self.config.encoder)

    @cached_property
    def node_vectors(self) -> NodeVectors:
        return NodeVectors(self.skb, self.encoder, self.layout, self.vectors_dir, self.config.vector_index,
                           progress=self.progress)

    @cached_property
    def planner(self):
        """The Stage-1 planner: cached plans first (shipped + this workspace's), the LLM on a miss."""
        from grasp.plan.build import build_planner

        return build_planner(self.skb, self.config.planner, cache_root=self.config.cache_root,
                             plans_file=self.plans_file, examples_file=self.examples_path, seed=self.config.seed)

    @cached_property
    def serializer(self) -> CandidateSerializer:
        """The reranker's view of a candidate, shared by training, serving and the stored vectors."""
        from grasp.rerank.build import build_serializer

        return build_serializer(self.config.reranker, self.skb, self.layout)

    # --- methods, queries, runs -------------------------------------------------------------

    def retriever(self, method: str) -> Retriever:
        if method not in METHODS:
            raise ConfigError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
        if method not in self._retrievers:
            self._retrievers[method] = METHODS[method](self)
        return self._retrievers[method]

    def default_queries_path(self) -> Path:
        return default_queries_path(self.skb)

    def queries(self, path: Path | str | None = None, *, split: str | None = None, limit: int | None = None) -> list[Query]:
        path = Path(path) if path is not None else self.default_queries_path()
        if not path.exists():
            raise FormatError("queries file not found (pass --queries FILE, or a STaRK QA folder)", file=path)
        return select_queries(load_queries(path), split, limit)

    def run(self, method: str, queries: Sequence[Query], k: int | None = None) -> Run:
        return self.retriever(method).batch_search(queries, k or self.config.search.depth, progress=self.progress)

    def evaluate(self, method: str, queries: Sequence[Query], k: int | None = None) -> tuple[Run, EvalReport]:
        """Build (or load) the method's indexes, retrieve for every query, and score the run."""
        t0 = time.perf_counter()
        retriever = self.retriever(method)
        t1 = time.perf_counter()
        run = retriever.batch_search(queries, k or self.config.search.depth, progress=self.progress)
        t2 = time.perf_counter()
        report = evaluate_run(run, queries, candidate_mask=self.skb.candidate_mask)
        report.method = method
        report.info.update({
            "skb": self.skb.name,
            "index_seconds": round(t1 - t0, 3),
            "search_seconds": round(t2 - t1, 3),
            "ms_per_query": round(1000 * (t2 - t1) / max(len(queries), 1), 3),
        })
        return run, report


# --- the method table: each method's retriever wired from the workspace's components -----------------

def _bm25(ws: Workspace) -> Retriever:
    from grasp.text.bm25 import BM25Retriever

    return BM25Retriever(ws.skb, ws.layout, ws.cache_dir, ws.config.bm25, progress=ws.progress)


def _dense(ws: Workspace) -> Retriever:
    from grasp.text.dense import DenseRetriever

    return DenseRetriever(ws.node_vectors)


def _graph(ws: Workspace) -> Retriever:
    from grasp.graph.build import build_graph_retriever

    return build_graph_retriever(ws.config.graph, ws.planner, ws.node_vectors, ws.cache_dir, progress=ws.progress)


def mfar_encoder_adapter(ws: Workspace) -> Path | None:
    """The LoRA adapter of mFAR's encoder when ``mfar.encoder_tuning=lora`` and `grasp train mfar` made one
    (this workspace's, else shipped); None: mFAR reads Stage 1's encoder and vectors."""
    if ws.config.mfar.encoder_tuning == "frozen":
        return None
    return ws.artifact(MFAR_ENCODER, check=ws.expects(MFAR_ENCODER))


def mfar_encoder_id(ws: Workspace) -> str:
    """Which encoder mFAR's dense scores come from ("base", or "lora:" and the adapter's digest): mFAR's
    weights, and every fusion setting over mFAR's ranking, are made for one."""
    from grasp.encode.tuned import adapter_digest

    if ws.config.mfar.encoder_tuning == "frozen":
        return "base"
    adapter = mfar_encoder_adapter(ws)
    return f"lora:{adapter_digest(adapter)}" if adapter is not None else "lora:untrained"


def mfar_method(ws: Workspace, *, trained: bool = True, base_encoder: bool = False):
    """mFAR over this SKB's fields; with the weights `grasp train mfar` saved, if any (and ``trained``).
    With a tuned encoder (:func:`mfar_encoder_adapter`; not with ``base_encoder``) mFAR's dense fields are
    encoded by it, stored apart from Stage 1's vectors."""
    from grasp.text.mfar.build import build_mfar, load_weights

    c = ws.config
    adapter = None if base_encoder else mfar_encoder_adapter(ws)
    if trained and adapter is None and c.mfar.encoder_tuning == "lora" and not base_encoder:
        raise ConfigError("mfar.encoder_tuning=lora, but no tuned mFAR encoder was trained for this SKB "
                          f"({ws.artifact_path(MFAR_ENCODER)}); run `grasp train mfar` first")
    if adapter is not None:
        from grasp.encode.tuned import TunedEncoder

        encoder, node_vectors = TunedEncoder.load(
            c.encoder.model, adapter, kind="mfar-encoder", max_length=c.encoder.max_length,
            batch_size=c.encoder.batch_size, device=c.encoder.device, precision=c.encoder.precision), None
    else:
        encoder, node_vectors = ws.encoder, ws.node_vectors
    retriever = build_mfar(c.mfar, ws.skb, ws.layout, encoder, ws.cache_dir, bm25=c.bm25,
                           node_vectors=node_vectors, dtype=c.vector_index.dtype, progress=ws.progress)
    if trained and (path := ws.artifact(MFAR_WEIGHTS, check=mfar_expects(ws),
                                        loadable={"encoder", "layout", "dense_fields"})) is not None:
        load_weights(retriever, path)
    return retriever


def mfar_expects(ws: Workspace) -> dict[str, Any]:
    """What mFAR's weights depend on: the encoder and layout, the (scorer:field) weights, which fields have a
    dense scorer, and the dimension."""
    from grasp.text.mfar.fields_index import selected_specs, weight_names

    return {**ws.expects(MFAR_WEIGHTS), "weights": weight_names(selected_specs(ws.skb, ws.config.mfar.fields)),
            "dense_fields": ws.config.mfar.dense_fields, "dim": ws.encoder.dim}


def _fused(ws: Workspace) -> Retriever:
    from grasp.fuse.retriever import FusedRetriever, FusionSetting

    setting = ws.load_setting(FusionSetting)
    if setting is None:
        raise ConfigError(f"no fusion setting for this SKB ({ws.artifact_path(FusionSetting.artifact)}); "
                          "run `grasp tune fusion --skb ...` first")
    return FusedRetriever(ws.retriever("graph"), ws.retriever(setting.info.get("dense_method", "mfar")), setting)


def reranked_method(ws: Workspace, *, trained: bool, w: float | None = None, k: float | None = None,
                    depth: int | None = None, upstream: str | None = None, zero_shot: str | None = None):
    """Stage 3 (``grasp`` with the trained reranker, ``grasp-zs`` zero-shot); the final RRF uses the setting
    `grasp tune rerank` saved, unless (w, k) are given. grasp-zs reranks the fused ranking with ``zero_shot``
    when given, else the configured zero-shot reranker (``auto``: the one its setting was tuned with); grasp
    reranks the ranking its setting was tuned over (``upstream`` when given): grasp-zs's when a zero-shot final
    fusion existed at tuning (every stage over the one before), else the fused one (settings tuned before)."""
    from grasp.rerank.build import build_reranked, build_reranker, rerank_depth
    from grasp.rerank.llm_yes_no import with_skb_instruction
    from grasp.rerank.retriever import RerankFusionSetting

    cfg = with_skb_instruction(ws.config.reranker, ws.skb)
    adapter = None
    if trained:
        adapter = ws.artifact(RERANKER_ADAPTER, check=ws.expects(RERANKER_ADAPTER), loadable={"layout",
                              "reranker.max_field_tokens", "reranker.max_neighbors"})
        if adapter is None:
            raise ConfigError(f"no trained reranker for this SKB ({ws.artifact_path(RERANKER_ADAPTER)}); "
                              "run `grasp train reranker` first")
    name = final_fusion_artifact(trained)
    setting = None  # explicit (w, k): no saved setting applies, nor its depth
    if w is None or k is None:
        setting = ws.load_setting(RerankFusionSetting, name)
        if setting is None:
            raise ConfigError(f"no final-fusion setting ({ws.artifact_path(name)}); run `grasp tune rerank` first")
    source = upstream or (setting.upstream if setting is not None and trained else "fused")
    # the one asked for, else the configured one, else (auto) the one the setting was tuned with (None: bi-encoder)
    zero_shot = (zero_shot or zero_shot_reranker_id(cfg) or getattr(setting, "zero_shot", None)
                 or ZERO_SHOT_RERANKERS[0])
    reranker = build_reranker(cfg, ws.encoder, adapter, ws.config.bm25, zero_shot=zero_shot)
    return build_reranked(ws.retriever(source), reranker, ws.serializer, name="grasp" if trained else "grasp-zs",
                          fusion=setting or RerankFusionSetting(w=float(w), k=float(k)),  # type: ignore[arg-type]
                          depth=depth if depth is not None else rerank_depth(cfg, setting),
                          vectors_dir=ws.vectors_dir, progress=ws.progress)


METHODS: dict[str, Callable[[Workspace], Retriever]] = {
    "bm25": _bm25, "dense": _dense, "graph": _graph, "mfar": mfar_method, "fused": _fused,
    "grasp-zs": lambda ws: reranked_method(ws, trained=False), "grasp": lambda ws: reranked_method(ws, trained=True),
}
