"""A knowledge base opened with a configuration: where its indexes and artifacts live, and the components its
stages share.

:class:`Workspace` keeps house: a folder per SKB content fingerprint under the cache root (never inside the SKB
directory, which may be read-only), trained artifacts (its own, else the ones shipped for the schema), typed
settings saved and loaded as :class:`~grasp.storage.Setting`, and the components every stage reads (document
layout, encoder, node vectors, planner, candidate serializer). Which methods it can run, and how each is wired from
these, is :mod:`grasp.methods`.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from grasp.artifacts import (
    ARTIFACT_LABELS,
    FUSION_SETTING,
    MFAR_ENCODER,
    MFAR_WEIGHTS,
    RERANKER_ADAPTER,
    checksum,
    final_fusion_artifact,
    verify,
    write_manifest,
)
from grasp.config import GraspConfig, marked
from grasp.encode.encoder import Encoder, build_encoder, encoder_weights_id
from grasp.encode.node_vectors import NodeVectors
from grasp.errors import ConfigError, FormatError
from grasp.packaged import SHIPPED_MODELS
from grasp.results import Query
from grasp.retriever import Retriever
from grasp.skb import SKB, default_queries_path, load_queries, load_skb, select_queries
from grasp.skb.documents import CandidateSerializer, DocumentLayout, layout_for
from grasp.storage import Setting, stable_hash

S = TypeVar("S", bound=Setting)

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
        self.retrievers: dict[str, Retriever] = {}  # each method's retriever once built (grasp.methods.retriever)

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
    def synth_dir(self) -> Path:
        """Where `grasp synthesize` writes the queries (and their plans) it makes from this SKB."""
        return self.cache_dir / "synth"

    @property
    def synth_examples_path(self) -> Path:
        """Worked examples `grasp synthesize` chose among its queries (read when no others exist)."""
        return self.synth_dir / "examples.jsonl"

    @property
    def drawn_examples_path(self) -> Path:
        """Worked examples drawn from the KB and worded by templates: what the planner of a KB with no other
        examples is shown (made on first use, in seconds)."""
        return self.cache_dir / "drawn-examples.jsonl"

    def drawn_examples(self) -> list:
        """The examples at :attr:`drawn_examples_path`, drawn first where the file is missing."""
        from grasp.plan.prompt import read_examples

        if self.drawn_examples_path.exists():
            return read_examples(self.drawn_examples_path)
        from grasp.synth.synthesize import draw_examples

        return draw_examples(self.skb, self.layout, self.drawn_examples_path, seed=self.config.seed)

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
        """Where `grasp train mfar` keeps checkpoints, the training log and the best weights: one folder per mFAR
        configuration (its training arguments included), encoder and document layout."""
        cfg = self.config.mfar
        key = [cfg.model_dump(mode="json", exclude=marked(type(cfg), "serving_only")),
               encoder_weights_id(self.config.encoder), self.layout.key, *self._synthetic_key()]
        return self.cache_dir / f"mfar-train-{stable_hash(key)}"

    @property
    def reranker_dir(self) -> Path:
        """Where `grasp train reranker` keeps its records, checkpoints and the adapter: one folder per trained
        reranker's identity (base, kind, input), i.e. its configuration less how it is served and how it is
        trained (the training arguments live in its checkpoint and grasp_train.json)."""
        cfg = self.config.reranker
        identity = cfg.model_dump(exclude={"train", *marked(type(cfg), "serving_only")})
        return self.cache_dir / f"reranker-{stable_hash([identity, self.layout.key, *self._synthetic_key()])}"

    def _synthetic_key(self) -> list[str]:
        """What sets apart the training folders of stages trained on synthetic queries (labelled: nothing)."""
        return ["queries:synthetic"] if self.queries_source == "synthetic" else []

    def reset(self) -> None:
        """Forget the retrievers and the planner built so far: an artifact, a setting or the worked examples they
        read has just been written."""
        self.retrievers.clear()
        self.__dict__.pop("planner", None)

    # --- artifacts and settings -------------------------------------------------------------

    def artifact_path(self, name: str) -> Path:
        """Where this workspace writes a trained artifact: a setting's file (``fusion.json``, ...),
        ``mfar/weights.pt`` or ``reranker/adapter``."""
        if name.startswith("mfar/"):
            return self.mfar_dir / name.removeprefix("mfar/")
        if name.startswith("reranker/"):
            return self.reranker_dir / name.removeprefix("reranker/")
        # settings tuned on synthetic queries never take the place of those tuned on the KB's labelled ones
        return (self.cache_dir / "synthetic" if self.queries_source == "synthetic" else self.cache_dir) / name

    def _artifact_candidates(self, name: str) -> list[tuple[Path, bool]]:
        from grasp.plan.prompt import profile_of

        own = [(self.artifact_path(name), False)]
        if not self.config.artifacts.shipped:
            return own
        return [*own, (SHIPPED_MODELS / self.skb.schema.name / name, True), (SHIPPED_MODELS / profile_of(self.skb) / name, True)]

    def artifact(self, name: str, *, check: dict[str, Any] | None = None, loadable: set[str] | None = None) -> Path | None:
        """A trained artifact: this workspace's own, else (unless ``artifacts.shipped`` is false) one shipped with
        the package for this schema or its prompt profile (``grasp/data/models/<name or profile>/<name>``: the demo KB, a
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
        """What an artifact must have been made with to serve this configuration (:func:`grasp.methods.mfar_expects`
        adds mFAR's weight list, dense fields and dimension)."""
        from grasp.rerank.zero_shot import zero_shot_reranker_id

        c = self.config
        reranker = {"reranker.model": c.reranker.model, "reranker.max_field_tokens": c.reranker.max_field_tokens,
                    "reranker.max_neighbors": c.reranker.max_neighbors}
        out: dict[str, Any] = {"layout": self.layout.key}
        if name in (MFAR_WEIGHTS, MFAR_ENCODER, FUSION_SETTING, final_fusion_artifact(False)):
            out["encoder"] = encoder_weights_id(c.encoder)
        if name in (MFAR_WEIGHTS, FUSION_SETTING, final_fusion_artifact(False), final_fusion_artifact(True)):
            out["mfar.encoder"] = self.mfar_encoder_id()  # what mFAR's ranking, fused downstream, was made with
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
                                "queries": self.queries_source, **(context or {})}, note=note)
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
        self.reset()
        return self.record_artifact(name, data=data, context=context, check=check)

    def mfar_encoder_adapter(self) -> Path | None:
        """The LoRA adapter of mFAR's encoder when ``mfar.encoder_tuning=lora`` and `grasp train mfar` made one
        (this workspace's, else shipped); None: mFAR reads Stage 1's encoder and vectors."""
        if self.config.mfar.encoder_tuning == "frozen":
            return None
        return self.artifact(MFAR_ENCODER, check=self.expects(MFAR_ENCODER))

    def mfar_encoder_id(self) -> str:
        """Which encoder mFAR's dense scores come from ("base", or "lora:" and the adapter's digest): mFAR's
        weights, and every fusion setting over mFAR's ranking, are made for one."""
        from grasp.encode.tuned import adapter_digest

        if self.config.mfar.encoder_tuning == "frozen":
            return "base"
        adapter = self.mfar_encoder_adapter()
        return f"lora:{adapter_digest(adapter)}" if adapter is not None else "lora:untrained"

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
                             plans_file=self.plans_file, examples_files=(self.examples_path, self.synth_examples_path),
                             seed=self.config.seed, encoder=lambda: self.encoder, drawn_examples=self.drawn_examples)

    @cached_property
    def serializer(self) -> CandidateSerializer:
        """The reranker's view of a candidate, shared by training, serving and the stored vectors."""
        from grasp.rerank.build import build_serializer

        return build_serializer(self.config.reranker, self.skb, self.layout)

    # --- queries -----------------------------------------------------------------------------

    def default_queries_path(self) -> Path:
        """The queries read when none are named (``queries``): the KB's own, or the synthesized ones."""
        labelled, synthetic = default_queries_path(self.skb), self.synth_dir / "queries.jsonl"
        if self.config.queries == "synthetic" or (self.config.queries == "auto" and not labelled.exists()
                                                  and synthetic.exists()):
            return synthetic
        return labelled

    @property
    def queries_source(self) -> str:
        """Whether the default queries are the KB's own ("labelled") or synthesized ("synthetic")."""
        return "synthetic" if self.default_queries_path() == self.synth_dir / "queries.jsonl" else "labelled"

    def queries(self, path: Path | str | None = None, *, split: str | None = None, limit: int | None = None) -> list[Query]:
        path = Path(path) if path is not None else self.default_queries_path()
        if not path.exists():
            raise FormatError("queries file not found (pass --queries FILE, or a STaRK QA folder)", file=path)
        return select_queries(load_queries(path), split, limit)
