"""A tiny Qwen2 chat model with random weights and a byte-level BPE tokenizer trained on the spot: the real
planner's code path (transformers, llguidance) at a size that decodes in milliseconds."""

from __future__ import annotations

import json

SYSTEM = "You turn questions into JSON plans. " * 6
SCHEMA = {"type": "object", "properties": {"label": {"enum": ["gene", "disease", "pathway"]},
                                           "risk": {"enum": ["weak", "normal"]}, "hops": {"type": "boolean"}},
          "required": ["label", "risk", "hops"], "additionalProperties": False}
QUERIES = ["which gene is on chromosome 2", "a disease", "pathways that involve sodium channels in neurons"]


def tiny_chat_model():
    """(tokenizer, model): a 2-layer Qwen2 (seeded weights) and a 420-token byte-level BPE with Qwen's chat
    template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([SYSTEM, *QUERIES, json.dumps(SCHEMA), '{"label": "gene", "hops": true}'] * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    return tokenizer, Qwen2ForCausalLM(config).eval()
