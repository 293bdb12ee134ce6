"""Training-step cost of the issue-15 baselines vs LoRA r16 on CLIP (random weights, CPU).

For each method, in a fresh process (so its peak RSS is its own): build the model
(``--model codyra-mini``, the mini benchmark's CLIP, or ``ViT-B-16``), train task 1 for one
step (so task 2 starts with real stored state: EWC's Fisher, GEM's memory, OGD's basis),
then time ``--steps`` steps of task 2 after ``--warmup`` discarded ones, in the engine's hook
order: forward (image + class prompts), task loss, ``extra_loss``, backward,
``before_optimizer_step``, AdamW step, ``after_step``. Reported per method: the median step
seconds (CPU time of the process, the ratios' basis: with one thread it is the step's compute
and barely moves with the machine's load; wall time beside it), the peak RSS (VmHWM) of the
process, trainable parameters, the bytes stored per task (update + method state, as
``codyra.updates.save_update`` writes them), and each figure over lora-r16's. LoRA r16 is measured first and last: the spread of its two runs shows how
much the machine's load drifted.

ZSCL's reference data is synthetic here: ``--reference-texts`` random captions (ZSCL uses the
~13k Conceptual Captions validation captions; their text features are computed once per task)
and random images of the model's input size. OGD runs on CLIP with rank 16 on every matrix, to
compare with LoRA r16 (TRACE runs it on an LLM with rank 8 on q, v).

    .venv/bin/python benchmarks/baseline_step_cost.py --model codyra-mini --batch 64 --steps 10
    .venv/bin/python benchmarks/baseline_step_cost.py --model ViT-B-16 --batch 8 --steps 3
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METHODS = {
    "lora-r16": {"kind": "lora", "rank": 16, "alpha": 16, "placement": "all"},
    "full-ft": {"kind": "full"},
    "lwf": {"kind": "lwf"},
    "lwf-vr": {"kind": "lwf_vr"},
    "wise-ft": {"kind": "wise_ft"},
    "zscl": {"kind": "zscl", "ensemble_every": 1},  # a merge every step: its worst case (ZSCL: every 100)
    "ewc": {"kind": "ewc"},
    "gem": {"kind": "gem"},
    "ogd": {"kind": "ogd", "rank": 16, "alpha": 16, "placement": "all"},
}
CLASSNAMES = ["cat", "dog", "car", "tree", "boat", "plane", "house", "flower"]


def _status_kb(field: str) -> int | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def probe(name: str, args) -> dict:
    """In this (fresh) process: task 1 for one step, then task 2 timed."""
    import open_clip
    import torch
    import torch.nn.functional as F
    from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

    import codyra.clip.model  # noqa: F401 - registers codyra-mini
    from codyra.clip.family import CLIP
    from codyra.clip.model import ClipBundle
    from codyra.data import reference
    from codyra.methods import build_method
    from codyra.methods.base import TaskContext
    from codyra.tasks import ImageConfig
    from codyra.updates import save_update

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = open_clip.create_model(args.model, pretrained=None).train()
    size = model.visual.image_size[0] if isinstance(model.visual.image_size, tuple) else model.visual.image_size
    image = ImageConfig(size, OPENAI_DATASET_MEAN, OPENAI_DATASET_STD)
    tokenizer = open_clip.get_tokenizer(args.model)
    tokens = tokenizer([f"a photo of a {c}." for c in CLASSNAMES])
    theta_0 = copy.deepcopy(model).eval()
    gen = torch.Generator().manual_seed(args.seed)
    ref_images = torch.randn(4 * args.batch, 3, size, size, generator=gen)
    ref_texts = [f"a photo of {i} things." for i in range(args.reference_texts)]
    reference.load_reference = lambda cfg, img, method_name=None: reference.ReferenceData(list(ref_images), ref_texts)

    class Family:  # the CLIP family whose theta_0 is this random model
        def __getattr__(self, attr):
            return getattr(CLIP, attr)

        def pretrained(self, cfg):
            return ClipBundle(copy.deepcopy(theta_0), tokenizer, image)

    def forward(m, batch):
        img = F.normalize(m.encode_image(batch["images"]).float(), dim=-1)
        txt = F.normalize(m.encode_text(tokens).float(), dim=-1)
        return {"logits": m.logit_scale.exp() * img @ txt.T, "image_features": img, "text_features": txt}

    def batch_at(step):
        g = torch.Generator().manual_seed(step)
        return {"images": torch.randn(args.batch, 3, size, size, generator=g), "labels": torch.randint(0, len(CLASSNAMES), (args.batch,), generator=g)}

    def context(task, state, update, total):
        return TaskContext(
            model=model, family=Family(), targets=CLIP.targets(model), vocab=CLIP.vocabulary,
            generator=torch.Generator().manual_seed(task), weight_decay=0.0, task_index=task,
            device=torch.device("cpu"), previous_state=state, theta_0=lambda: copy.deepcopy(theta_0),
            forward=forward, task_loss=lambda b, o: F.cross_entropy(o["logits"], b["labels"]),
            stored_state=lambda k: state, stored_update=lambda k: update,
            cfg={"model": {"name": args.model}, "data": {"num_workers": 0}}, method_name=name, seed=args.seed,
            total_steps=total, steps_per_epoch=total,  # one epoch: OGD collects every step, its dearer phase
            task_batches=lambda: (batch_at(step) for step in range(1, total + 1)),
        )

    def run(task, steps, state, update):
        method = build_method({**METHODS[name], **({"reference_batch_size": args.batch} if name == "zscl" else {})})
        ctx = context(task, state, update, steps)
        groups = method.setup(ctx)
        optimizer = torch.optim.AdamW(groups, lr=1e-5)
        seconds = []
        for step in range(1, steps + 1):
            batch = batch_at(step)
            began, cpu = time.perf_counter(), time.process_time()
            outputs = forward(model, batch)
            loss = ctx.task_loss(batch, outputs)
            extra = method.extra_loss(ctx, batch, outputs)
            (loss if extra is None else loss + extra).backward()
            method.before_optimizer_step(ctx)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            method.after_step(step, ctx.total_steps)
            seconds.append((time.perf_counter() - began, time.process_time() - cpu))
        update, summary = method.finish(model)
        return update, summary, method.state_to_store(), seconds

    update1, _, state1, _ = run(1, 1, None, None)
    update2, summary, state2, seconds = run(2, args.warmup + args.steps, state1 or None, update1)
    with tempfile.TemporaryDirectory() as tmp:
        stored = save_update(tmp, update2, {**summary, "task_index": 2}, state2)["stored_bytes"]
    wall, cpu = zip(*seconds[args.warmup :], strict=True)
    return {
        "method": name,
        "step_cpu_s_median": statistics.median(cpu),
        "step_s_median": statistics.median(wall),
        "step_s_min": min(wall),
        "peak_rss_mib": _status_kb("VmHWM") / 1024,
        "trainable_params": summary["trainable_params"],
        "stored_bytes_per_task": stored,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="codyra-mini", help="open_clip model (random weights): codyra-mini or ViT-B-16")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per method")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: CPU time = compute, robust to a loaded machine)")
    parser.add_argument("--reference-texts", type=int, default=2000, help="ZSCL's reference captions (synthetic)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    parser.add_argument("--out", type=Path, default=None, help="JSON output (default results/benchmarks/baseline_step_cost_<model>.json)")
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.probe, args)))
        return
    names = [n for n in args.methods.split(",") if n]
    unknown = sorted(set(names) - set(METHODS))
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    order = ["lora-r16", *[n for n in names if n != "lora-r16"], "lora-r16"]
    load_before = os.getloadavg()[0]
    rows = []
    for name in order:
        cmd = [sys.executable, os.path.abspath(__file__), "--probe", name, *sys.argv[1:]]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{name:9s} {rows[-1]['step_cpu_s_median']:.3f} CPU s/step", file=sys.stderr, flush=True)
    lora = [r for r in rows if r["method"] == "lora-r16"]
    keys = ("step_cpu_s_median", "peak_rss_mib", "stored_bytes_per_task")
    base = {k: statistics.mean(r[k] for r in lora) for k in keys}
    results = [rows[0], *rows[1:-1]]
    for r in results:
        r["step_ratio"] = r["step_cpu_s_median"] / base["step_cpu_s_median"]
        r["rss_ratio"] = r["peak_rss_mib"] / base["peak_rss_mib"]
        r["stored_ratio"] = r["stored_bytes_per_task"] / base["stored_bytes_per_task"]
    report = {
        "model": args.model, "batch": args.batch, "steps": args.steps, "threads": args.threads,
        "lora_r16_runs_cpu_s": [r["step_cpu_s_median"] for r in lora], "load_before": load_before, "load_after": os.getloadavg()[0],
        "host": platform.node(), "rows": results,
    }
    header = (
        f"{'method':9s} {'CPU s/step':>10s} {'x lora':>7s} {'wall s/step':>11s} {'peak RSS MiB':>13s} {'x lora':>7s} "
        f"{'trainable':>11s} {'stored/task MB':>15s} {'x lora':>8s}"
    )
    print(header)
    for r in results:
        print(
            f"{r['method']:9s} {r['step_cpu_s_median']:10.3f} {r['step_ratio']:7.2f} {r['step_s_median']:11.3f} "
            f"{r['peak_rss_mib']:13.0f} {r['rss_ratio']:7.2f} "
            f"{r['trainable_params']:11,d} {r['stored_bytes_per_task'] / 1e6:15.1f} {r['stored_ratio']:8.1f}"
        )
    print(f"lora-r16 first/last run: {report['lora_r16_runs_cpu_s'][0]:.3f} / {report['lora_r16_runs_cpu_s'][1]:.3f} CPU s/step; "
          f"load {load_before:.1f} -> {report['load_after']:.1f} on {os.cpu_count()} cores")
    from codyra.io import write_json

    out = args.out or Path("results/benchmarks") / f"baseline_step_cost_{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, report)


if __name__ == "__main__":
    main()
