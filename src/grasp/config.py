"""All configuration in one typed place.

Values come from, in increasing priority: the defaults below, a TOML file (``--config FILE``),
and ``--set section.key=value`` overrides on the command line.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from grasp.errors import ConfigError, first_error
from grasp.storage import cache_root

DEFAULT_SEED = 13  # every seeded step (training, sampling, the LLM) defaults to it


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


RESUMABLE: dict[str, Any] = {"json_schema_extra": {"resumable": True}}  # may change when a training run resumes
SERVING_ONLY: dict[str, Any] = {"json_schema_extra": {"serving_only": True}}  # how a trained part is used, not what it is


def marked(section: type[BaseModel], marker: str) -> frozenset[str]:
    """The fields of a configuration section that carry ``marker`` (:data:`RESUMABLE`, :data:`SERVING_ONLY`)."""
    return frozenset(name for name, f in section.model_fields.items()
                     if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get(marker))


class EncoderConfig(_Section):
    """The text encoder shared by the dense baseline, anchor linking, rescoring, mFAR's dense fields and the
    zero-shot bi-encoder reranker."""

    kind: Literal["sentence-transformers", "openai"] = Field(
        "sentence-transformers", description="sentence-transformers: a local model run in-process; openai: an "
        "OpenAI-compatible /v1/embeddings endpoint (base_url)")
    model: str = Field(
        "minilm",
        description="'minilm' (bundled all-MiniLM-L6-v2), a sentence-transformers name or local path, "
        "or the model name served by an OpenAI-compatible endpoint",
    )
    max_length: int = Field(256, ge=8, le=32768, description="token limit per text (paper: 512; 256 on Prime)")
    batch_size: int = Field(64, ge=1, description="texts per request (openai); a quarter of the most texts per batch "
                            "(sentence-transformers, whose batches are sized by tokens_per_batch)")
    tokens_per_batch: int = Field(2048, ge=64, description="padded tokens per batch (sentence-transformers)")
    precision: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "auto", description="auto: bf16 where the device multiplies bfloat16 natively (CPUs with AVX512-BF16 or "
        "AMX, recent GPUs), else fp32. bf16: matrix products in bfloat16 under autocast (normalisation and softmax in "
        "float32); int8: dynamic quantization of the Linear layers on CPU. Each precision's vectors are cached apart; "
        "speed and cosines to fp32: docs/benchmarks.md")
    device: str | None = Field(None, description="torch device; default: cuda if available, else cpu")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key")
    timeout_s: float = Field(60.0, gt=0, description="seconds before an embeddings request is retried (openai)")
    query_prefix: str = Field("", description="prepended to queries (instruction-tuned embedders)")


class VectorIndexConfig(_Section):
    """Where node vectors are searched (anchor linking, the dense baseline, mFAR's dense fields)."""

    backend: Literal["exact", "faiss", "milvus"] = Field(
        "exact", description="exact: every vector scored (two passes over large types); faiss: an HNSW graph in "
        "process, for million-node graphs; milvus: collections in Milvus (Milvus Lite in the cache, or a server by "
        "milvus_uri), for vectors past one machine")
    dtype: Literal["float16", "float32"] = Field("float16", description="how node vectors are stored on disk")
    chunk_rows: int = Field(65536, ge=1024, description="rows scored at a time by exact search")
    two_pass_rows: int = Field(8192, ge=1024, description="exact search over a float16 matrix of more rows runs in "
                               "two passes (half precision over every row, the best k + 1,024 rescored in float32: "
                               "the same ranking, 8x faster over bio's 63,805 genes)")
    faiss_m: int = Field(32, ge=4, description="HNSW graph degree (faiss backend; milvus with milvus_index=HNSW)")
    faiss_ef_search: int = Field(128, ge=8, description="HNSW search breadth (faiss backend; milvus with "
                                 "milvus_index=HNSW): recall against speed")
    milvus_uri: str | None = Field(None, description="milvus backend: a server's URI (http://host:19530) or a "
                                   "Milvus Lite folder ending in .db; default: milvus.db in the workspace's "
                                   "embeddings folder")
    milvus_token_env: str = Field("MILVUS_TOKEN", description="environment variable holding the Milvus token "
                                  "(user:password or an API key), when the server asks for one")
    milvus_index: Literal["FLAT", "HNSW", "AUTOINDEX"] = Field("HNSW", description="milvus backend: the "
                                                             "collections' index (FLAT: exact)")
    milvus_batch_rows: int = Field(4096, ge=1, description="milvus backend: rows inserted per request while loading")


class BM25Config(_Section):
    """BM25: the baseline, mFAR's lexical scorers and the lexical zero-shot reranker."""

    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
        "lucene", description="the BM25 variant (bm25s' names)")
    k1: float = Field(1.2, gt=0, description="term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="document-length normalisation")
    stopwords: str | None = Field("en", description="'en' or null")
    stemmer: str | None = Field("english", description="a PyStemmer language, or null")


class SearchConfig(_Section):
    """How deep every stage ranks."""

    depth: int = Field(100, ge=1, le=1000, description="results each retriever returns per query (grasp eval's default k; "
                       "the API keeps this many per stage, so stage ranks reach below the k it shows)")


class ServiceConfig(_Section):
    """`grasp serve`: the REST service's limits."""

    max_body_bytes: int = Field(65536, ge=1024, description="largest request body accepted (413 past it); a query "
                                "is at most 2,000 characters")


class FusionConfig(_Section):
    """Stage 2: the graph ranking fused with the dense partner's (the fusion itself is a tuned setting)."""

    depth: int = Field(100, ge=1, description="results of each branch (graph, mFAR) that Stage 2 fuses")
    w: float = Field(0.6, ge=0, le=1, description="untuned: the graph ranking's weight in the static RRF served where "
                     "`grasp tune fusion` saved no setting (a KB nobody labelled; how it was chosen: docs/defaults.md)")
    rrf_k: float = Field(100.0, gt=0, description="untuned: the RRF constant of that static fusion")
    evidence: bool = Field(True, description="`grasp tune fusion` also fits the plan confidence (P(the graph's top "
                           "answer is right) from evidence) and tries confidence RRF, which weighs the graph by it")


class PlannerConfig(_Section):
    """Stage-1 planning: which LLM, with or without the schema grammar, and its cache."""

    kind: Literal["local", "openai", "cache"] = Field(
        "local", description="local: GGUF in-process (xllamacpp); openai: an OpenAI-compatible endpoint; "
        "cache: replay cached plans only")
    model_path: Path | None = Field(None, description="GGUF file; default: the fetched Qwen2.5-Coder-1.5B in the cache")
    model: str = Field("qwen2.5-coder-1.5b-instruct-q4_k_m", description="model name (sent to an endpoint; cache key)")
    base_url: str | None = Field(None, description="planner.kind=openai: the endpoint, e.g. http://localhost:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the endpoint's API key")
    on_miss: Literal["error", "no_trade"] = Field(
        "error", description="kind=cache and a query without a cached plan: fail, or degrade it to no_trade "
        "(Stage 2 then uses the dense branch alone)")
    grammar: bool = Field(True, description="constrain decoding with a JSON schema built from the SKB's schema")
    format: Literal["flat", "nested"] = Field(
        "nested", description="the plan the model writes: nested (a tree rooted at the target, whose grammar cannot "
        "express a malformed plan; grasp.plan.nested) or flat (anchors, hops, target: the earlier format)")
    examples: Literal["auto", "workspace", "none"] = Field(
        "auto", description="the worked examples the prompt shows: auto = the prompt profile's hand-written ones (bio, "
        "pkg, STaRK's), else those `grasp plans examples` drew from this KB's train split, else those `grasp "
        "synthesize` chose, else (planner.draw_examples) queries drawn from the KB and worded by templates (no LLM; "
        "made once, in seconds); workspace: only the last three (never the hand-written ones); none: the schema alone. "
        "The plan cache is keyed by the prompt, so plans made with examples are not replayed without them")
    draw_examples: bool = Field(False, description="planner.examples=auto or workspace, and the KB has no other "
                                "examples: show queries drawn from the KB and worded by templates (off: on a KB that "
                                "did not choose the defaults they made the plans worse, docs/defaults.md); false: the "
                                "schema alone")
    examples_file: Path | None = Field(None, description="worked examples read from this JSONL (one {qid, query, plan} "
                                       "a line, as `grasp plans examples` writes) in place of the ones "
                                       "planner.examples picks (not with planner.examples=none)")
    bank: bool = Field(False, description="show each query the nearest questions of the workspace's bank of "
                       "verified plans (`grasp plans bank`) as its worked examples, in place of the static ones "
                       "(kept where the KB has no bank); plans made with a bank are cached apart")
    bank_dir: Path | None = Field(None, description="planner.bank: the folder of the bank (bank.jsonl) to use; "
                                  "default: the one `grasp plans bank` writes, beside the workspace's plan cache")
    bank_k: int = Field(4, ge=1, le=12, description="planner.bank: worked examples shown per query")
    bank_keep_static: bool = Field(False, description="planner.bank: keep the static examples in the shared system "
                                   "prompt too (the nearest ones are then added to them)")
    bank_match: Literal["masked", "query"] = Field(
        "masked", description="planner.bank: compare the query with the banked questions with their anchor names "
        "masked (the question's shape) or as written")
    bank_per_shape: int = Field(3, ge=1, description="`grasp plans bank`: phrasings kept per plan shape")
    schema_link: int = Field(0, ge=0, description="schema linking: on a schema with more relations than this, show "
                             "each query only the this-many relations nearest it (and their end types) and decode under "
                             "the grammar of that part (grasp.plan.schema_link); 0: always the whole schema")
    retries: int = Field(1, ge=0, le=5, description="re-asks with the validation error fed back")
    samples: int = Field(1, ge=1, le=9, description="plans per query (execution-guided planning): the greedy plan "
                         "and samples-1 drawn at planner.temperature; Stage 1 executes each, fuses their candidates "
                         "and lowers the risk level when they disagree")
    temperature: float = Field(0.7, gt=0, le=2, description="sampling temperature of the extra plans")
    max_tokens: int = Field(400, ge=64, description="longest plan decoded, in tokens")
    engine: Literal["auto", "llama.cpp", "torch"] = Field(
        "auto", description="what runs the local GGUF: llama.cpp (xllamacpp, its generic AVX2 build) or PyTorch in "
        "bfloat16, many requests decoded as one batch over a shared prompt prefix (grasp.plan.torch_llm); auto: torch "
        "where the CPU multiplies bfloat16 natively, else llama.cpp")
    batch: int = Field(32, ge=1, le=256, description="requests the torch engine decodes at once (the planner keeps "
                       "this many in flight; plans per hour by batch size: docs/benchmarks.md)")
    precision: Literal["auto", "bf16", "fp32", "int8"] = Field(
        "auto", description="torch engine numerics: auto = bf16 where the CPU multiplies bfloat16 natively, else fp32; "
        "int8 = every linear layer dynamically quantized (a quarter of bf16's bytes read per token; docs/benchmarks.md)")
    draft_tokens: int = Field(16, ge=0, le=64, description="torch engine, a question planned alone: the most "
                              "tokens drafted (those the grammar forces, then those copied from the prompt) and checked "
                              "in one forward pass; the plan is greedy decoding's, several tokens a pass (0: one)")
    llama_speculative: Literal["none", "ngram_simple", "ngram_map_k"] = Field(
        "none", description="llama.cpp engine: its n-gram speculative decoding (drafts copied from the prompt); "
        "measured slower than none with the plan grammar (docs/benchmarks.md)")
    threads: int | None = Field(None, ge=1, description="CPU threads of the local model; default: every core")
    slots: int = Field(2, ge=1, le=16, description="sequences the local model decodes at once (llama.cpp parallel "
                       "slots, continuous batching); each slot keeps its own copy of the prompt prefix")
    flash_attn: bool = Field(True, description="flash attention in the local model (faster over the long prompt)")
    n_ctx: int = Field(8192, ge=1024, description="context per slot")
    workers: int = Field(4, ge=1, description="concurrent requests to an OpenAI-compatible endpoint")
    timeout_s: float = Field(120.0, gt=0, description="seconds before a request to the endpoint is retried")
    cache_file: Path | None = Field(None, description="writable plan cache; default: <index dir>/plans.jsonl")


class GraphConfig(_Section):
    """Stage-1 execution: anchor linking, the graph engine, dense rescoring."""

    engine: Literal["kuzu", "ladybug", "memory", "neo4j"] = Field(
        "kuzu", description="kuzu: embedded graph database (Cypher); ladybug: LadybugDB, Kùzu's maintained fork "
        "(pip install 'grasp-retrieval[ladybug]'; not in one process with kuzu); memory: the CSR executor (same "
        "scores); neo4j: a Neo4j 5 / Bolt server")
    name_k: int = Field(5, ge=1, description="anchor linking in name mode: at most this many nodes per anchor")
    name_tau: float = Field(0.95, ge=0, le=1, description="name mode: keep matches whose cosine is at least tau x "
                            "the best match's")
    doc_k: int = Field(10, ge=1, description="anchor linking in doc mode (a description, matched against whole "
                       "documents): at most this many nodes per anchor")
    doc_tau: float = Field(0.90, ge=0, le=1, description="doc mode: keep matches whose cosine is at least tau x the "
                           "best match's")
    rescore: bool = Field(True, description="add each candidate's match with the plan's relevance text (and with the "
                          "query: graph.query_weight) to its anchor score; false: the anchor score alone")
    query_weight: float = Field(0.1, ge=0, description="graph.rescore: also add this x how well the candidate "
                                "matches the query itself: the query's words order the candidates a plan's anchors "
                                "leave tied and catch what the relevance text left out (chosen on validation: "
                                "docs/experiments.md); 0: the relevance text alone")
    lexical_weight: float = Field(0.75, ge=0, description="graph.rescore: a text's match with a candidate is its "
                                  "dense cosine plus this x its BM25 score over the candidates' best (the words an "
                                  "encoder blurs: names, terms); 0: the dense cosine alone, as the paper")
    replan: Literal["off", "empty", "empty_or_hub"] = Field(
        "off", description="re-planning from execution feedback: when a plan returns no candidate (empty), or also "
        "more than graph.replan_hub (empty_or_hub), ask the planner once more with what the execution found (its "
        "anchors' links), and keep the new plan if it returns candidates (fewer, for a hub); an LLM call more")
    replan_hub: int = Field(1000, ge=1, description="graph.replan=empty_or_hub: candidates above which a plan counts "
                            "as a hub's")
    description_floor: float = Field(0.0, ge=0, le=1, description="a name anchor whose best linked node names it "
                                     "less well than this (the name holds not all its words, and their cosine is "
                                     "lower) is read as a description: its branch is dropped and its words join the "
                                     "relevance text; a plan left with no anchor matches the target's documents "
                                     "(grasp.graph.descriptions); 0: never")
    buffer_pool_mb: int = Field(1024, ge=64, description="Kùzu buffer pool (it defaults to 80% of RAM otherwise)")
    neo4j_uri: str = Field("bolt://localhost:7687", description="engine=neo4j: the Bolt server")
    neo4j_user: str = Field("neo4j", description="engine=neo4j: the user")
    neo4j_password_env: str = Field("NEO4J_PASSWORD", description="environment variable holding the password")
    neo4j_database: str | None = Field(None, description="engine=neo4j: the database (default: the server's)")


class MFARTrainingConfig(_Section):
    """`grasp train mfar`'s arguments: how mFAR's field weights (and, with ``encoder_tuning=lora``, its encoder) are
    trained. They shape the training folder's identity, not what is served."""

    epochs: int = Field(10, ge=1, description="most epochs of the weights-only phase (it early-stops on validation)")
    batch_size: int = Field(32, ge=2, description="queries per contrastive batch (the others' positives are negatives)")
    lr: float = Field(5e-3, gt=0, description="learning rate of the field weights")
    temperature: float = Field(0.05, gt=0, description="softmax temperature of the contrastive loss")
    patience: int = Field(2, ge=0, description="epochs without validation gain before stopping")
    hard_negative_ranks: tuple[int, int] = Field((51, 100), description="ranks of the single-field BM25 run the "
                                                 "hard negative is sampled from (positives removed)")
    encoder_epochs: int = Field(3, ge=1, description="lora: epochs of the joint encoder phase (before the "
                                "weights-only phase, which early-stops on validation)")
    encoder_lr: float = Field(3e-4, gt=0, description="lora: learning rate of the encoder's LoRA parameters")
    encoder_lora_r: int = Field(16, ge=1, description="lora: rank (alpha = 2r, dropout 0.05, every linear layer)")
    train_split: str = Field("train", description="the queries it trains on")
    val_split: str = Field("val", description="the queries it early-stops on")


class MFARConfig(_Section):
    """Stage 2's dense partner: mFAR's fields and scorers, and (``train``) how its weights are trained."""

    fields: list[str] | None = Field(None, description="restrict to these field names (default: all of the SKB's)")
    dense_fields: list[str] | None = Field(
        ["name", "single"], description="fields that also get a dense scorer (null: every field, mFAR's full setup). "
        "name and single reuse the Stage-1 vector indexes; every other field costs an embedding pass over the KB")
    max_names: int = Field(64, ge=1, description="neighbour names per relation field")
    untrained: Literal["document", "uniform"] = Field(
        "document", description="the field weights served where `grasp train mfar` made none: document = BM25 and "
        "dense on the whole document (the single field), half each; uniform = every (field, scorer) pair alike, "
        "mFAR's own initialisation (how it was chosen: docs/defaults.md). Training always starts from uniform",
        **SERVING_ONLY)
    depth: int = Field(100, ge=1, description="top-k of every (field, scorer) pooled before scoring")
    encoder_tuning: Literal["frozen", "lora"] = Field(
        "frozen", description="frozen: only the field weights train (the encoder is Stage 1's); lora: mFAR's own "
        "recipe, the encoder fine-tuned too (LoRA, trained jointly with the weights under the same contrastive loss), "
        "after which mFAR's dense fields are re-encoded with it (Stage 1's linking keeps the base encoder)")
    train: MFARTrainingConfig = MFARTrainingConfig()


class RerankerTrainingConfig(_Section):
    """`grasp train reranker`'s arguments (CPU-sized defaults). Those marked resumable may change when an
    interrupted run resumes (more epochs continue it; checkpoints and validation are bookkeeping); any other
    change starts over."""

    epochs: int = Field(2, ge=1, description="paper: 2; the shipped pkg adapter: 4 (on a GPU)", **RESUMABLE)
    lr: float = Field(2e-4, gt=0, description="paper: 3e-5 (for its 0.6B LLM reranker; too low for LoRA on MiniLM)")
    head_lr: float = Field(1e-3, gt=0, description="learning rate of a scoring head trained from zero (cross-encoder)")
    warmup: float = Field(0.05, ge=0, lt=1, description="share of the steps the learning rate warms up over "
                          "(cosine schedule after)")
    global_batch: int = Field(16, ge=1, description="queries per optimiser step (accumulated over micro batches)")
    micro_batch: int = Field(4, ge=1, description="groups per forward pass (memory, not results)")
    group_size: int = Field(8, ge=2, description="1 positive + negatives per group (paper: 24; CPU default 8)")
    hard_negatives: int = Field(30, ge=1, description="highest-ranked non-gold candidates of the upstream pool "
                                "kept per training query (each group samples from them)")
    lora_r: int = Field(32, ge=1, description="LoRA rank")
    lora_alpha: int = Field(64, ge=1, description="LoRA scaling")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the LoRA layers")
    save_every: int = Field(50, ge=1, description="training steps between checkpoints (an interrupted run resumes)",
                            **RESUMABLE)
    eval_every: int = Field(0, ge=0, description="training steps between validations of the reranker alone on "
                            "validation pools (0: only at the end); logged for `grasp report`'s training curve",
                            **RESUMABLE)
    eval_queries: int = Field(100, ge=1, description="validation queries scored at each of those validations",
                              **RESUMABLE)
    train_split: str = Field("train", description="the queries it trains on")
    val_split: str = Field("val", description="the queries it is validated on", **RESUMABLE)


class RerankerConfig(_Section):
    """Stage 3: the reranker and (``train``) how `grasp train reranker` trains it. Fields marked serving-only choose
    how a reranker is used, not what a trained one is (they stay out of its training folder's identity)."""

    kind: Literal["cross-encoder", "bi-encoder", "llm-yes-no"] = Field(
        "bi-encoder", description="what `grasp train reranker` trains: a cross-encoder (query and candidate read "
        "together, a linear head on the mean token state), LoRA on the zero-shot bi-encoder's encoder, or the "
        "paper's causal-LM yes/no reranker (score P(yes); also used zero-shot, untrained, by grasp-zs); the trained "
        "adapter records its kind")
    zero_shot: Literal["auto", "bm25", "bi-encoder", "hybrid"] = Field(
        "auto", description="the untrained reranker of grasp-zs (kind llm-yes-no: that LLM instead): the MiniLM "
        "bi-encoder's cosine, BM25 of the query against the serialized candidate (frequencies over the pool), "
        "hybrid (the two standardised over the pool and added), or "
        "auto: `grasp tune rerank --zero-shot` tunes the final fusion with each and keeps the one "
        "cross-validation prefers (recorded in the setting, which serving reads)", **SERVING_ONLY)
    model: str = Field("minilm", description="base model: 'minilm' or a local transformers checkpoint; for "
                       "llm-yes-no a causal-LM checkpoint folder or a .gguf file (`grasp fetch reranker-llm`)")
    instruction: str | None = Field(None, description="llm-yes-no: the <Instruct> line of the prompt; default: the "
                                    "SKB's own (STaRK amazon/mag/prime, else one naming its candidate types); a "
                                    "trained adapter records the one it was trained with and keeps it", **SERVING_ONLY)
    depth: int = Field(100, ge=1, description="upstream candidates reranked", **SERVING_ONLY)
    max_length: int = Field(128, ge=32, description="tokens per candidate (a pair, for the cross-encoder) at "
                            "training; a trained adapter records it and inference uses it (paper: 1024; 2048 on "
                            "Prime; training time grows with it: docs/stages-2-3.md)")
    max_field_tokens: int = Field(300, ge=8, description="per-field truncation of the serialization (paper: 300/512)")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="numerics of a trained reranker at inference (as encoder.precision; training stays "
        "fp32); stored candidate vectors are kept apart per precision", **SERVING_ONLY)
    max_neighbors: int = Field(10, ge=0, description="neighbours per relation in a candidate's serialization")
    final_w: float = Field(0.0, ge=0, le=1, description="untuned: the reranker's weight in the static final fusion "
                           "served where `grasp tune rerank` saved no setting (0: no untuned reranker helped every KB "
                           "it was chosen on, so the fused ranking is served; docs/defaults.md)",
                           **SERVING_ONLY)
    final_rrf_k: float = Field(1.0, gt=0, description="untuned: the RRF constant of that final fusion",
                               **SERVING_ONLY)
    final_depth: int = Field(30, ge=1, description="untuned: the upstream candidates reranked for that final fusion "
                             "(reranker.depth, when set, wins)", **SERVING_ONLY)
    train: RerankerTrainingConfig = RerankerTrainingConfig()

    @model_validator(mode="after")
    def _llm_needs_a_model(self) -> RerankerConfig:
        if self.kind == "llm-yes-no" and self.model == "minilm":
            raise ValueError("reranker.kind 'llm-yes-no' needs a causal LM: set reranker.model to a local "
                             "checkpoint folder or a .gguf file (`grasp fetch reranker-llm` prints one)")
        return self


# the relational pattern kinds `grasp synthesize` can draw (grasp.synth.patterns), and those it draws by default
SynthKind = Literal["1hop", "2hop", "2anchor", "text", "2anchor-same", "2anchor-2hop"]
DEFAULT_SYNTH_KINDS: tuple[SynthKind, ...] = ("1hop", "2hop", "2anchor", "text")


class SynthConfig(_Section):
    """`grasp synthesize` (and `grasp prepare` on a KB without labelled queries): training queries made from the KB."""

    n: int = Field(2000, ge=1, description="queries to make (fewer where the KB runs out of distinct ones)")
    max_answers: int = Field(10, ge=1, description="most gold answers a query may have")
    val_share: float = Field(0.2, ge=0, le=1, description="share of the queries put in the val split")
    llm: bool = Field(True, description="word the queries with the planner's LLM where one is there (its replies "
                      "cached); false: templates")
    kinds: tuple[SynthKind, ...] = Field(
        DEFAULT_SYNTH_KINDS, min_length=1,
        description="the pattern kinds drawn, each an equal share of the draws: one hop, two hops, two anchors over "
        "different relations, text only; also 2anchor-same (two anchors over one relation) and 2anchor-2hop (two "
        "anchors, one two hops away), e.g. --set 'synth.kinds=[\"1hop\",\"2hop\",\"2anchor\",\"text\",\"2anchor-same\"]'")


class ArtifactsConfig(_Section):
    """How trained artifacts (mFAR weights, fusion settings, reranker adapters) are checked when loaded."""

    shipped: bool = Field(True, description="read the trained artifacts the package ships for this KB's schema "
                          "(bio, pkg and the demo have them); false: only this workspace's own, as for a KB nobody "
                          "prepared")
    on_mismatch: Literal["error", "warn"] = Field(
        "error", description="an artifact whose manifest says it was made for another configuration: refuse it, "
        "or load it with a warning naming the difference (never when it cannot load: another dimension or field set)")


class GraspConfig(_Section):
    cache_dir: Path | None = Field(None, description="index cache root; default $GRASP_CACHE_DIR or ~/.cache/grasp")
    document_layout: str | None = Field(None, description="override the SKB's document layout")
    encoder: EncoderConfig = EncoderConfig()
    vector_index: VectorIndexConfig = VectorIndexConfig()
    bm25: BM25Config = BM25Config()
    search: SearchConfig = SearchConfig()
    service: ServiceConfig = ServiceConfig()
    planner: PlannerConfig = PlannerConfig()
    graph: GraphConfig = GraphConfig()
    mfar: MFARConfig = MFARConfig()
    fusion: FusionConfig = FusionConfig()
    reranker: RerankerConfig = RerankerConfig()
    synth: SynthConfig = SynthConfig()
    artifacts: ArtifactsConfig = ArtifactsConfig()
    seed: int = Field(DEFAULT_SEED, description="every seeded step: training, sampled plans, the LLM")
    queries: Literal["auto", "labelled", "synthetic"] = Field(
        "auto", description="the queries training, tuning and evaluation read by default: the KB's own "
        "qa/queries.jsonl (labelled), those `grasp synthesize` wrote into the workspace (synthetic), or auto: "
        "labelled where the KB has them, else synthetic")

    @property
    def cache_root(self) -> Path:
        """The resolved cache root (``cache_dir``, else ``$GRASP_CACHE_DIR``, else ``~/.cache/grasp``)."""
        return cache_root(self.cache_dir)


RENAMED = {("eval", "k"): "search.depth",
           **{("mfar", key): f"mfar.train.{key}" for key in MFARTrainingConfig.model_fields},
           **{("reranker", key): f"reranker.train.{key}" for key in RerankerTrainingConfig.model_fields}}


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def load_config(path: Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> GraspConfig:
    """Build the configuration from a TOML file and ``key.sub=value`` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: invalid TOML: {e}") from None
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. encoder.max_length=512")
        key, raw = item.split("=", 1)
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {part!r} is not a section")
        node[parts[-1]] = _parse_value(raw)
    for (section, key), new in RENAMED.items():
        if isinstance(data.get(section), dict) and key in data[section]:
            raise ConfigError(f"config field '{section}.{key}' is now '{new}'")
    try:
        return GraspConfig.model_validate(data)
    except ValidationError as e:
        loc, msg = first_error(e)
        raise ConfigError(f"config field '{loc}': {msg}") from None
