"""Batched answer generation for TRACE prompts.

Prompts are ``BOS + prompt`` (cut from the left to ``llm.max_prompt_len``), left-padded so
every row ends with its last prompt token. Answers come back in the input order.

Batches. Prompts are sorted by token count (longest first) and cut into batches either of
``batch_size`` prompts or, with ``batch_tokens`` (config ``eval.batch_tokens``), of as many
prompts as fit ``rows x (longest prompt of the batch + max_new_tokens) <= batch_tokens``
(:func:`token_batches`; at least one prompt each). That product is the most positions the KV
cache of the batch ever holds, so the budget bounds the cache's memory whatever the prompt
lengths: short prompts share large batches, long ones small ones.

Decoding (:func:`decode_batch`) is our own loop over the model's forward with a
``DynamicCache``, as ``generate`` runs it for a LLaMA, but for the prefill: the logits of each
prompt's last token in fp32, the processors ``generate`` builds from the generation config
(``model._get_logits_processor``: min_new_tokens, repetition penalty, and when sampling
temperature, top-k, top-p), then one position per row and step. A row whose token is an EOS id
(the generation config's ``eos_token_id`` list plus the tokenizer's) leaves the batch at once
(its input ids, attention mask, position ids and cache rows), so no row computes past its answer
and a batch costs as much as its answers, not its longest answer times its rows. Greedy answers
equal ``model.generate``'s on fixed batches in fp32 (tests/llm/test_generation.py). In bf16 a
different batch composition can change the arithmetic enough to flip a near-tie of logits.

Prefill (:func:`packed_prefill`). A left-padded prefill computes every pad position, padding
that rows leaving does not remove. Instead the batch's prompts are packed, first-fit longest
first, into rows of up to ``PACKED_ROW_TOKENS`` (2048) tokens or the longest prompt, padded
only at the end of a packed row to the longest packed row (no padding when one row holds the
batch, as on the mini), under a block-diagonal causal 4D mask (additive: eager and sdpa
attention take it) and position ids restarting at 0 for each prompt, as the left-padded rows
give their real tokens (``attention_mask.cumsum(-1) - 1``, transformers'
``_prepare_position_ids_for_generation``). One forward pass; then each prompt's keys and
values are moved, layer by layer, into the left-padded layout the decoding steps extend
(zeros on padding, masked by the 2D mask). Why bounded rows and not one sequence: with a dense
mask attention computes every (query, key) pair of a row, masked or not, so a row of n tokens
costs n^2. One sequence for a batch of TRACE's budget (up to ~43k prompt tokens at 1024-token
prompts) would need a 43k x 43k mask (3.5 GiB in bf16) and attention costing more than the
linear layers. 2048 keys a query cost LLaMA-2-7B about 8% of a token's linear layers (which
cost as much as ~6 x 4096 keys), as much as the left-padded prefill at 2048-token prompts.

The cache is a dynamic one that shrinks as rows leave. A static cache and ``torch.compile``
pay only with fixed shapes, which rows leaving and budget-sized batches change at every step,
so neither is offered.

``decoding: greedy`` (the default) is deterministic. ``decoding: sample`` is TRACE's setting:
sampling at ``temperature`` (0.1) on top of the model's own generation config (e.g.
LLaMA-2-chat's top-p 0.9), the same processors as ``generate``, seeded per call from torch's
global RNG: sampled answers repeat only when no other job shares the process (Snakemake's
local thread mode does). They are draws from the same distribution as ``generate``'s, not the
same draws: rows leaving change how many numbers each step takes from the RNG.

A model that offers ``generate`` but is no transformers generation model (the prompt-pool
methods' ``PromptedLM``, which prepends its prompts to the embeddings once) keeps
``model.generate`` on the same batches (:func:`generate_batch`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import accumulate

import torch
from transformers import DynamicCache, GenerationMixin

from codyra.llm.collate import left_padded_inputs
from codyra.progress import progress_bar
from codyra.trace.data import LengthLimits, encode_prompt, prepare_tokenizer


@dataclass
class GenerationStats:
    """What generation computed, summed over the calls it is passed to.

    ``computed_tokens``: positions the model ran (every prompt position of a prefill, left
    padding included, then one per row and decoding step); ``padded_tokens``: those that were
    no prompt or answer token (left padding, and steps of rows whose answer had ended);
    ``answer_tokens``: tokens generated, up to and including each row's EOS.
    """

    forward_passes: int = 0
    computed_tokens: int = 0
    padded_tokens: int = 0
    answer_tokens: int = 0
    answers: int = 0

    @property
    def padded_per_answer_token(self) -> float:
        return self.padded_tokens / self.answer_tokens

    @property
    def forward_passes_per_answer_token(self) -> float:
        return self.forward_passes / self.answer_tokens

    def as_dict(self) -> dict:
        return asdict(self) | {
            "padded_per_answer_token": self.padded_per_answer_token,
            "forward_passes_per_answer_token": self.forward_passes_per_answer_token,
        }


def generation_config(model, tokenizer, max_new_tokens: int, decoding: str, temperature: float):
    config = copy.deepcopy(model.generation_config)
    eos = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
    stop = sorted({tokenizer.eos_token_id, *(e for e in eos if e is not None)})
    config.update(max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, eos_token_id=stop)
    if decoding == "sample":
        config.update(do_sample=True, temperature=temperature)
    elif decoding == "greedy":
        config.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    else:
        raise ValueError(f"unknown decoding {decoding!r}; choose greedy or sample (config key llm.decoding)")
    return config


def token_batches(
    lengths: Sequence[int], *, max_new_tokens: int, batch_size: int, batch_tokens: int | None = None
) -> list[list[int]]:
    """Indices of ``lengths`` (prompt token counts), longest first, cut into batches: of
    ``batch_size`` prompts, or with ``batch_tokens`` of as many as fit
    ``rows x (longest prompt + max_new_tokens) <= batch_tokens`` (at least one)."""
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    if batch_tokens is None:
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    for k in order:
        # sorted longest first: a batch's first prompt is its longest
        if batches and (len(batches[-1]) + 1) * (lengths[batches[-1][0]] + max_new_tokens) <= batch_tokens:
            batches[-1].append(k)
        else:
            batches.append([k])
    return batches


def _ended(tokens: list[int], eos: set[int]) -> list[int]:
    """The answer up to and including its first EOS."""
    for n, token in enumerate(tokens):
        if token in eos:
            return tokens[: n + 1]
    return tokens


def generate_batch(model, inputs: dict[str, torch.Tensor], config, stats: GenerationStats) -> list[list[int]]:
    """Each row's answer tokens (up to and including its EOS) from ``model.generate`` on one
    left-padded batch, which runs every row until the batch's longest answer ends."""
    prompt_len = inputs["input_ids"].shape[1]
    new = model.generate(**inputs, generation_config=config)[:, prompt_len:].tolist()
    answers = [_ended(row, set(config.eos_token_id)) for row in new]
    rows, steps = len(answers), max(len(a) for a in answers)
    stats.forward_passes += steps
    stats.computed_tokens += rows * (prompt_len + steps - 1)
    stats.padded_tokens += int((inputs["attention_mask"] == 0).sum()) + sum(steps - len(a) for a in answers)
    stats.answer_tokens += sum(len(a) for a in answers)
    return answers


# transformers 5 renamed the models' forward argument past_key_values to cache
CACHE_KEYWORD = (
    "cache"
    if "cache" in inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    else "past_key_values"
)

# Prefill rows hold at least this many tokens (or the longest prompt): a row's attention costs
# its length squared, so bounded rows keep it small beside the linear layers (see the module doc)
PACKED_ROW_TOKENS = 2048


def pack_rows(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Indices of ``lengths`` packed first-fit, longest first, into rows of at most ``capacity``
    tokens (a longer one alone in its row)."""
    rows: list[list[int]] = []
    room: list[int] = []
    for k in sorted(range(len(lengths)), key=lambda k: -lengths[k]):
        row = next((r for r, free in enumerate(room) if free >= lengths[k]), None)
        if row is None:
            rows.append([k])
            room.append(capacity - lengths[k])
        else:
            rows[row].append(k)
            room[row] -= lengths[k]
    return rows


def packed_prefill(
    model, input_ids, mask, cache, stats: GenerationStats, row_tokens: int = PACKED_ROW_TOKENS
) -> torch.Tensor:
    """The fp32 logits of each left-padded row's last prompt token, from one forward pass over the
    prompts packed into rows (see the module doc). Leaves ``cache`` (empty before) in the layout
    of ``input_ids``: each prompt's keys and values right-aligned, zeros on its left padding."""
    rows, width = input_ids.shape
    lengths = mask.sum(-1).tolist()
    packed = pack_rows(lengths, max(width, row_tokens))
    span = max(sum(lengths[r] for r in members) for members in packed)
    home, start = [0] * rows, [0] * rows  # each prompt's packed row and first column
    for b, members in enumerate(packed):
        for r, column in zip(members, accumulate(lengths[m] for m in members), strict=True):
            home[r], start[r] = b, column - lengths[r]
    real = mask.bool()
    index = (mask.long().cumsum(-1) - 1).clamp(min=0)  # token index within its prompt (0 on padding)
    # flat packed slot of every left-padded slot (padding points at its row's first token)
    flat = input_ids.new_tensor(home)[:, None] * span + input_ids.new_tensor(start)[:, None] + index
    slots = len(packed) * span
    packed_ids = input_ids.new_zeros(slots)  # any token on padding: only padding sees it
    packed_ids[flat[real]] = input_ids[real]
    positions = index.new_zeros(slots)
    positions[flat[real]] = index[real]  # as the left-padded rows' cumsum - 1: 0, 1, ... per prompt
    segment = index.new_full((slots,), -1)  # the prompt of each packed slot; -1: padding at a row's end
    segment[flat[real]] = torch.arange(rows, device=input_ids.device)[:, None].expand(rows, width)[real]
    segment = segment.view(-1, span)
    # block-diagonal causal: a slot sees the slots of its own prompt up to itself (padding: its own)
    causal = torch.ones(span, span, dtype=torch.bool, device=input_ids.device).tril()
    allowed = (segment[:, :, None] == segment[:, None, :]) & causal
    attention = torch.full(allowed.shape, torch.finfo(model.dtype).min, dtype=model.dtype, device=input_ids.device)
    attention = attention.masked_fill(allowed, 0)[:, None]  # additive: eager and sdpa attention take it
    last = flat[:, -1]
    keep = torch.zeros(slots, dtype=torch.bool, device=input_ids.device)
    keep[last] = True
    stats.forward_passes += 1
    stats.computed_tokens += slots
    stats.padded_tokens += slots - sum(lengths)
    logits = model(
        input_ids=packed_ids.view(-1, span),
        attention_mask=attention,
        position_ids=positions.view(-1, span),
        use_cache=True,
        logits_to_keep=keep.view(-1, span),  # one logit per prompt, in packed order
        **{CACHE_KEYWORD: cache},
    ).logits
    for layer in cache.layers:  # in place, layer by layer: one layer's packed copy at a time
        for name in ("keys", "values"):
            states = getattr(layer, name)  # [packed rows, heads, span, head dim]
            states = states.transpose(1, 2).flatten(0, 1)[flat] * real[..., None, None]
            setattr(layer, name, states.transpose(1, 2).contiguous())
    return logits[last.argsort().argsort()].to(dtype=torch.float32)  # packed order -> input rows


def decode_batch(model, inputs: dict[str, torch.Tensor], config, stats: GenerationStats) -> list[list[int]]:
    """Each row's answer tokens (up to and including its EOS), decoded with rows leaving the
    batch as their answers end (see the module doc)."""
    input_ids, mask = inputs["input_ids"], inputs["attention_mask"]
    rows, prompt_len = input_ids.shape
    config = copy.deepcopy(config)  # _prepare_special_tokens writes tensors into it
    model._prepare_special_tokens(config, kwargs_has_attention_mask=True, device=input_ids.device)
    processors = model._get_logits_processor(
        generation_config=config,
        input_ids_seq_length=prompt_len,
        encoder_input_ids=input_ids,
        device=input_ids.device,
        model_kwargs={"attention_mask": mask},
    )
    eos = set(config.eos_token_id)
    cache = DynamicCache(config=model.config)
    logits = packed_prefill(model, input_ids, mask, cache, stats)
    positions = mask.long().sum(-1, keepdim=True)  # each row's next position
    sequences = input_ids  # prompt + answer so far (processors read it)
    active = list(range(rows))  # the input row of each row still decoding
    answers: list[list[int]] = [[] for _ in range(rows)]
    for step in range(config.max_new_tokens):
        scores = processors(sequences, logits)
        if config.do_sample:
            chosen = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        else:
            chosen = scores.argmax(dim=-1)
        tokens = chosen.tolist()
        for row, token in zip(active, tokens, strict=True):
            answers[row].append(token)
        keep = [n for n, token in enumerate(tokens) if token not in eos]
        if not keep or step + 1 == config.max_new_tokens:
            break
        if len(keep) < len(active):
            kept = torch.tensor(keep, device=input_ids.device)
            cache.batch_select_indices(kept)
            sequences, mask, positions, chosen = sequences[kept], mask[kept], positions[kept], chosen[kept]
            active = [active[n] for n in keep]
        sequences = torch.cat([sequences, chosen[:, None]], dim=-1)
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=-1)
        stats.forward_passes += 1
        stats.computed_tokens += len(active)
        logits = (
            model(
                input_ids=chosen[:, None],
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{CACHE_KEYWORD: cache},
            )
            .logits[:, -1]
            .to(dtype=torch.float32)
        )
        positions = positions + 1
    stats.answer_tokens += sum(len(a) for a in answers)
    return answers


@torch.no_grad()
def generate_answers(
    model,
    tokenizer,
    prompts: list[str],
    *,
    limits: LengthLimits,
    max_new_tokens: int,
    batch_size: int,
    batch_tokens: int | None = None,
    decoding: str = "greedy",
    temperature: float = 0.1,
    seed: int = 0,
    device: torch.device | None = None,
    desc: str = "generate",
    stats: GenerationStats | None = None,
) -> list[str]:
    """The generated continuation of every prompt, special tokens removed, in input order.

    ``batch_tokens``: the token budget of a batch (see the module doc); None: batches of
    ``batch_size`` prompts. ``stats``: counts of what was computed are added to it."""
    model.eval()
    stats = GenerationStats() if stats is None else stats
    config = generation_config(model, tokenizer, max_new_tokens, decoding, temperature)
    prepare_tokenizer(tokenizer)
    encoded = [encode_prompt(tokenizer, prompt, limits) for prompt in prompts]
    batches = token_batches(
        [len(ids) for ids in encoded], max_new_tokens=max_new_tokens, batch_size=batch_size, batch_tokens=batch_tokens
    )
    run = decode_batch if isinstance(model, GenerationMixin) else generate_batch
    answers: list[str | None] = [None] * len(prompts)
    if decoding == "sample":
        torch.manual_seed(seed)
    bar = progress_bar(total=len(prompts), desc=desc)
    for batch in batches:
        inputs = left_padded_inputs([encoded[k] for k in batch], tokenizer.pad_token_id)
        inputs = {key: value.to(device or "cpu") for key, value in inputs.items()}
        texts = tokenizer.batch_decode(run(model, inputs, config, stats), skip_special_tokens=True)
        for k, text in zip(batch, texts, strict=True):
            answers[k] = text
        bar.update(len(batch))
    bar.close()
    stats.answers += len(prompts)
    return answers
