"""CoDyRA's training step against LoRA's, as paired ratios with their spread, on every model.

For each model (``--models``: the mini CLIP ``codyra-mini``, the mini TRACE's LLaMA
``codyra-mini-llama``, any open_clip name such as ``ViT-B-16``), in one process: two copies of
the same random-weight model, one with LoRA and one with CoDyRA (rank 16 on every matrix, the
same adapter initialisation), each trained by the loop's per-step calls: forward, task loss,
backward, AdamW (``fused=True``, as ``codyra.steps.backends``), ``after_step`` (CoDyRA's proximal
step) and ``step_metrics`` (the active-rank count the loop records every step).

A repetition runs ``--block`` steps of one variant, then ``--block`` of the other (the order
alternates between repetitions); its ratio is CoDyRA's CPU seconds over LoRA's. CoDyRA's two
phases are measured apart: the dense phase (threshold 0) and the sparse phase (a threshold
above 0 every step). Reported per model and phase: the median of the ``--reps`` paired ratios,
their quartiles and range (the spread), and each variant's median step. CPU time of this
process with ``--threads 1`` is the step's compute, barely moved by other load; the 1-minute
load average at start and end is recorded. The target: a median ratio <= 1.05 in both phases
on every model.

    .venv/bin/python benchmarks/codyra_overhead.py                        # both minis, ~2 min
    .venv/bin/python benchmarks/codyra_overhead.py --models ViT-B-16 --clip-batch 8 --reps 10
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baseline_step_cost import clip_setup, family_name, lm_setup
from run_record import write_record

TARGET = 1.05
ADAPTER = {"rank": 16, "alpha": 16, "placement": "all"}
# CoDyRA's step index in each phase of a task of TOTAL steps (dense_ratio 0.5: kappa > 0 after step 500)
TOTAL, PHASE_STEP = 1000, {"dense": 1, "sparse": 750}


class Variant:
    """One adapted copy of the model and its optimizer, stepped as the training loop steps it."""

    def __init__(self, kind: str, model, family, forward, task_loss):
        import torch

        from codyra.methods import build_method
        from codyra.methods.base import standalone_context

        self.model, self.forward, self.task_loss = model, forward, task_loss
        self.method = build_method({"kind": kind, **ADAPTER})
        ctx = standalone_context(model, family, torch.Generator().manual_seed(0), 0.0)
        self.optimizer = torch.optim.AdamW(self.method.setup(ctx), lr=1e-4, fused=True)
        self.step_index = 0

    def steps(self, batches: list) -> float:
        """CPU seconds of one step per batch."""
        began = time.process_time()
        for batch in batches:
            loss = self.task_loss(batch, self.forward(self.model, batch))
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.step_index += 1
            self.method.after_step(self.step_index, TOTAL)
            self.method.step_metrics()
        return time.process_time() - began


def quartiles(values: list[float]) -> dict:
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": q2, "q1": q1, "q3": q3, "min": min(values), "max": max(values)}


def measure(model_name: str, args) -> dict:
    import torch

    setup = lm_setup if family_name(model_name) == "lm" else clip_setup
    torch.manual_seed(args.seed)
    model, family, forward, task_loss, batch_at = setup(argparse.Namespace(**{**vars(args), "model": model_name}))
    variants = {kind: Variant(kind, copy.deepcopy(model), family, forward, task_loss) for kind in ("lora", "codyra")}
    batches = [batch_at(step) for step in range(1, args.block + 1)]
    phases = {}
    for phase, start in PHASE_STEP.items():
        variants["codyra"].step_index = start - 1  # CoDyRA's threshold depends on the step index alone
        for variant in variants.values():
            variant.steps(batches[: args.warmup])
        ratios, seconds = [], {"lora": [], "codyra": []}
        for rep in range(args.reps):
            order = ("lora", "codyra") if rep % 2 == 0 else ("codyra", "lora")
            cpu = {kind: variants[kind].steps(batches) / args.block for kind in order}
            for kind, s in cpu.items():
                seconds[kind].append(s)
            ratios.append(cpu["codyra"] / cpu["lora"])
        kappa = variants["codyra"].method.kappa
        phases[phase] = {
            "paired_ratio": quartiles(ratios),
            "ratios": ratios,
            "step_cpu_s_median": {kind: statistics.median(s) for kind, s in seconds.items()},
            "codyra_kappa": kappa,
        }
        print(
            f"{model_name:17s} {phase:6s} x{phases[phase]['paired_ratio']['median']:.3f} "
            f"(IQR {phases[phase]['paired_ratio']['q1']:.3f}-{phases[phase]['paired_ratio']['q3']:.3f}, "
            f"range {min(ratios):.3f}-{max(ratios):.3f}; kappa {kappa:g})",
            file=sys.stderr,
            flush=True,
        )
    worst = max(p["paired_ratio"]["median"] for p in phases.values())
    return {"model": model_name, "phases": phases, "worst_median_ratio": worst, "meets_target": worst <= TARGET}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="codyra-mini,codyra-mini-llama", help="comma-separated model names")
    parser.add_argument("--reps", type=int, default=20, help="paired repetitions per phase (default 20)")
    parser.add_argument("--block", type=int, default=3, help="steps per variant in a repetition (default 3)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per variant and phase (default 2)")
    parser.add_argument("--clip-batch", type=int, default=64, help="images per CLIP step (the mini's batch size)")
    parser.add_argument("--lm-batch", type=int, default=4, help="sequences per LM step (the mini TRACE's)")
    parser.add_argument("--lm-seq", type=int, default=128, help="tokens per sequence (mini TRACE: 96 + 32)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: CPU time = the step's compute)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/codyra_overhead.json"))
    args = parser.parse_args(argv)
    if args.warmup > args.block:
        parser.error("--warmup must not exceed --block (the warm-up steps reuse the block's batches)")
    args.reference_texts = 1  # clip_setup's ZSCL reference data: unused here

    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    reports = [measure(m, args) for m in args.models.split(",") if m]
    summary = write_record(
        args.out,
        {
            "models": reports,
            "target": TARGET,
            "meets_target": all(r["meets_target"] for r in reports),
            "config": {k: v for k, v in vars(args).items() if k not in ("out", "reference_texts")}
            | {"adapter": ADAPTER},
        },
        load_before,
        {"torch": torch.__version__},
    )
    print(f"\n{'model':17s} {'phase':6s} {'median':>7s} {'q1':>6s} {'q3':>6s} {'min':>6s} {'max':>6s}  LoRA s/step")
    for r in reports:
        for phase, p in r["phases"].items():
            q = p["paired_ratio"]
            print(
                f"{r['model']:17s} {phase:6s} {q['median']:7.3f} {q['q1']:6.3f} {q['q3']:6.3f} {q['min']:6.3f} "
                f"{q['max']:6.3f}  {p['step_cpu_s_median']['lora']:.4f}"
            )
    print(f"target <= {TARGET}x: {'met' if summary['meets_target'] else 'NOT met'}; load {summary['loadavg_1min']}")
    return summary


if __name__ == "__main__":
    main()
