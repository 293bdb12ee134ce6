"""What pinning the CPU numerics costs: a mini CLIP and a mini LM train step under the platform's
pins (``codyra.CPU_NUMERICS``) vs the earlier pins (MKL's AVX2 branch) vs the machine's native
kernels, measured side by side.

MKL's branch is fixed when a process first calls MKL, so each variant runs in a fresh subprocess;
the variants alternate repetition by repetition (order rotating), and a repetition times
``--steps`` train steps after ``--warmup`` untimed ones on one thread, in CPU seconds
(``time.process_time``: compute, robust to other load on the machine). Reported per model: each
variant's median step time, and the median and range of its per-repetition ratio to the pinned
variant (the variants of one repetition run back to back, so slow drifts cancel). A step is the
forward, the loss, the backward and a fused AdamW step of the whole model on a random batch
(CLIP: 64 images and captions, the pretraining's contrastive loss; LM: 4 sequences of 64 tokens).

    .venv/bin/python benchmarks/cpu_pin_cost.py   # about 3 minutes on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import codyra  # noqa: F401  (pins the CPU numerics before torch runs; each variant's process sets its own)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import cpu_model  # a sibling script

PINS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def _widest_capability() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512" if " avx512f" in f.read() else "avx2"
    except OSError:
        return "avx2"


VARIANTS = {
    "pinned": {},  # codyra.CPU_NUMERICS, set by `import codyra`
    "mkl-avx2": {"MKL_CBWR": "AVX2"},  # the pin before MKL's vendor dispatch was measured
    "native": {"ATEN_CPU_CAPABILITY": _widest_capability(), "MKL_CBWR": "AUTO", "ONEDNN_MAX_CPU_ISA": "ALL"},
}


def clip_step():
    import torch
    import torch.nn.functional as F

    from codyra.clip.model import create_clip

    torch.manual_seed(0)
    model = create_clip("codyra-mini", None).model.train()
    images = torch.randn(64, 3, 32, 32)
    tokens = torch.randint(1, 49407, (64, 24))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)

    def step():
        image = F.normalize(model.encode_image(images), dim=-1)
        text = F.normalize(model.encode_text(tokens), dim=-1)
        logits = model.logit_scale.exp() * image @ text.T
        labels = torch.arange(64)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def lm_step():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from codyra.llm.model import mini_model_config

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**mini_model_config("codyra-mini-llama"), vocab_size=1024)).train()
    ids = torch.randint(0, 1024, (4, 64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


MODELS = {"mini CLIP": clip_step, "mini LM": lm_step}


def measure(model: str, warmup: int, steps: int) -> float:
    """CPU seconds per step, in this process (whose pins the parent set)."""
    import torch

    torch.set_num_threads(1)
    step = MODELS[model]()
    for _ in range(warmup):
        step()
    start = time.process_time()
    for _ in range(steps):
        step()
    return (time.process_time() - start) / steps


def run_variant(variant: str, model: str, args) -> float:
    env = {k: v for k, v in os.environ.items() if k not in PINS} | VARIANTS[variant]
    cmd = [sys.executable, __file__, "--measure", model, "--warmup", str(args.warmup), "--steps", str(args.steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/cpu_pin_cost.json"))
    parser.add_argument("--measure", choices=list(MODELS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(measure(args.measure, args.warmup, args.steps))
        return
    load_before = os.getloadavg()[0]
    report = {}
    names = list(VARIANTS)
    for model in MODELS:
        times = {v: [] for v in names}
        for rep in range(args.repetitions):
            for v in names[rep % len(names) :] + names[: rep % len(names)]:
                times[v].append(run_variant(v, model, args))
        ratios = {v: [t / p for t, p in zip(times[v], times["pinned"], strict=True)] for v in names if v != "pinned"}
        report[model] = {
            "step_ms_median": {v: round(1000 * statistics.median(t), 2) for v, t in times.items()},
            "ratio_to_pinned": {
                v: {"median": round(statistics.median(r), 3), "min": round(min(r), 3), "max": round(max(r), 3)}
                for v, r in ratios.items()
            },
        }
        print(model, json.dumps(report[model]))
    from codyra import CPU_NUMERICS
    from codyra.store.io import write_json

    write_json(
        args.out,
        {
            "models": report,
            "variants": {"pinned": CPU_NUMERICS, **{k: v for k, v in VARIANTS.items() if v}},
            "repetitions": args.repetitions,
            "steps": args.steps,
            "threads": 1,
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform()},
            "load_before": load_before,
            "load_after": os.getloadavg()[0],
            "date": time.strftime("%Y-%m-%d"),
        },
    )
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
