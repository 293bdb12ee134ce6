#!/usr/bin/env python
"""Render a ``benchmarks/gpu_costs.py`` record as a Markdown page (``docs/results/gpu.md``): the
GPU, then each section's figures, with the date and the device they were measured on.

``--code`` says which code the record measured when it is not the code the page ships with (a
record is a measurement of its day's code; the page says so rather than pass it off as today's).

Usage: python scripts/render-gpu-figures.py docs/results/gpu/RECORD.json --out docs/results/gpu.md [--code TEXT]
       [--data-path docs/results/gpu/data_path-....json]  (a CPU's data workers beside the GPU)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codyra.experiment.costs import reserved_beyond_weights

REPO = Path(__file__).resolve().parents[1]


def shown(path: Path) -> str:
    return str(path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path)


def pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def ratio(q: dict) -> str:
    return f"{q['median']:.3f} ({q['q1']:.3f} to {q['q3']:.3f}; range {q['min']:.3f} to {q['max']:.3f})"


# the train steps a record may hold, in the order shown: label -> (how the table names it, its precision)
CLIP_STEPS = {
    "fp32": ("fp32", "fp32"),
    "tf32": ("tf32", "tf32"),
    "bf16": ("bf16", "bf16"),
    "bf16_compiled": ("bf16, compiled", "bf16"),
    "bf16_graphed": ("bf16, compiled, CUDA graphs", "bf16"),
}
SECTIONS = ("device", "startup", "clip_train", "clip_eval", "llm_train", "generate")


def dates(record: dict) -> str:
    """When the record's sections were measured: one date, or each section's where a rerun updated some."""
    when = {name: record[name].get("measured", record["measured"]) for name in SECTIONS if name in record}
    if len(set(when.values())) <= 1:
        return f"Measured {record['measured']}"
    runs: dict[str, list[str]] = {}
    for name, measured in when.items():
        runs.setdefault(measured, []).append(f"`{name}`")
    return "Measured in " + "; ".join(f"{', '.join(names)} at {measured}" for measured, names in sorted(runs.items()))


def render(record: dict, source: str, code: str | None) -> list[str]:
    dev = record["device"]
    lines = [
        "# GPU figures",
        "",
        (
            f"{dates(record)} on one {dev['name']} ({dev['memory_gib']:.0f} GiB, "
            f"{dev['multiprocessors']} multiprocessors, CUDA {dev['cuda']}, torch {dev['torch']}, "
            f"{record['cpu_count']} CPU cores) by `benchmarks/gpu_costs.py`, random weights; rendered by "
            f"`scripts/render-gpu-figures.py` from `{source}`."
        ),
        (
            "MFU: the FLOPs `torch.utils.flop_counter` counts in the step, per second, over the datasheet peak of the "
            f"precision ({dev['datasheet_peak_flops']['bf16'] / 1e12:.0f} TFLOP/s bf16, "
            f"{dev['datasheet_peak_flops']['tf32'] / 1e12:.0f} TFLOP/s tf32, "
            f"{dev['datasheet_peak_flops']['fp32'] / 1e12:.1f} TFLOP/s fp32 without TF32)."
        ),
    ]
    if code:
        lines += ["", f"**Code measured:** {code}"]
    rates = dev["matmul_flops_per_s"]
    lines += [
        "",
        "## The device",
        "",
        (
            f"A {dev['matmul_size']}^3 matrix product: {rates['bfloat16'] / 1e12:.0f} TFLOP/s in bf16, "
            f"{rates['float32'] / 1e12:.1f} TFLOP/s in fp32."
        ),
    ]
    if "median_s" in record.get("startup", {}):
        lines += [
            "",
            "## A job's start-up",
            "",
            (
                f"A fresh process importing what a job imports (`{record['startup']['imports']}`): "
                f"{record['startup']['median_s']:.1f} s (median of 3)."
            ),
        ]
    clip = record.get("clip_train", {})
    if "fp32" in clip:
        lines += [
            "",
            f"## {clip['model']} train step: CoDyRA against LoRA",
            "",
            (
                f"Batch {clip['batch']}, {clip['classes']} class prompts through the text tower, rank 16 on "
                "every matrix; median step of each, the paired CoDyRA / LoRA ratio (median, quartiles, range) "
                "and LoRA's MFU."
                + (
                    " tf32 and bf16 run the fused adapter forward, as training runs them on a GPU."
                    if "speedup_over_fp32_lora" in clip
                    else ""
                )
            ),
            "",
            "| precision | phase | LoRA ms | CoDyRA ms | CoDyRA / LoRA | LoRA MFU |",
            "|---|---|---|---|---|---|",
        ]
        measured = [label for label in CLIP_STEPS if label in clip]
        for label in measured:
            name, precision = CLIP_STEPS[label]
            peak = dev["datasheet_peak_flops"][precision]
            for phase, p in clip[label]["phases"].items():
                s = p["step_s_median"]
                lines.append(
                    f"| {name} | {phase} | {1e3 * s['lora']:.1f} | {1e3 * s['codyra']:.1f} | "
                    f"{ratio(p['paired_ratio'])} | {pct(clip[label]['lora_step_flops'] / s['lora'] / peak)} |"
                )
        speedups = clip.get("speedup_over_fp32_lora", {"bf16": clip["bf16_speedup_lora"]})
        lines += [
            "",
            "LoRA's step against fp32's: "
            + ", ".join(f"{CLIP_STEPS[label][0]} {speedups[label]:.2f}x" for label in measured if label != "fp32")
            + ".",
        ]
        timed = [label for label in measured if "warmup" in clip[label]]
        if timed:  # records that time the warm-up
            lines += [
                "",
                f"The first {clip[timed[0]]['warmup']['steps']} steps of each (compilation and CUDA graph recording "
                "where asked; the cost model's compile time), LoRA / CoDyRA, s: "
                + ", ".join(
                    f"{CLIP_STEPS[label][0]} {clip[label]['warmup']['seconds']['lora']:.1f} / "
                    f"{clip[label]['warmup']['seconds']['codyra']:.1f}"
                    for label in timed
                )
                + ".",
            ]
        held = {CLIP_STEPS[label][0]: reserved_beyond_weights(clip[label]) for label in measured}
        held = {name: gib for name, gib in held.items() if gib is not None}
        if held:
            lines += [
                "",
                "The most memory both variants' steps reserve beyond their weights (activations and the allocator's "
                "cache, or the CUDA graphs' pool), GiB: "
                + ", ".join(f"{name} {gib:.2f}" for name, gib in held.items())
                + ".",
            ]
    ev = record.get("clip_eval", {})
    if "images_per_s" in ev:
        worker, rates, over = ev["worker_images_per_s"], ev["images_per_s"], ev["cell_over_bare"]
        lines += [
            "",
            f"## {ev['model']} evaluation: the JPEG path against the evaluation cache",
            "",
            (
                f"{ev['images']:,} Food-sized (512 x 384) test images behind {ev['distinct_jpegs']:,} noise "
                f"JPEGs, batch {ev['batch_size']}, {ev['workers']} loader workers, bf16."
            ),
            "",
            "| | images/s |",
            "|---|---|",
            f"| one worker decoding JPEGs | {worker['jpeg']:,.0f} |",
            f"| one worker reading the cache | {worker['cache']:,.0f} ({ev['worker_speedup']:.0f}x) |",
            f"| building the cache ({ev['workers']} workers) | {ev['cache_build_images_per_s']:,.0f} |",
            f"| bare `encode_image` on batches on the GPU (MFU {pct(ev['bare_mfu'])}) | {rates['bare']:,.0f} |",
            f"| a cell from the cache | {rates['cell_cache']:,.0f} ({over['cell_cache']:.2f} of bare) |",
            f"| a cell from the JPEGs | {rates['cell_jpeg']:,.0f} ({over['cell_jpeg']:.2f} of bare) |",
        ]
    lm = record.get("llm_train", {})
    if "phases" in lm:
        shape = lm["shape"]
        mem = lm["memory"]
        lines += [
            "",
            "## LLaMA-2-7B-shaped train step under DeepSpeed ZeRO-2 (one rank)",
            "",
            (
                f"{shape['num_hidden_layers']} layers x {shape['hidden_size']}, vocabulary {lm['vocab']:,}, "
                f"{lm['precision']} replica; one sequence of {lm['sequence_tokens']} tokens per step (TRACE's "
                "per-GPU micro-batch), rank 16 on q, k, v, o, gate, up, down."
            ),
            "",
            "| phase | LoRA tokens/s | CoDyRA tokens/s | CoDyRA / LoRA | LoRA MFU |",
            "|---|---|---|---|---|",
        ]
        for phase, p in lm["phases"].items():
            t, q = p["tokens_per_s"], ratio(p["paired_ratio"])
            lines.append(f"| {phase} | {t['lora']:,.0f} | {t['codyra']:,.0f} | {q} | {pct(p['lora_mfu'])} |")
        if mem:
            lines += [
                "",
                (
                    f"Both models resident: {mem['resident_gib_both_models']:.1f} GiB; the most allocated while "
                    f"stepping LoRA {mem['peak_gib_lora_sparse']:.1f} GiB, CoDyRA "
                    f"{mem['peak_gib_codyra_sparse']:.1f} GiB (one model's training peak: about that minus half "
                    "the resident memory)."
                ),
            ]
    gen = record.get("generate", {})
    if "tokens_per_s" in gen:
        lines += [
            "",
            "## Generation (LLaMA-2-7B shape, bf16, greedy)",
            "",
            (
                f"{gen['prompts']} prompts of {gen['prompt_tokens_mean']:.0f} tokens on average, "
                f"{gen['new_tokens']} new tokens each, vocabulary {gen['vocab']:,} (the mini TRACE's tokenizer): "
                f"{gen['tokens_per_s']['batched']:,.0f} generated tokens/s in batches of {gen['batch']}, "
                f"{gen['tokens_per_s']['single']:,.1f} one prompt at a time ({gen['speedup']:.1f}x)."
            ),
        ]
        if "budget" in gen["tokens_per_s"]:  # records of the token-budget batches
            lines += [
                "",
                (
                    f"In batches of {gen['batch_tokens']:,} tokens (`eval.batch_tokens`, rows leaving as their answer "
                    f"ends): {gen['tokens_per_s']['budget']:,.0f} generated tokens/s ({gen['budget_speedup']:.1f}x the "
                    f"batches of {gen['batch']}); their greedy answers agree with those batches' on "
                    f"{100 * gen['greedy_answers_agree_budget_vs_batched']:.1f} % of the prompts"
                    + (
                        f", and on the first {100 * gen['greedy_answers_shared_prefix_budget_vs_batched']:.1f} % of an "
                        "answer on average"
                        if "greedy_answers_shared_prefix_budget_vs_batched" in gen
                        else ""
                    )
                    + " (bf16: another batch composition can move a near-tie; random weights make near-ties common, "
                    f"trained ones rarer). A row's theta_i ({record['config']['rank_tasks']} tasks' "
                    "rank-16 updates on every matrix, each delta made on the CPU as the rebuild makes it, summed on "
                    f"the GPU): {gen['row_build_s']:.1f} s."
                ),
            ]
    failed = [name for name, section in record.items() if isinstance(section, dict) and "error" in section]
    if failed:
        lines += ["", "Sections that failed: " + ", ".join(f"{n} ({record[n]['error']})" for n in failed)]
    return lines + [""]


def render_data_path(record: dict, source: str) -> list[str]:
    """A ``benchmarks/data_path.py`` record: a CPU worker's images/s beside the GPU's consumption."""
    ev, tr = record["eval_images_per_s"], record["train_images_per_s"]
    lines = [
        "## Data workers on a CPU",
        "",
        (
            f"Measured {record['measured']} by `benchmarks/data_path.py` on {record['cpu_count']} cores of "
            f"`{record['machine']}` (1-minute load {record['loadavg_1min'][0]:.1f} at the start), from `{source}`: "
            f"{record['images']} Food-sized noise JPEGs, {record['size']} px, batches of {record['batch_size']}."
        ),
        "",
        "| one worker | images/s |",
        "|---|---|",
        f"| decoding test JPEGs (resize, crop, normalise) | {ev['jpeg']:,.0f} |",
        (
            f"| reading the evaluation cache | {ev['cache']:,.0f} ({record['eval_speedup']:.0f}x; target >= "
            f"{record['target']:.0f}x) |"
        ),
        f"| augmenting a few-shot training set from its JPEGs | {tr['jpeg']:,.0f} |",
        (
            f"| augmenting it decoded in memory (the same images) | {tr['decoded']:,.0f} "
            f"({record['train_speedup']:.1f}x) |"
        ),
    ]
    if "gpu" in record:
        need, gpu = record["workers_to_feed_gpu"], record["gpu"]
        lines += [
            "",
            (
                f"To feed the {gpu['name']} of `{gpu['record']}` ({gpu['images_per_s']['train']:,.0f} images/s of "
                f"ViT-B/16 training, {gpu['images_per_s']['eval']:,.0f} of bare evaluation), a job needs about "
                f"{need['eval_jpeg']:.0f} such workers to evaluate from JPEGs, {need['eval_cache']:.1f} from the "
                "cache, "
                f"{need['train_jpeg']:.1f} to train from JPEGs and {need['train_decoded']:.1f} from decoded images."
            ),
        ]
    return lines + [""]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--code", help="which code the record measured, when it is not the code shipped")
    parser.add_argument("--data-path", type=Path, help="a benchmarks/data_path.py record: a section of its own")
    args = parser.parse_args(argv)
    lines = render(json.loads(args.record.read_text()), shown(args.record), args.code)
    if args.data_path:
        lines += render_data_path(json.loads(args.data_path.read_text()), shown(args.data_path))
    args.out.write_text("\n".join(lines))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
