"""Train-step throughput of CoDyRA vs fixed-rank LoRA on a small LLaMA (random weights, CPU).

One process, the same starting weights, adapter initialisation and batch for both variants.
A step is the LM training loop's: forward with left-padding position ids, the loss on the
answer tokens (the last quarter of each sequence here), backward, gradient clipping, AdamW
step and ``method.after_step`` (``codyra.steps.backends.PlainBackend``). CoDyRA's steps are
steps of the sparse phase (kappa > 0: the proximal operator runs on every gate), LoRA's gates
are the constant ones of fixed-rank LoRA; both have rank --rank on q, k, v, o, gate, up and
down projections of every layer. Target: CoDyRA / LoRA step time <= 1.05.

Variants alternate within each repetition (order reversed every other repetition); warm-up
steps are discarded; per variant the median step and tokens/s are reported, and the median
of the per-repetition paired ratios (two back-to-back steps, so load drift hits both).

    .venv/bin/python benchmarks/llm_step_speed.py             # ~1 minute on 2 idle cores
    .venv/bin/python benchmarks/llm_step_speed.py --steps 30  # steadier on a busy machine
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time

import torch
import transformers

from codyra import __version__ as codyra_version
from codyra.llm.family import CAUSAL_LM
from codyra.llm.loss import answer_loss_sum, position_ids
from codyra.methods import build_method
from codyra.methods.base import standalone_context
from codyra.steps.backends import PlainBackend
from codyra.store.io import write_json
from codyra.trace.data import IGNORE_INDEX

TARGET = 1.05
NOMINAL_STEPS = 1000  # CoDyRA's steps pretend to be steps 900.. of this schedule: deep in the sparse phase


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--intermediate", type=int, default=1376)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--seq", type=int, default=256, help="tokens per sequence")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--kappa-max", type=float, default=0.005)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/benchmarks/llm_step_speed.json")
    return parser.parse_args()


def base_model(args) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        vocab_size=args.vocab,
        max_position_embeddings=args.seq,
    )
    torch.manual_seed(args.seed)
    return transformers.LlamaForCausalLM(config)


def variant(model, spec: dict, args):
    method = build_method(spec)
    groups = method.setup(standalone_context(model, CAUSAL_LM, torch.Generator().manual_seed(args.seed), 0.01))
    hp = {"optimizer": "adamw", "lr": args.lr, "betas": (0.9, 0.95), "eps": 1e-8, "precision": "fp32"}
    backend = PlainBackend(model, groups, hp, torch.device("cpu"), clip_norm=1.0)
    model.train()
    return method, backend


def batch(args) -> dict:
    generator = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(4, args.vocab, (args.batch, args.seq), generator=generator)
    labels = ids.clone()
    labels[:, : 3 * args.seq // 4] = IGNORE_INDEX  # prompt tokens carry no loss
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def train_step(method, backend, inputs: dict, step: int) -> float:
    started = time.perf_counter()
    # the training path's step (codyra.training.loop.fit with one micro-batch): token-mean answer loss
    logits = backend.forward(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        position_ids=position_ids(inputs["attention_mask"]),
    ).logits
    loss_sum, tokens = answer_loss_sum(logits, inputs["labels"])
    backend.backward(loss_sum / tokens)
    backend.step()
    backend.after_step(method, step, NOMINAL_STEPS)
    return time.perf_counter() - started


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0]
    model = base_model(args)
    specs = {
        "lora": {"kind": "lora", "rank": args.rank, "alpha": args.rank, "placement": "all"},
        "codyra": {
            "kind": "codyra",
            "rank": args.rank,
            "alpha": args.rank,
            "placement": "all",
            "dense_ratio": 0.5,
            "kappa_max": args.kappa_max,
        },
    }
    variants = {name: variant(copy.deepcopy(model), spec, args) for name, spec in specs.items()}
    inputs = batch(args)
    times: dict[str, list[float]] = {name: [] for name in variants}
    ratios = []
    for repetition in range(args.warmup + args.steps):
        order = list(variants) if repetition % 2 == 0 else list(reversed(variants))
        step = int(0.9 * NOMINAL_STEPS) + repetition
        step_times = {name: train_step(*variants[name], inputs, step) for name in order}
        if repetition >= args.warmup:
            for name, seconds in step_times.items():
                times[name].append(seconds)
            ratios.append(step_times["codyra"] / step_times["lora"])
    load_end = os.getloadavg()[0]

    tokens = args.batch * args.seq
    result = {
        name: {
            "median_s": statistics.median(values),
            "min_s": min(values),
            "tokens_per_s": tokens / statistics.median(values),
            "steps_s": values,
        }
        for name, values in times.items()
    }
    codyra_method = variants["codyra"][0]
    ratio = statistics.median(ratios)
    figures = {
        **result,
        "paired_ratio_median": ratio,
        "tokens_per_s_ratio": result["lora"]["tokens_per_s"] / result["codyra"]["tokens_per_s"],
        "meets_target": ratio <= TARGET,
        "target": TARGET,
        "codyra_kappa_last": codyra_method.kappa,
        "codyra_active_rank_mean": codyra_method.step_metrics()["active_rank_mean"].item(),
        "adapted_matrices": len(codyra_method.adapters),
        "loadavg_1min": {"start": load_start, "end": load_end},
        "config": vars(args),
        "versions": {
            "codyra": codyra_version,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
        },
    }
    write_json(args.out, figures)

    print(
        f"LLaMA {args.layers} x {args.hidden} (ffn {args.intermediate}, vocab {args.vocab}), "
        f"batch {args.batch} x {args.seq} tokens, rank {args.rank} on {len(codyra_method.adapters)} matrices, "
        f"{args.threads} threads"
    )
    print(f"{'variant':<8} {'median s':>9} {'min s':>8} {'tokens/s':>9}")
    for name, r in result.items():
        print(f"{name:<8} {r['median_s']:9.3f} {r['min_s']:8.3f} {r['tokens_per_s']:9.0f}")
    verdict = "meets" if figures["meets_target"] else "misses"
    print(f"CoDyRA / LoRA step time, median of paired ratios: {ratio:.3f} ({verdict} the <= {TARGET} target)")
    busy = " (busy machine: timings are noisy)" if max(load_start, load_end) > args.threads else ""
    print(f"load average {load_start:.2f} -> {load_end:.2f}{busy}")
    print(f"figures -> {args.out}")


if __name__ == "__main__":
    main()
