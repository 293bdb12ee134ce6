"""TRACE answer generation: a row's prompts in length-sorted batches (left padding, KV cache) against
one prompt at a time, on the mini LM and a larger LLaMA-shaped model, random weights, CPU.

Both paths are ``codyra.llm.generation.generate_answers``, the function a TRACE row job calls:
greedy decoding, ``--batch-size`` prompts per ``generate`` call against a batch size of 1. The
prompts are the mini TRACE's test prompts (``codyra.mini.trace.tasks``, every task, so their
lengths vary as a row's do), tokenised by a BPE tokenizer trained on them as the mini's is
(``train_bpe_tokenizer``, its vocabulary size). Every prompt generates exactly
``--max-new-tokens`` tokens (``min_new_tokens`` set alike on both paths: random weights would
otherwise stop at arbitrary points), so the two paths' tokens/s compare like for like.

Models (``--models``): ``codyra-mini-llama`` (the mini TRACE's packaged architecture) and
``llama-shaped`` (LLaMA's architecture at ``--layers`` x ``--hidden``, ``--heads`` heads,
FFN ``--intermediate``). Paths alternate within each of ``--repeats`` repetitions (order
reversed every other one); per path the median seconds, generated tokens/s, and the median of
the paired speed-ups. The answers of the two paths are compared prompt by prompt (greedy
decoding on left-padded batches: equal unless a near-tie of logits flips under the batch's
other arithmetic); the share of equal answers is reported.

    .venv/bin/python benchmarks/generation_speed.py                    # ~3 min on 2 cores
    .venv/bin/python benchmarks/generation_speed.py --prompts 32 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import write_record  # a sibling script


def prompts_and_tokenizer(args):
    from codyra.mini.trace.tasks import MINI_TRACE_TASKS, generate_task
    from codyra.mini.trace.tokenizer import MINI_TRACE_VOCAB_SIZE, train_bpe_tokenizer

    per_task = -(-args.prompts // len(MINI_TRACE_TASKS))
    sizes = {"train": 1, "eval": 1, "test": per_task}
    examples = [e for task in MINI_TRACE_TASKS for e in generate_task(task, args.seed, sizes)["test"]]
    prompts = [e.prompt for e in examples][: args.prompts]
    tokenizer = train_bpe_tokenizer([e.prompt + " " + e.answer for e in examples], MINI_TRACE_VOCAB_SIZE)
    return prompts, tokenizer


def build_model(name: str, tokenizer, args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from codyra.llm.model import mini_model_config

    if name == "codyra-mini-llama":
        shape = mini_model_config(name)
    elif name == "llama-shaped":
        shape = {
            "hidden_size": args.hidden,
            "intermediate_size": args.intermediate,
            "num_hidden_layers": args.layers,
            "num_attention_heads": args.heads,
            "num_key_value_heads": args.heads,
        }
    else:
        raise SystemExit(f"unknown model {name!r}; choose codyra-mini-llama or llama-shaped")
    special = {k: tokenizer.convert_tokens_to_ids(getattr(tokenizer, f"{k}_token")) for k in ("bos", "eos", "pad")}
    config = LlamaConfig(**{**shape, "vocab_size": len(tokenizer)}, **{f"{k}_token_id": v for k, v in special.items()})
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.min_new_tokens = args.max_new_tokens  # every prompt: the same token count
    return model


def measure(name: str, prompts: list[str], tokenizer, args) -> dict:
    from codyra.llm.generation import generate_answers
    from codyra.trace.data import LengthLimits

    model = build_model(name, tokenizer, args)
    limits = LengthLimits(max_prompt_len=args.max_prompt_len, max_answer_len=args.max_new_tokens)

    def run(batch_size: int) -> tuple[float, list[str]]:
        began = time.perf_counter()
        answers = generate_answers(
            model, tokenizer, prompts, limits=limits, max_new_tokens=args.max_new_tokens, batch_size=batch_size
        )
        return time.perf_counter() - began, answers

    run(args.batch_size)  # warm-up: first-call allocations and kernel selection
    seconds = {"batched": [], "single": []}
    answers = {}
    for rep in range(args.repeats):
        order = ("batched", "single") if rep % 2 == 0 else ("single", "batched")
        for path in order:
            s, answers[path] = run(args.batch_size if path == "batched" else 1)
            seconds[path].append(s)
    tokens = len(prompts) * args.max_new_tokens
    speedups = [single / batched for batched, single in zip(seconds["batched"], seconds["single"], strict=True)]
    equal = sum(a == b for a, b in zip(answers["batched"], answers["single"], strict=True))
    row = {
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "generated_tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": {path: tokens / statistics.median(s) for path, s in seconds.items()},
        "paired_speedup_median": statistics.median(speedups),
        "paired_speedups": speedups,
        "equal_answers": equal / len(prompts),
    }
    print(
        f"{name:17s} batched {row['tokens_per_s']['batched']:8.1f} tok/s, one at a time "
        f"{row['tokens_per_s']['single']:8.1f} tok/s: x{row['paired_speedup_median']:.2f}; "
        f"equal answers {equal}/{len(prompts)}",
        flush=True,
    )
    return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="codyra-mini-llama,llama-shaped", help="comma-separated model names")
    parser.add_argument("--prompts", type=int, default=64, help="prompts of the row (default 64)")
    parser.add_argument("--batch-size", type=int, default=16, help="prompts per generate call (default 16)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens generated per prompt (default 32)")
    parser.add_argument("--max-prompt-len", type=int, default=96, help="prompt tokens kept (the mini TRACE's)")
    parser.add_argument("--repeats", type=int, default=3, help="paired repetitions (default 3)")
    parser.add_argument("--hidden", type=int, default=512, help="llama-shaped: hidden size")
    parser.add_argument("--intermediate", type=int, default=1376, help="llama-shaped: FFN size")
    parser.add_argument("--layers", type=int, default=4, help="llama-shaped: layers")
    parser.add_argument("--heads", type=int, default=8, help="llama-shaped: attention heads")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/generation_speed.json"))
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    prompts, tokenizer = prompts_and_tokenizer(args)
    rows = [measure(name, prompts, tokenizer, args) for name in args.models.split(",") if name]
    return write_record(
        args.out,
        {"models": rows, "config": {k: v for k, v in vars(args).items() if k != "out"}},
        load_before,
        {"torch": torch.__version__},
    )


if __name__ == "__main__":
    main()
