"""TRACE answer generation: a row's prompts in length-sorted batches (left padding, KV cache) against
one prompt at a time, on the mini LM and a larger LLaMA-shaped model, random weights, CPU.

Both paths are ``codyra.llm.generation.generate_answers``, the function a TRACE row job calls:
greedy decoding, batches of ``--batch-size`` prompts against a batch size of 1. The
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

``--proxy``: what the GPU's speed follows, counted on the CPU. The mini TRACE's eight test sets
(``--config``, default config/mini_trace.yaml; each set one ``generate_answers`` call, as a cell
evaluates) are answered by the mini's pretrained theta_0, greedy, twice: the old path
(``model.generate`` on fixed batches of ``eval.batch_size`` prompts, and of each of
``--old-batch-sizes``, sorted by characters as before; every row runs until the batch's longest
answer ends) and the new one (``generate_answers`` with the config's ``eval.batch_tokens``, each
batch's prompts packed into one prefill, rows leaving as they end). theta_0 is pretrained here
into ``--work`` (about a minute on 2 cores; reused when present): its answers end at EOS after
varied lengths, as a real model's do, so no stopping rule is imposed. Counted per path: forward
passes, positions computed, padded ones (old: left padding and the steps of rows whose answer
had ended; new: padding at the ends of packed prefill rows) and answer tokens (up to and
including EOS). Printed and recorded: padded positions per answer token and
forward passes per answer token, old / new, and whether the answers are identical (they must be).

    .venv/bin/python benchmarks/generation_speed.py --proxy \
        --out docs/results/generation/proxy.json --markdown docs/results/generation.md
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
    parser.add_argument("--proxy", action="store_true", help="count the CPU proxies instead of timing (see above)")
    parser.add_argument("--config", type=Path, default=Path("config/mini_trace.yaml"), help="--proxy: the mini config")
    parser.add_argument(
        "--old-batch-sizes", default="16", help="--proxy: old-path batch sizes besides eval.batch_size (16: TRACE's)"
    )
    parser.add_argument(
        "--work", type=Path, default=Path("results/benchmarks/generation_proxy"), help="--proxy: theta_0"
    )
    parser.add_argument("--markdown", type=Path, default=None, help="--proxy: also write this Markdown page")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    if args.proxy:
        return proxy(args, argv)
    load_before = os.getloadavg()[0]
    prompts, tokenizer = prompts_and_tokenizer(args)
    rows = [measure(name, prompts, tokenizer, args) for name in args.models.split(",") if name]
    return write_record(
        args.out,
        {
            "models": rows,
            "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "out"},
        },
        load_before,
        {"torch": torch.__version__},
    )


def old_path(model, tokenizer, prompts: list[str], limits, max_new_tokens: int, batch_size: int, stats) -> list[str]:
    """Answers as generation ran before token budgets: ``model.generate`` on fixed batches of
    prompts sorted by characters, every row until its batch's longest answer ends."""
    from codyra.llm.collate import GenerationCollator
    from codyra.llm.generation import generate_batch, generation_config
    from codyra.trace.data import TraceExample

    config = generation_config(model, tokenizer, max_new_tokens, "greedy", 0.1)
    collate = GenerationCollator(tokenizer, limits)
    order = sorted(range(len(prompts)), key=lambda k: len(prompts[k]), reverse=True)
    answers: list[str] = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        tokens = generate_batch(model, collate([TraceExample(prompts[k], "") for k in chunk]), config, stats)
        for k, text in zip(chunk, tokenizer.batch_decode(tokens, skip_special_tokens=True), strict=True):
            answers[k] = text
    stats.answers += len(prompts)
    return answers


def proxy(args, argv) -> dict:
    import torch
    import transformers

    from codyra.experiment.config import load_config
    from codyra.llm.generation import GenerationStats, generate_answers
    from codyra.llm.model import length_limits, mini_model_dir, pretrained_lm, task_folder
    from codyra.mini.trace.pretrain import pretrain_mini_lm
    from codyra.trace.data import load_split

    load_before = os.getloadavg()[0]
    cfg = load_config(args.config)
    cfg["results"] = str(args.work)
    if not (mini_model_dir(cfg) / "model.safetensors").is_file():
        pretrain_mini_lm(cfg)
    bundle = pretrained_lm(cfg)
    model, tokenizer, limits = bundle.model, bundle.tokenizer, length_limits(cfg)
    max_new, budget = cfg["llm"]["max_new_tokens"], cfg["eval"]["batch_tokens"]
    if budget is None:
        raise SystemExit(f"{args.config} sets no eval.batch_tokens: the new path needs a token budget")
    sizes = sorted({cfg["eval"]["batch_size"], *(int(b) for b in args.old_batch_sizes.split(",") if b)}, reverse=True)
    test_sets = [[e.prompt for e in load_split(task_folder(cfg, j), "test")] for j in range(1, len(cfg["tasks"]) + 1)]

    def run(path) -> tuple[GenerationStats, list[list[str]], float]:
        stats, began = GenerationStats(), time.perf_counter()
        answers = [path(prompts, stats) for prompts in test_sets]
        return stats, answers, time.perf_counter() - began

    new_stats, new_answers, new_s = run(
        lambda prompts, stats: generate_answers(
            model,
            tokenizer,
            prompts,
            limits=limits,
            max_new_tokens=max_new,
            batch_size=1,
            batch_tokens=budget,
            stats=stats,
            desc="new",
        )
    )
    comparisons = []
    for size in sizes:
        old_stats, old_answers, old_s = run(
            lambda prompts, stats, size=size: old_path(model, tokenizer, prompts, limits, max_new, size, stats)
        )
        old, new = old_stats.as_dict(), new_stats.as_dict()
        comparisons.append(
            {
                "old_batch_size": size,
                "old": old | {"seconds": old_s},
                "ratio": {
                    key: old[key] / new[key] if new[key] else None  # None: the new path has none left
                    for key in ("padded_per_answer_token", "forward_passes_per_answer_token")
                },
                "identical_answers": old_answers == new_answers,
            }
        )
    figures = {
        "config": str(args.config),
        "command": "benchmarks/generation_speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "test_sets": {t: len(p) for t, p in zip(cfg["tasks"], test_sets, strict=True)},
        "max_new_tokens": max_new,
        "batch_tokens": budget,
        "new": new_stats.as_dict() | {"seconds": new_s},
        "comparisons": comparisons,
    }
    record = write_record(
        args.out, figures, load_before, {"torch": torch.__version__, "transformers": transformers.__version__}
    )
    page = proxy_markdown(record)
    print(page)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(page)
    return record


def times(ratio: float | None) -> str:
    return "none left" if ratio is None else f"{ratio:.1f}x"


def proxy_markdown(record: dict) -> str:
    new = record["new"]
    lines = [
        "# Generation: CPU proxies of the GPU's speed",
        "",
        (
            f"Measured {record['measured']} on {record['machine']} ({record['cpu_count']} CPUs, torch "
            f"{record['torch']}, transformers {record['transformers']}) by"
        ),
        f"`.venv/bin/python {record['command']}`; written from its record by that command.",
        "",
        (
            f"The mini TRACE's {len(record['test_sets'])} test sets ({sum(record['test_sets'].values())} prompts, "
            f"`{record['config']}`), each one call as a cell makes, answered greedily by its pretrained theta_0 "
            f"(at most {record['max_new_tokens']} new tokens). Old: `model.generate` on fixed batches, every row "
            f"until its batch's longest answer ends. New: batches of `eval.batch_tokens` = {record['batch_tokens']} "
            "tokens, each batch's prompts packed into one prefill pass, rows leaving as their answers end. Padded "
            "positions: old, left padding and the steps of rows whose answer had ended; new, padding at the ends "
            "of packed prefill rows."
        ),
        "",
        (
            "| old batch size | padded / answer token: old | new | old/new "
            "| forward passes / answer token: old | new | old/new | answers identical |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in record["comparisons"]:
        old, ratio = c["old"], c["ratio"]
        lines.append(
            f"| {c['old_batch_size']} | {old['padded_per_answer_token']:.3f} | {new['padded_per_answer_token']:.3f} "
            f"| {times(ratio['padded_per_answer_token'])} | {old['forward_passes_per_answer_token']:.4f} "
            f"| {new['forward_passes_per_answer_token']:.4f} | {times(ratio['forward_passes_per_answer_token'])} "
            f"| {'yes' if c['identical_answers'] else 'NO'} |"
        )
    lines += [
        "",
        f"Counts (new): {new['forward_passes']} forward passes, {new['computed_tokens']} positions computed, "
        f"{new['padded_tokens']} padded, {new['answer_tokens']} answer tokens. Old, per batch size: "
        + "; ".join(
            f"{c['old_batch_size']}: {c['old']['forward_passes']}, {c['old']['computed_tokens']}, "
            f"{c['old']['padded_tokens']}, {c['old']['answer_tokens']}"
            for c in record["comparisons"]
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
