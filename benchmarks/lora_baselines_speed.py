"""Training-step cost of the issue-16 baselines relative to fixed-rank LoRA r16, on open_clip.

For each method (O-LoRA, HiDe-LoRA, TreeLoRA, InfLoRA, AdaLoRA, DyLoRA, SoRA, and CoDyRA as a
reference) one process builds two copies of the same random-weight model: LoRA r16 and the
method, both on all matrices (InfLoRA on K and V, as its reference). Each method first runs a
one-step task 1 (setup, step, finish, stored state), so the timed steps are task 2's with
everything that depends on earlier tasks (O-LoRA's and HiDe-LoRA's terms against task 1's A
rows, TreeLoRA's bandit, InfLoRA's projected design). A step = the CLIP forward (image and
text towers), the symmetric contrastive loss, the method's ``extra_loss``, backward,
``before_optimizer_step``, AdamW, ``after_step`` at a step deep inside a nominal 1000-step task
(AdaLoRA allocates, SoRA and CoDyRA threshold). The two variants alternate within each
repetition (order reversed every other one); reported per method: median step seconds of
both and the median of the paired ratios method / LoRA.

    .venv/bin/python benchmarks/lora_baselines_speed.py                   # ViT-B-16, batch 4
    .venv/bin/python benchmarks/lora_baselines_speed.py --model ViT-B-32 --batch 2 --methods olora sora

Writes ``results/benchmarks/lora_baselines_speed.json`` (atomically).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import platform
import statistics
import sys
import time
from pathlib import Path

import open_clip
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adapter_speed import CLASSNAMES, interleaved

import codyra.clip.model  # noqa: F401  (registers the mini's open_clip architecture, codyra-mini)
from codyra import __version__ as codyra_version
from codyra.clip.family import CLIP
from codyra.methods import build_method
from codyra.methods.base import TaskContext, standalone_context

NOMINAL_TOTAL = 1000
TIMED_FROM = 500  # after_step's step: inside AdaLoRA's allocation phase, past CoDyRA's dense phase
METHODS = ("olora", "hidelora", "treelora", "inflora", "adalora", "dylora", "sora", "codyra")


def spec(kind: str, rank: int) -> dict:
    base = {"kind": kind, "rank": rank, "alpha": rank, "placement": "all"}
    extra = {
        "inflora": {"placement": ["k", "v"]},
        "adalora": {"target_r": rank // 2},
        "codyra": {"kappa_max": 0.005},
    }
    return {**base, **extra.get(kind, {})}


def build_inputs(args):
    """A random-weight open_clip model (frozen) and a fixed batch of images and tokenized captions."""
    torch.manual_seed(args.seed)
    base = open_clip.create_model(args.model, pretrained=None).eval()
    base.requires_grad_(False)
    size = base.visual.image_size
    size = size[0] if isinstance(size, (tuple, list)) else size
    images = torch.randn(args.batch, 3, size, size, generator=torch.Generator().manual_seed(args.seed))
    names = (CLASSNAMES * (args.batch // len(CLASSNAMES) + 1))[: args.batch]
    tokens = open_clip.get_tokenizer(args.model)([f"a photo of a {c}." for c in names])
    return base, images, tokens


def clip_forward(model, batch):
    image = F.normalize(model.encode_image(batch["images"]), dim=-1)
    text = F.normalize(model.encode_text(batch["tokens"]), dim=-1)
    return {"logits": model.logit_scale.exp() * image @ text.T}


def clip_loss(batch, outputs):
    logits = outputs["logits"]
    labels = torch.arange(len(logits))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def context(model, task: int, previous_state, batch, total: int) -> TaskContext:
    """Task ``task`` of a two-task stream on one fixed batch (the standalone context, extended)."""
    base = standalone_context(model, CLIP, torch.Generator().manual_seed(task), 0.0, total)
    return dataclasses.replace(
        base,
        task_index=task,
        previous_state=previous_state,
        forward=clip_forward,
        task_loss=clip_loss,
        task_batches=lambda: iter([batch]),
        cfg={"tasks": [{"name": "t1"}, {"name": "t2"}]},
    )


class Variant:
    """A method on its own copy of the model, set up as task 2 after a one-step task 1."""

    def __init__(self, kind: str, base, batch, args):
        self.model, self.batch = copy.deepcopy(base), batch
        previous = None
        if kind not in ("lora", "codyra", "dylora", "sora", "adalora"):  # methods that read earlier tasks
            first = build_method(spec(kind, args.rank))
            ctx = context(self.model, 1, None, batch, 1)
            self._run_step(first, ctx, torch.optim.AdamW(first.setup(ctx), lr=args.lr), 1, 1)
            first.finish(self.model)
            previous = first.state_to_store()
        self.method = build_method(spec(kind, args.rank))
        self.ctx = context(self.model, 2, previous, batch, NOMINAL_TOTAL)
        self.optimizer = torch.optim.AdamW(self.method.setup(self.ctx), lr=args.lr)
        self.model.train()

    def _run_step(self, method, ctx, optimizer, step: int, total: int) -> None:
        outputs = ctx.forward(ctx.model, self.batch)
        loss = ctx.task_loss(self.batch, outputs)
        extra = method.extra_loss(ctx, self.batch, outputs)
        (loss if extra is None else loss + extra).backward()
        method.before_optimizer_step(ctx)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.after_step(step, total)

    def step(self) -> float:
        t0 = time.perf_counter()
        self._run_step(self.method, self.ctx, self.optimizer, TIMED_FROM, NOMINAL_TOTAL)
        return time.perf_counter() - t0


def main(argv=None) -> dict:
    from codyra.io import write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--model", default="ViT-B-16", help="open_clip architecture (random weights)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/benchmarks/lora_baselines_speed.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    base, images, tokens = build_inputs(args)
    batch = {"images": images, "tokens": tokens}
    load_start = _loadavg()
    results = {}
    for kind in args.methods:
        variants = {"lora": Variant("lora", base, batch, args), kind: Variant(kind, base, batch, args)}
        records = interleaved(variants, lambda _name, v: v.step(), args.warmup, args.steps)
        lora, mine = [r[0] for r in records["lora"]], [r[0] for r in records[kind]]
        results[kind] = {
            "lora_median_s": statistics.median(lora),
            "method_median_s": statistics.median(mine),
            "paired_ratio_median": statistics.median(m / b for m, b in zip(mine, lora)),
            "trainable_params": sum(p.numel() for g in variants[kind].optimizer.param_groups for p in g["params"]),
        }
        print(
            f"{kind:9s} step {results[kind]['method_median_s']:.3f}s  lora {results[kind]['lora_median_s']:.3f}s  "
            f"ratio {results[kind]['paired_ratio_median']:.3f}",
            flush=True,
        )
    out = {
        "methods": results,
        "config": vars(args),
        "model": f"{args.model} (random weights, CPU)",
        "loadavg_1min": {"start": load_start, "end": _loadavg()},
        "versions": {"codyra": codyra_version, "torch": torch.__version__, "python": platform.python_version()},
    }
    write_json(Path(args.out), out)
    return out


def _loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return None


if __name__ == "__main__":
    main()
