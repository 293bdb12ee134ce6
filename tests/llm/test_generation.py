"""Answer generation: token-budget batches, rows leaving the batch as their answers end, greedy
answers equal to ``model.generate``'s, and the counters of what was computed."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from codyra.experiment.config import ConfigError, load_config
from codyra.llm.collate import left_padded_inputs
from codyra.llm.generation import (
    CACHE_KEYWORD,
    GenerationStats,
    decode_batch,
    generate_answers,
    generate_batch,
    generation_config,
    pack_rows,
    packed_prefill,
    token_batches,
)
from codyra.mini.trace.tokenizer import train_bpe_tokenizer
from codyra.trace.data import LengthLimits, encode_prompt, prepare_tokenizer

CORPUS = [
    "Solve the math problem.\nQuestion: Anna has 3 apples and gets 4 more.\nAnswer:",
    "7",
    "Summarize the meeting.\nThe council approved new lights.\nSummary:",
    "Council approved new lights.",
]
PROMPTS = [
    "Answer:",
    "Solve the math problem.\nQuestion: Anna has 3 apples and gets 4 more.\nAnswer:",
    "Summary:",
    "The council approved new lights.\nSummary:",
    "Anna has 3 apples",
    "Question: Anna has 3 apples and gets 4 more.",
    "Council approved new lights.",
    "Summarize the meeting.\nThe council approved new lights.\nSummary:",
    "math",
    "Anna gets 4 more apples.\nAnswer:",
]
LIMITS = LengthLimits(max_prompt_len=64, max_answer_len=16)
NEW_TOKENS = 12


@pytest.fixture(scope="module")
def tokenizer():
    return prepare_tokenizer(train_bpe_tokenizer(CORPUS * 20, vocab_size=320))


def tiny_llama(tokenizer, eos_gain: float) -> LlamaForCausalLM:
    """A random 2-layer LLaMA whose EOS logit is scaled by ``eos_gain``, so that some answers end
    after a few tokens and others run to max_new_tokens."""
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight[tokenizer.eos_token_id] *= eos_gain
    return model


def reference_answers(model, tokenizer, prompts, batch_size, decoding="greedy"):
    """The old path: ``model.generate`` on fixed batches of prompts in input order."""
    config = generation_config(model, tokenizer, NEW_TOKENS, decoding, 0.1)
    answers = []
    for start in range(0, len(prompts), batch_size):
        inputs = left_padded_inputs(
            [encode_prompt(tokenizer, p, LIMITS) for p in prompts[start : start + batch_size]], tokenizer.pad_token_id
        )
        with torch.no_grad():
            output = model.generate(**inputs, generation_config=config)
        answers += tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return answers


def answers(model, tokenizer, prompts, **options):
    options = {"limits": LIMITS, "max_new_tokens": NEW_TOKENS, "batch_size": 4} | options
    return generate_answers(model, tokenizer, prompts, **options)


@pytest.mark.parametrize("min_new_tokens", [None, 3])
def test_greedy_answers_equal_generate_on_fixed_batches(tokenizer, min_new_tokens):
    model = tiny_llama(tokenizer, eos_gain=12.0)
    model.generation_config.min_new_tokens = min_new_tokens  # a processor generate applies: ours must too
    want = reference_answers(model, tokenizer, PROMPTS, batch_size=3)
    stats = GenerationStats()
    got = answers(model, tokenizer, PROMPTS, batch_tokens=80, stats=stats)
    assert got == want
    assert answers(model, tokenizer, PROMPTS, batch_size=5) == want  # batches of a fixed count
    # the case is one where rows leave: some answers end early, others run to max_new_tokens
    lengths = [len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in want]
    assert min(lengths) < NEW_TOKENS - 3 and stats.answer_tokens < len(PROMPTS) * NEW_TOKENS
    assert min(lengths) >= (min_new_tokens or 0) - 1  # EOS counts as one of the min_new_tokens


def test_answers_come_back_in_input_order(tokenizer):
    model = tiny_llama(tokenizer, eos_gain=12.0)
    alone = [answers(model, tokenizer, [p])[0] for p in PROMPTS]
    assert len(set(alone)) > 3  # distinct answers, so a permutation would show
    assert answers(model, tokenizer, PROMPTS, batch_tokens=80) == alone
    assert answers(model, tokenizer, PROMPTS[::-1], batch_tokens=200) == alone[::-1]


def test_sampling_uses_the_generation_config_and_the_seed(tokenizer):
    model = tiny_llama(tokenizer, eos_gain=12.0)
    sample = {"decoding": "sample", "temperature": 5.0, "batch_tokens": 80}
    drawn = answers(model, tokenizer, PROMPTS, seed=1, **sample)
    assert answers(model, tokenizer, PROMPTS, seed=1, **sample) == drawn
    assert drawn != answers(model, tokenizer, PROMPTS, seed=2, **sample)
    model.generation_config.top_k = 1  # top-k 1 leaves only the argmax to draw
    assert answers(model, tokenizer, PROMPTS, seed=1, **sample) == answers(model, tokenizer, PROMPTS)


def test_batches_fit_the_token_budget():
    lengths = [5, 2, 3, 8, 2]  # sorted longest first: 3 (8), 0 (5), 2 (3), 1 (2), 4 (2)
    # 2 x (8 + 4) = 24 fits; a third row would need 36. Then 3 x (3 + 4) = 21
    assert token_batches(lengths, max_new_tokens=4, batch_size=2, batch_tokens=24) == [[3, 0], [2, 1, 4]]
    assert token_batches(lengths, max_new_tokens=4, batch_size=2, batch_tokens=23) == [[3], [0, 2], [1, 4]]
    assert token_batches(lengths, max_new_tokens=4, batch_size=2, batch_tokens=5) == [[3], [0], [2], [1], [4]]
    assert token_batches(lengths, max_new_tokens=4, batch_size=2) == [[3, 0], [2, 1], [4]]
    assert token_batches(lengths, max_new_tokens=4, batch_size=1, batch_tokens=1000) == [[3, 0, 2, 1, 4]]


def test_prompts_pack_first_fit_longest_first():
    lengths = [5, 2, 3, 8, 2]  # longest first: 3 (8), 0 (5), 2 (3), 1 (2), 4 (2)
    assert pack_rows(lengths, 8) == [[3], [0, 2], [1, 4]]
    assert pack_rows(lengths, 10) == [[3, 1], [0, 2, 4]]  # 1 fills the first row's 2 free tokens
    assert pack_rows(lengths, 20) == [[3, 0, 2, 1, 4]]


@pytest.mark.parametrize("row_tokens", [None, 0])  # None: one packed row; 0: rows of the longest prompt
def test_packed_prefill_cache_equals_each_prompt_alone(tokenizer, row_tokens):
    model = tiny_llama(tokenizer, eos_gain=1.0)
    prompts = [encode_prompt(tokenizer, p, LIMITS) for p in PROMPTS]
    inputs = left_padded_inputs(prompts, tokenizer.pad_token_id)
    width, real = inputs["input_ids"].shape[1], sum(len(ids) for ids in prompts)
    cache, stats = DynamicCache(config=model.config), GenerationStats()
    options = {} if row_tokens is None else {"row_tokens": row_tokens}
    with torch.no_grad():
        logits = packed_prefill(model, inputs["input_ids"], inputs["attention_mask"], cache, stats, **options)
    # rows of 41 tokens: [41], [24, 11, 6], [21, 18] and [9, 5, 3, 3], 2 + 21 padding at their ends
    padded = 0 if row_tokens is None else 4 * width - real
    assert width == 41 and (stats.forward_passes, stats.computed_tokens, stats.padded_tokens) == (
        1,
        real + padded,
        padded,
    )
    for row, ids in enumerate(prompts):
        alone = DynamicCache(config=model.config)
        with torch.no_grad():
            want = model(input_ids=torch.tensor([ids]), use_cache=True, **{CACHE_KEYWORD: alone}).logits[0, -1]
        torch.testing.assert_close(logits[row], want)
        pad = width - len(ids)
        for packed_layer, alone_layer in zip(cache.layers, alone.layers, strict=True):
            for name in ("keys", "values"):
                got = getattr(packed_layer, name)[row]  # [heads, width, head dim]
                torch.testing.assert_close(got[:, pad:], getattr(alone_layer, name)[0])
                assert not got[:, :pad].any()


class EndsAtPositions(LlamaForCausalLM):
    """A LLaMA whose next token is EOS exactly when the last position id is in ``END_POSITIONS``."""

    END_POSITIONS = (1, 3, 7)

    def forward(self, *args, position_ids=None, logits_to_keep=0, **kwargs):
        output = super().forward(*args, position_ids=position_ids, logits_to_keep=logits_to_keep, **kwargs)
        if isinstance(logits_to_keep, torch.Tensor):  # a packed prefill: the logits of these positions
            last, logits = position_ids[logits_to_keep], output.logits
        else:
            last, logits = position_ids[:, -1], output.logits[:, -1]
        logits[:, self.config.eos_token_id] = torch.where(torch.isin(last, torch.tensor(self.END_POSITIONS)), 1e4, -1e4)
        return output


class GenerateOnly(torch.nn.Module):
    """A model that offers only ``generate`` (as the prompt-pool methods' PromptedLM)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    @property
    def generation_config(self):
        return self.model.generation_config

    def generate(self, **kwargs):
        return self.model.generate(**kwargs)


def test_counters_on_a_hand_computed_batch(tokenizer):
    model = tiny_llama(tokenizer, eos_gain=1.0)
    model.__class__ = EndsAtPositions
    config = generation_config(model, tokenizer, 6, "greedy", 0.1)
    # BOS + 1, 2 and 4 prompt tokens: last positions 1, 2, 4, so answers of 1, 2 and 4 tokens
    rows = [[tokenizer.bos_token_id, *range(10, 10 + n)] for n in (1, 2, 4)]
    inputs = left_padded_inputs(rows, tokenizer.pad_token_id)

    new = GenerationStats()
    leaving = decode_batch(model, inputs, config, new)
    assert [len(a) for a in leaving] == [1, 2, 4] and all(a[-1] == tokenizer.eos_token_id for a in leaving)
    # prefill: the 2 + 3 + 5 prompt tokens packed into one row of 10; then 2, 1 and 1 rows in 3 more steps
    assert (new.forward_passes, new.computed_tokens, new.padded_tokens, new.answer_tokens) == (4, 14, 0, 7)

    old = GenerationStats()
    assert generate_batch(model, inputs, config, old) == leaving
    # every row runs all 4 passes: 3 x (5 + 3) positions; padded: 5 left + 3 + 2 + 0 after EOS
    assert (old.forward_passes, old.computed_tokens, old.padded_tokens, old.answer_tokens) == (4, 24, 10, 7)
    assert old.padded_per_answer_token == 10 / 7 and new.forward_passes_per_answer_token == 4 / 7

    # a model that only generates takes generate_batch, with its counts
    prompts = [tokenizer.decode(row[1:]) for row in rows]
    stats = GenerationStats()
    got = answers(GenerateOnly(model), tokenizer, prompts, max_new_tokens=6, stats=stats)
    assert got == answers(model, tokenizer, prompts, max_new_tokens=6)
    assert stats.padded_tokens > 5 and stats.answers == 3


def test_bad_batch_tokens_is_refused_by_the_schema(tiny_cfg_dict):
    for bad, message in (
        (0, "config key eval.batch_tokens: 0 is less than the minimum of 1"),
        ("many", "eval.batch_tokens"),
    ):
        cfg = copy.deepcopy(tiny_cfg_dict)
        cfg["eval"]["batch_tokens"] = bad
        with pytest.raises(ConfigError, match=message):
            load_config(cfg)
    assert load_config(tiny_cfg_dict)["eval"]["batch_tokens"] is None  # default: batches of eval.batch_size
