"""The causal-LM yes/no reranker (``reranker.kind = "llm-yes-no"``, grasp.rerank.llm_yes_no): its prompt,
P(yes) scores (batched with left padding = alone = by hand), one listwise training step through
``train_reranker``, and the adapter saved and reloaded.

A tiny Qwen2 with random weights and a byte-level BPE tokenizer trained here (as in test_torch_planner)
stand in for the real model; the slow test at the end runs the offline Qwen2.5-Coder-0.5B GGUF."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from grasp.config import RerankerConfig, RerankerTrainingConfig, load_config  # noqa: E402
from grasp.errors import ConfigError  # noqa: E402
from grasp.rerank import load_trained_reranker, train_reranker  # noqa: E402
from grasp.rerank.llm_yes_no import (  # noqa: E402
    INSTRUCTIONS,
    QWEN3_THINK,
    SYSTEM,
    LLMYesNoReranker,
    LLMYesNoTrainable,
    YesNoPrompts,
    instruction_for,
    with_skb_instruction,
)

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
QUERY = "sodium channel genes on chromosome 2"
SHORT = "type: gene\nname: SCN1A\nfull name: sodium voltage-gated channel alpha subunit 1"
LONG = ("type: process\nname: ion transport\ndefinition: The directed movement of charged atoms or small charged "
        "molecules into, out of or within a cell. ") * 6
TEXTS = {0: SHORT, 1: LONG, 2: "type: gene\nname: KCNQ2\nfull name: potassium voltage-gated channel Q2",
         3: "type: gene\nname: B3GALT6\nfull name: beta-1,3-galactosyltransferase 6", 4: "type: chromosome\nname: 2"}
RECORDS = [{"qid": "a", "query": QUERY, "positives": [0], "negatives": [1, 2, 3]},
           {"qid": "b", "query": "galactosyltransferase gene", "positives": [3], "negatives": [0, 2, 4]}]


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A local causal-LM checkpoint folder: a tiny random Qwen2 and its BPE tokenizer with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([SYSTEM, QUERY, *TEXTS.values(), *["yes", "no"] * 40] * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHATML
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    path = tmp_path_factory.mktemp("tiny-qwen2")
    Qwen2ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def llm_config(model, **kw) -> RerankerConfig:
    base = dict(kind="llm-yes-no", model=str(model), max_length=160, precision="fp32", train=RerankerTrainingConfig(epochs=1, global_batch=2, micro_batch=2, group_size=3, lr=5e-3, lora_r=4, lora_alpha=8, lora_dropout=0.0, save_every=1))
    return RerankerConfig(**{**base, **kw})


def test_the_prompt_holds_instruction_query_and_the_cut_document(tiny_lm):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm)
    prompts = YesNoPrompts(tok, "Judge genes", max_length=160)
    long_ids, short_ids = prompts.ids(QUERY, [LONG, SHORT])
    assert len(long_ids) == 160 and len(short_ids) < 160  # the long candidate is cut to fit, the short one is whole
    assert tok.decode(short_ids) == prompts.text(QUERY, SHORT)
    text = tok.decode(long_ids)
    assert text.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n<Instruct>: Judge genes\n"
                           f"<Query>: {QUERY}\n<Document>: type: process")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n") and LONG not in text
    # a Qwen3 template (it knows <think>) gets the empty thinking block; no template: the plain fallback
    qwen3 = copy.deepcopy(tok)
    qwen3.chat_template = CHATML + "{#- <think> -#}"
    assert YesNoPrompts(qwen3, "x", 160).text(QUERY, SHORT).endswith("<|im_start|>assistant\n" + QWEN3_THINK)
    plain = copy.deepcopy(tok)
    plain.chat_template = None
    assert YesNoPrompts(plain, "x", 160).text(QUERY, SHORT) == (f"{SYSTEM}\n\n<Instruct>: x\n<Query>: {QUERY}\n"
                                                               f"<Document>: {SHORT}\n\nAnswer:")
    # a max_length the fixed prompt nearly fills (MiniLM's default 128 under a long instruction) is refused, since
    # every candidate would be cut to nothing
    fixed = len(tok(prompts.text(QUERY, ""))["input_ids"])  # the prompt's tokens around the candidate
    with pytest.raises(ConfigError, match=r"reranker.max_length \d+ leaves \d+ tokens for the candidate"):
        YesNoPrompts(tok, "Judge genes", max_length=fixed + 10).ids(QUERY, [LONG])
    assert len(YesNoPrompts(tok, "Judge genes", max_length=fixed + 40).ids(QUERY, [LONG])[0]) == fixed + 40


def test_scores_are_p_yes_alone_batched_and_by_hand(tiny_lm):
    r = LLMYesNoReranker(str(tiny_lm), instruction="Judge genes", max_length=160, precision="fp32")
    ids = r.prompts.ids(QUERY, [SHORT])[0]
    with torch.no_grad():
        last = r.model(torch.tensor([ids])).logits[0, -1]
    no, yes = (r.prompts.tokenizer.convert_tokens_to_ids(w) for w in ("no", "yes"))
    by_hand = float(torch.log_softmax(last[[no, yes]], -1)[1].exp())
    alone = r.score(QUERY, [SHORT])
    batched = r.score(QUERY, [LONG, SHORT, TEXTS[2]])  # SHORT left-padded to LONG's length
    assert alone.shape == (1,) and batched.shape == (3,)
    assert alone[0] == pytest.approx(by_hand, abs=1e-5) and batched[1] == pytest.approx(by_hand, abs=1e-5)
    assert 0 < by_hand < 1 and len(set(np.round(batched, 6))) == 3
    assert r.score(QUERY, []).shape == (0,)


def test_one_training_step_then_save_and_reload(tiny_lm, tmp_path):
    cfg = llm_config(tiny_lm, instruction="Judge genes")
    state = train_reranker(RECORDS, TEXTS.__getitem__, tmp_path / "rr", config=cfg, progress=False)
    assert state["step"] == 1 and math.isfinite(state["log"][0]["loss"])
    adapter = tmp_path / "rr" / "adapter"
    meta = json.loads((adapter / "grasp_train.json").read_text())
    assert meta["kind"] == "llm-yes-no" and meta["instruction"] == "Judge genes" and meta["max_length"] == 160
    # the step moved the adapter: LoRA's B matrices start at zero
    trained = torch.load(tmp_path / "rr" / "checkpoint.pt", weights_only=False)["model"]
    assert any(k.endswith("lora_B.default.weight") and v.abs().sum() > 0 for k, v in trained.items())
    # the in-memory trained model (PEFT, unmerged) vs the adapter saved, reloaded and merged
    live = LLMYesNoTrainable(cfg)
    live.load_trainable_state(trained)
    live.net.eval()
    docs = [TEXTS[i] for i in (0, 1, 2, 3)]
    with torch.no_grad():
        want = torch.sigmoid(live.group_logits([QUERY], docs, [4]).double()).numpy()
    loaded = load_trained_reranker(str(tiny_lm), adapter, precision="fp32")
    assert isinstance(loaded, LLMYesNoReranker) and loaded.prompts.instruction == "Judge genes"
    np.testing.assert_allclose(loaded.score(QUERY, docs), want, atol=1e-5)
    base = LLMYesNoReranker(str(tiny_lm), instruction="Judge genes", max_length=160, precision="fp32")
    assert np.abs(base.score(QUERY, docs) - want).max() > 1e-4  # training changed the scores


def test_zero_shot_build_and_instructions(tiny_lm, toy_skb):
    from grasp.rerank.build import build_reranker

    generic = instruction_for(toy_skb)
    assert "toy knowledge base" in generic and "gene or process" in generic
    stark = SimpleNamespace(schema=SimpleNamespace(name="stark-prime", model_extra={}, candidate_types=["gene"]))
    assert instruction_for(stark) == INSTRUCTIONS["stark-prime"]
    cfg = with_skb_instruction(llm_config(tiny_lm), toy_skb)
    assert cfg.instruction == generic and with_skb_instruction(cfg, stark).instruction == generic  # set wins
    r = build_reranker(cfg, None, None)  # no adapter: the LLM answers zero-shot (the bi-encoder is not built)
    assert isinstance(r, LLMYesNoReranker) and r.prompts.instruction == generic


def test_a_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="reranker.kind 'llm-yes-no' needs a causal LM: set reranker.model"):
        load_config(overrides=["reranker.kind=llm-yes-no"])
    assert load_config(overrides=["reranker.kind=llm-yes-no", f"reranker.model={tmp_path}"]).reranker.model
    with pytest.raises(ConfigError, match="set reranker.model"):
        LLMYesNoReranker("minilm")
    with pytest.raises(ConfigError, match="grasp fetch reranker-llm"):
        LLMYesNoReranker(str(tmp_path / "absent.gguf"))


# --- the real model ----------------------------------------------------------------------------------
