"""Batched answer generation for TRACE prompts.

Prompts are ``BOS + prompt`` (cut from the left to ``llm.max_prompt_len``), left-padded so
every row ends with its last prompt token; ``generate`` derives position ids from the
attention mask, so padding does not change a row's greedy answer. Prompts are batched in
order of length (less padding); answers come back in the input order.

``decoding: greedy`` (the default) is deterministic. ``decoding: sample`` is TRACE's setting:
sampling at ``temperature`` (0.1) on top of the model's own generation config (e.g.
LLaMA-2-chat's top-p 0.9), seeded per call. ``generate`` samples from torch's global RNG, so
sampled answers repeat only when no other job shares the process (Snakemake's local thread
mode does).
"""

from __future__ import annotations

import copy

import torch

from codyra.llm.collate import GenerationCollator
from codyra.progress import progress_bar
from codyra.trace.data import LengthLimits, TraceExample


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


@torch.no_grad()
def generate_answers(
    model,
    tokenizer,
    prompts: list[str],
    *,
    limits: LengthLimits,
    max_new_tokens: int,
    batch_size: int,
    decoding: str = "greedy",
    temperature: float = 0.1,
    seed: int = 0,
    device: torch.device | None = None,
    desc: str = "generate",
) -> list[str]:
    """The generated continuation of every prompt, special tokens removed."""
    model.eval()
    config = generation_config(model, tokenizer, max_new_tokens, decoding, temperature)
    collate = GenerationCollator(tokenizer, limits)
    order = sorted(range(len(prompts)), key=lambda k: len(prompts[k]), reverse=True)
    answers: list[str | None] = [None] * len(prompts)
    if decoding == "sample":
        torch.manual_seed(seed)
    bar = progress_bar(total=len(prompts), desc=desc)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        inputs = collate([TraceExample(prompts[k], "") for k in chunk])
        inputs = {k: v.to(device or "cpu") for k, v in inputs.items()}
        output = model.generate(**inputs, generation_config=config)
        texts = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        for k, text in zip(chunk, texts, strict=True):
            answers[k] = text
        bar.update(len(chunk))
    bar.close()
    return answers
