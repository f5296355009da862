"""The paper's Stage-3 reranker: a causal LM asked whether a candidate meets the query (Qwen3-Reranker style).

Prompt (Qwen3-Reranker's format): the system turn ``SYSTEM``, a user turn
``<Instruct>: {instruction}\\n<Query>: {query}\\n<Document>: {candidate}``, and the assistant turn opened
(Qwen3's chat template adds its empty ``<think>`` block there). The text comes from the tokenizer's chat
template when it has one, else from a plain fallback. Score = P("yes") from the log-softmax over the
[no, yes] logits at the last position; training's logit is logit(yes) - logit(no), so the listwise
loss over a group ranks by the same quantity.

The instruction is per dataset: the paper's three STaRK instructions (its Appendix 8.5) are empty in our
copy of the paper and could not be recovered, so the ones below are written in the spirit of
Qwen3-Reranker's; any other SKB gets one naming its candidate types (``reranker.instruction`` overrides).

Only the candidate is truncated: the instruction, query and the prompt's fixed parts are kept whole, the
candidate's tokens cut so the whole prompt fits ``max_length``. Prompts are left-padded in a batch, with
position ids counted from each prompt's first real token, so a candidate scores the same alone or batched.

The base model is a local transformers checkpoint folder or a GGUF file (dequantized once through
:func:`grasp.plan.gguf.convert_gguf`, kept beside it); a trained adapter folder holds the LoRA weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from grasp.config import RerankerConfig
from grasp.encode.encoder import inference_numerics, resolve_precision
from grasp.encode.tuned import load_transformer, lora_config
from grasp.errors import ConfigError
from grasp.rerank.base import Reranker
from grasp.rerank.trainable import TrainableScorer

SYSTEM = ('Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
          'Note that the answer can only be "yes" or "no".')
QWEN3_THINK = "<think>\n\n</think>\n\n"
_CUT = "\x00GRASP-DOCUMENT\x00"  # where the candidate goes in the rendered prompt
MIN_CANDIDATE_TOKENS = 32  # below this the yes/no judgement reads next to nothing of the candidate

# written for this project in Qwen3-Reranker's style: the paper's own wording was not recoverable
INSTRUCTIONS = {
    "stark-amazon": "Given a product search query from an online shopper, judge whether the product described in "
                    "the Document (its title, brand, description, reviews and related products) meets the "
                    "requirements of the query",
    "stark-mag": "Given a query looking for scientific papers, judge whether the paper described in the Document "
                 "(its title, abstract, authors, institutions, fields of study and citations) meets the "
                 "requirements of the query",
    "stark-prime": "Given a biomedical query over a precision-medicine knowledge graph, judge whether the entity "
                   "described in the Document (a disease, drug, gene/protein, pathway, phenotype, anatomy, "
                   "exposure, biological process, molecular function or cellular component, with its relations) "
                   "is an answer that meets the requirements of the query",
}
DEFAULT_INSTRUCTION = "Given a search query, judge whether the item described in the Document meets the requirements of the query"


def instruction_for(skb) -> str:
    """The instruction for an SKB: its STaRK dataset's (by prompt profile, as the planner picks its
    guidance), else a generic one naming the SKB's candidate types."""
    from grasp.plan.prompt import profile_of

    if profile_of(skb) in INSTRUCTIONS:
        return INSTRUCTIONS[profile_of(skb)]
    types = [t.replace("_", " ") for t in skb.schema.candidate_types]
    kinds = types[0] if len(types) == 1 else ", ".join(types[:-1]) + " or " + types[-1]
    return (f"Given a search query over the {skb.schema.name} knowledge base, judge whether the {kinds} described "
            "in the Document meets the requirements of the query")


def with_skb_instruction(cfg: RerankerConfig, skb) -> RerankerConfig:
    """``cfg`` with ``instruction`` set to the SKB's when unset (what training records and serving reads)."""
    return cfg if cfg.instruction is not None else cfg.model_copy(update={"instruction": instruction_for(skb)})


def load_causal_lm(model: str, adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, causal LM in float32) of a checkpoint folder or a ``.gguf`` file, a LoRA adapter merged in."""
    from transformers import AutoModelForCausalLM

    if model == "minilm":
        raise ConfigError("reranker.kind 'llm-yes-no' needs a causal LM: set reranker.model to a local checkpoint "
                          "folder or a .gguf file (`grasp fetch reranker-llm` prints one)")
    path = Path(model).expanduser()
    if path.suffix.lower() == ".gguf":
        from grasp.plan.gguf import convert_gguf

        if not path.is_file():
            raise ConfigError(f"{path}: GGUF model not found (`grasp fetch reranker-llm` fetches the 0.5B one)")
        path = convert_gguf(path)
    elif not path.is_dir():
        raise ConfigError(f"reranker.model {model!r}: no such checkpoint folder (the llm-yes-no reranker loads a "
                          "local folder or a .gguf file)")
    return load_transformer(AutoModelForCausalLM, str(path), adapter, device)


class YesNoPrompts:
    """Token ids of (query, candidate) prompts, the candidate cut to fit ``max_length``, left-padded in a batch."""

    def __init__(self, tokenizer, instruction: str | None, max_length: int) -> None:
        self.tokenizer, self.max_length = tokenizer, max_length
        self.instruction = instruction or DEFAULT_INSTRUCTION
        ids = [tokenizer.encode(w, add_special_tokens=False) for w in ("no", "yes")]
        if any(len(i) != 1 for i in ids):
            raise ConfigError(f"the reranker's tokenizer does not spell 'no' and 'yes' as one token each ({ids})")
        self.answer_ids = [ids[0][0], ids[1][0]]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = int(pad if pad is not None else 0)

    def text(self, query: str, document: str) -> str:
        """The whole prompt (the candidate untruncated)."""
        before, after = self._parts(query)
        return before + " " + document + after

    def _parts(self, query: str) -> tuple[str, str]:
        """The prompt's text before and after the candidate."""
        user = f"<Instruct>: {self.instruction}\n<Query>: {query}\n<Document>:{_CUT}"
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        template = getattr(self.tokenizer, "chat_template", None)
        if template:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                      enable_thinking=False)
            if "<think>" in template and not text.endswith(QWEN3_THINK):  # a Qwen3 template without the switch
                text += QWEN3_THINK
        else:
            text = f"{SYSTEM}\n\n{user}\n\nAnswer:"
        before, after = text.split(_CUT)
        return before, after

    def ids(self, query: str, documents: Sequence[str]) -> list[list[int]]:
        """Each candidate's prompt ids: the fixed parts whole, the candidate's tokens cut to the room left. The
        candidate is tokenized with the space before it, as it reads in the whole prompt."""
        before, after = (self.tokenizer.encode(t, add_special_tokens=False) for t in self._parts(query))
        room = self.max_length - len(before) - len(after)
        if room < MIN_CANDIDATE_TOKENS:
            raise ConfigError(f"reranker.max_length {self.max_length} leaves {max(room, 0)} tokens for the candidate "
                              f"after the prompt's {len(before) + len(after)} (instruction, query, template): set "
                              f"reranker.max_length to at least {len(before) + len(after) + 256} (paper: 1024)")
        docs = self.tokenizer([" " + d for d in documents], add_special_tokens=False)["input_ids"] if documents else []
        return [before + d[:room] + after for d in docs]

    def batch(self, rows: Sequence[list[int]], device) -> dict[str, torch.Tensor]:
        """Left-padded input ids, attention mask and position ids (from each prompt's first real token)."""
        width = max(len(r) for r in rows)
        ids = torch.tensor([[self.pad_id] * (width - len(r)) + r for r in rows], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
        return {"input_ids": ids, "attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}

    def margins(self, net, rows: Sequence[list[int]]) -> torch.Tensor:
        """logit(yes) - logit(no) at the last position of each prompt."""
        logits = net(**self.batch(rows, next(net.parameters()).device), logits_to_keep=1,
                     use_cache=False).logits[:, -1]
        pair = logits[:, self.answer_ids].float()
        return pair[:, 1] - pair[:, 0]


class LLMYesNoReranker(Reranker):
    """Score = P("yes") of a causal LM (zero-shot, or with a trained LoRA adapter merged in)."""

    name = "llm-yes-no"

    def __init__(self, model: str, adapter: Path | None = None, *, instruction: str | None = None,
                 max_length: int = 512, batch_size: int = 8, device: str | None = None,
                 precision: str = "fp32") -> None:
        tokenizer, self.model = load_causal_lm(model, adapter, device=device)
        self.model.eval()
        self.prompts = YesNoPrompts(tokenizer, instruction, max_length)
        self.device = str(next(self.model.parameters()).device)
        self.precision = resolve_precision(precision, self.device)
        self.batch_size = batch_size

    @torch.no_grad()
    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        rows = self.prompts.ids(query, documents)
        out = []
        with inference_numerics(self.precision, self.device):
            for start in range(0, len(rows), self.batch_size):
                margin = self.prompts.margins(self.model, rows[start : start + self.batch_size])
                out.append(torch.sigmoid(margin.double()).cpu().numpy())  # = exp(log_softmax([no, yes]))[yes]
        return np.concatenate(out) if out else np.zeros(0)


class LLMYesNoTrainable(TrainableScorer):
    """LoRA on every linear layer of the causal LM; a candidate's logit is logit(yes) - logit(no)."""

    def __init__(self, cfg: RerankerConfig) -> None:
        from peft import get_peft_model

        tokenizer, base = load_causal_lm(cfg.model)
        if next(base.parameters()).is_cuda:  # the paper's groups of 24 at 1024 tokens need it on a GPU
            base.gradient_checkpointing_enable()
            base.enable_input_require_grads()
        self.net = get_peft_model(base, lora_config(cfg.train.lora_r, cfg.train.lora_alpha, cfg.train.lora_dropout, "CAUSAL_LM"))
        self.prompts = YesNoPrompts(tokenizer, cfg.instruction, cfg.max_length)

    def group_logits(self, queries, docs, sizes) -> torch.Tensor:
        rows, start = [], 0
        for q, n in zip(queries, sizes, strict=True):
            rows += self.prompts.ids(q, docs[start : start + n])
            start += n
        return self.prompts.margins(self.net, rows)

    def save(self, directory: Path) -> None:
        self.net.save_pretrained(str(directory))
