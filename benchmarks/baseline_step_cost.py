"""Training-step cost and peak memory of every baseline vs LoRA r16, on the mini CLIP and the
mini LM side by side (random weights, CPU).

Models (``--models``, default both): ``codyra-mini`` (the mini benchmark's CLIP; any other
open_clip name works too, e.g. ``ViT-B-16``) and ``codyra-mini-llama`` (the mini TRACE's
LLaMA, with the mini tokenizer's vocabulary size). Methods: LoRA r16 (the base), ZSCL's and
TRACE's baselines (full-ft, LwF, LwF-VR, WiSE-FT, ZSCL, EWC, GEM, OGD), the LoRA-family and
rank-adaptive baselines (O-LoRA, HiDe-LoRA, TreeLoRA, InfLoRA, AdaLoRA, DyLoRA, SoRA) and
CoDyRA; every adapter rank 16 on every matrix (InfLoRA on K and V, as its reference). LwF,
LwF-VR and ZSCL distil image-text logits: CLIP only (``n/a`` on the LM).

For each (model, method), in a fresh process (so its peak RSS is its own): build the model,
train task 1 for two steps (so task 2 starts with real stored state: EWC's Fisher, GEM's
memory, OGD's basis, O-LoRA's and HiDe-LoRA's earlier A rows, TreeLoRA's bandit, InfLoRA's
subspaces), then time ``--steps`` steps of task 2 after ``--warmup`` discarded ones, in the
engine's hook order: forward, task loss, ``extra_loss``, backward, ``before_optimizer_step``,
AdamW step, ``after_step``. The task is ``warmup + steps`` steps long, so the rank-adaptive
methods pass through their phases (AdaLoRA: warm-up, allocation, final; CoDyRA: dense, sparse)
and OGD collects at every step (one epoch: its dearer phase). Not timed: InfLoRA's passes over
the task's data before and after training (a per-task cost).

Reported per method: the median step seconds (CPU time of the process, the ratios' basis:
with one thread it is the step's compute and barely moves with the machine's load; wall time
beside it), the peak RSS (VmHWM) of the process and its rise over the RSS after the imports
(what the model, the method and training add), trainable parameters, the bytes stored per task
(update + method state, as ``codyra.store.updates.save_update`` writes them), and the ratios to
LoRA r16's. LoRA r16 is measured first and last on each model: the spread of its two runs
shows how much the machine's load drifted. ZSCL's reference data is synthetic
(``--reference-texts`` random captions, random images).

    .venv/bin/python benchmarks/baseline_step_cost.py                       # both minis, 10 steps
    .venv/bin/python benchmarks/baseline_step_cost.py --models ViT-B-16 --clip-batch 8 --steps 3
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

ADAPTER = {"rank": 16, "alpha": 16, "placement": "all"}
METHODS = {
    "lora-r16": {"kind": "lora", **ADAPTER},
    # ZSCL's and TRACE's baselines
    "full-ft": {"kind": "full"},
    "lwf": {"kind": "lwf"},
    "lwf-vr": {"kind": "lwf_vr"},
    "wise-ft": {"kind": "wise_ft"},
    "zscl": {"kind": "zscl", "ensemble_every": 1},  # a merge every step: its worst case (ZSCL: every 100)
    "ewc": {"kind": "ewc"},
    "gem": {"kind": "gem"},
    "ogd": {"kind": "ogd", **ADAPTER},  # TRACE runs it with rank 8 on q, v: here matched to LoRA r16
    # the LoRA-family and rank-adaptive baselines
    "olora": {"kind": "olora", **ADAPTER},
    "hidelora": {"kind": "hidelora", **ADAPTER},
    "treelora": {"kind": "treelora", **ADAPTER},
    "inflora": {"kind": "inflora", **ADAPTER, "placement": "kv"},  # per family, below
    "adalora": {"kind": "adalora", **ADAPTER, "target_r": 8},
    "dylora": {"kind": "dylora", **ADAPTER},
    "sora": {"kind": "sora", **ADAPTER},
    # the reference
    "codyra": {"kind": "codyra", **ADAPTER, "kappa_max": 0.005},
}
CLIP_ONLY = ("lwf", "lwf-vr", "zscl")  # they distil image-text logits
KV = {"clip": ["k", "v"], "lm": ["k_proj", "v_proj"]}
LM_MODELS = ("codyra-mini-llama",)
CLASSNAMES = ["cat", "dog", "car", "tree", "boat", "plane", "house", "flower"]


def family_name(model: str) -> str:
    return "lm" if model in LM_MODELS else "clip"


def method_spec(name: str, family: str, batch: int) -> dict:
    spec = dict(METHODS[name])
    if spec.get("placement") == "kv":
        spec["placement"] = KV[family]
    if name == "zscl":
        spec["reference_batch_size"] = batch
    return spec


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def clip_setup(args):
    """(model, family, forward, task loss, batch of a step, the task's description) for a
    random-weight open_clip model."""
    import open_clip
    import torch
    import torch.nn.functional as F
    from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

    import codyra.clip.model  # noqa: F401 - registers codyra-mini
    from codyra.clip.family import CLIP
    from codyra.clip.model import ClipBundle
    from codyra.data import reference
    from codyra.data.tasks import ImageConfig

    model = open_clip.create_model(args.model, pretrained=None).train()
    size = model.visual.image_size[0] if isinstance(model.visual.image_size, tuple) else model.visual.image_size
    image = ImageConfig(size, OPENAI_DATASET_MEAN, OPENAI_DATASET_STD)
    tokenizer = open_clip.get_tokenizer(args.model)
    tokens = tokenizer([f"a photo of a {c}." for c in CLASSNAMES])
    theta_0 = copy.deepcopy(model).eval()
    gen = torch.Generator().manual_seed(args.seed)
    ref_images = torch.randn(4 * args.clip_batch, 3, size, size, generator=gen)
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
        return {
            "images": torch.randn(args.clip_batch, 3, size, size, generator=g),
            "labels": torch.randint(0, len(CLASSNAMES), (args.clip_batch,), generator=g),
        }

    class Task:  # the task being trained: its class names, its training images under the evaluation transform
        classnames = CLASSNAMES

        def train_eval_set(self):  # LwF's distillation images (random, as the batches)
            labels = torch.randint(0, len(CLASSNAMES), (len(ref_images),), generator=gen)
            return torch.utils.data.TensorDataset(ref_images, labels)

    def task_loss(batch, outputs):
        return F.cross_entropy(outputs["logits"], batch["labels"])

    return model, Family(), forward, task_loss, batch_at, Task()


def lm_setup(args):
    """The same for the mini TRACE's LLaMA: answer loss on the last quarter of each sequence,
    the forward of the LM family (``codyra.llm.train``: left-padding position ids); no method reads
    an LM task's description."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from codyra.llm.family import CAUSAL_LM
    from codyra.llm.loss import answer_loss_sum, position_ids
    from codyra.llm.model import mini_model_config
    from codyra.mini.trace.tokenizer import MINI_TRACE_VOCAB_SIZE
    from codyra.trace.data import IGNORE_INDEX

    config = LlamaConfig(**mini_model_config(args.model), vocab_size=MINI_TRACE_VOCAB_SIZE)
    model = LlamaForCausalLM(config).train()

    def forward(m, batch):
        mask = batch["attention_mask"]
        return {"logits": m(input_ids=batch["input_ids"], attention_mask=mask, position_ids=position_ids(mask)).logits}

    def task_loss(batch, outputs):
        total, tokens = answer_loss_sum(outputs["logits"], batch["labels"])
        return total / tokens.clamp(min=1)

    def batch_at(step):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(3, MINI_TRACE_VOCAB_SIZE, (args.lm_batch, args.lm_seq), generator=g)
        labels = torch.full_like(ids, IGNORE_INDEX)
        answer = args.lm_seq - args.lm_seq // 4
        labels[:, answer:] = ids[:, answer:]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}

    return model, CAUSAL_LM, forward, task_loss, batch_at, None


def probe(name: str, args) -> dict:
    """In this (fresh) process: task 1 for one step, then task 2 timed."""
    import importlib

    import torch

    from codyra.methods import build_method
    from codyra.methods.base import TaskContext
    from codyra.store.updates import save_update

    family_kind = family_name(args.model)
    setup = lm_setup if family_kind == "lm" else clip_setup
    lm_modules = ("transformers.models.llama.modeling_llama", "codyra.llm.family")
    for module in lm_modules if family_kind == "lm" else ("open_clip", "codyra.clip.model", "codyra.clip.family"):
        importlib.import_module(module)  # before the RSS baseline: the rise is the model's and training's
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rss_start = _status_kb("VmRSS")
    model, family, forward, task_loss, batch_at, task_info = setup(args)
    theta_0 = copy.deepcopy(model).eval()
    batch_size = args.lm_batch if family_kind == "lm" else args.clip_batch

    def context(task, state, update, total):
        return TaskContext(
            model=model,
            family=family,
            targets=family.targets(model),
            vocab=family.vocabulary,
            generator=torch.Generator().manual_seed(task),
            weight_decay=0.0,
            task_index=task,
            device=torch.device("cpu"),
            previous_state=state,
            theta_0=lambda: copy.deepcopy(theta_0),
            forward=forward,
            task_loss=task_loss,
            stored_state=lambda k: state,
            stored_update=lambda k: update,
            cfg={"model": {"name": args.model}, "data": {"num_workers": 0}, "tasks": ["t1", "t2"]},
            method_name=name,
            seed=args.seed,
            total_steps=total,
            steps_per_epoch=total,  # one epoch: OGD collects every step, its dearer phase
            task_batches=lambda: (batch_at(step) for step in range(1, total + 1)),
            train={"batch_size": batch_size},  # what the methods read of the job's training settings
            task=task_info,
        )

    def run(task, steps, state, update):
        method = build_method(method_spec(name, family_kind, batch_size))
        ctx = context(task, state, update, steps)
        optimizer = torch.optim.AdamW(method.setup(ctx), lr=1e-5)
        seconds = []
        for step in range(1, steps + 1):
            batch = batch_at(step)
            began, cpu = time.perf_counter(), time.process_time()
            outputs = forward(model, batch)
            loss = task_loss(batch, outputs)
            extra = method.extra_loss(ctx, batch, outputs)
            (loss if extra is None else loss + extra).backward()
            method.before_optimizer_step(ctx)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            method.after_step(step, ctx.total_steps)
            seconds.append((time.perf_counter() - began, time.process_time() - cpu))
        update, summary = method.finish(model)
        return update, summary, method.state_to_store(), seconds

    update1, _, state1, _ = run(1, 2, None, None)  # AdaLoRA's final allocation needs a step before it
    update2, summary, state2, seconds = run(2, args.warmup + args.steps, state1 or None, update1)
    with tempfile.TemporaryDirectory() as tmp:
        stored = save_update(tmp, update2, {**summary, "task_index": 2}, state2)["stored_bytes"]
    wall, cpu = zip(*seconds[args.warmup :], strict=True)
    peak = _status_kb("VmHWM")
    return {
        "method": name,
        "step_cpu_s_median": statistics.median(cpu),
        "step_s_median": statistics.median(wall),
        "step_s_min": min(wall),
        "peak_rss_mib": peak / 1024,
        "peak_over_imports_mib": (peak - rss_start) / 1024,
        "trainable_params": summary["trainable_params"],
        "stored_bytes_per_task": stored,
    }


def measure(model: str, names: list[str]) -> dict:
    """Every method on ``model``, each in a fresh process, LoRA r16 first and last."""
    family = family_name(model)
    runnable = [n for n in names if n != "lora-r16" and not (family == "lm" and n in CLIP_ONLY)]
    rows = []
    for name in ["lora-r16", *runnable, "lora-r16"]:
        cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--probe", name, "--probe-model", model]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{name} on {model} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{model:17s} {name:9s} {rows[-1]['step_cpu_s_median']:.4f} CPU s/step", file=sys.stderr, flush=True)
    lora = [r for r in rows if r["method"] == "lora-r16"]
    base = {
        k: statistics.mean(r[k] for r in lora) for k in ("step_cpu_s_median", "peak_rss_mib", "stored_bytes_per_task")
    }
    results = rows[:-1]
    for r in results:
        r["step_ratio"] = r["step_cpu_s_median"] / base["step_cpu_s_median"]
        r["rss_ratio"] = r["peak_rss_mib"] / base["peak_rss_mib"]
        r["stored_ratio"] = r["stored_bytes_per_task"] / base["stored_bytes_per_task"]
    return {
        "model": model,
        "family": family,
        "lora_r16_runs_cpu_s": [r["step_cpu_s_median"] for r in lora],
        "rows": results,
    }


def print_model_table(report: dict) -> None:
    print(f"\n{report['model']} ({report['family']})")
    print(
        f"{'method':9s} {'CPU s/step':>10s} {'x lora':>7s} {'wall s/step':>11s} {'peak RSS MiB':>12s} {'x lora':>7s} "
        f"{'+MiB':>6s} {'trainable':>11s} {'stored/task MB':>14s} {'x lora':>7s}"
    )
    for r in report["rows"]:
        print(
            f"{r['method']:9s} {r['step_cpu_s_median']:10.4f} {r['step_ratio']:7.2f} {r['step_s_median']:11.4f} "
            f"{r['peak_rss_mib']:12.0f} {r['rss_ratio']:7.2f} {r['peak_over_imports_mib']:6.0f} "
            f"{r['trainable_params']:11,d} {r['stored_bytes_per_task'] / 1e6:14.2f} {r['stored_ratio']:7.1f}"
        )
    first, last = report["lora_r16_runs_cpu_s"]
    print(f"lora-r16 first/last run: {first:.4f} / {last:.4f} CPU s/step")


def print_side_by_side(reports: list[dict], names: list[str]) -> None:
    """One row per method, per model its step-time and peak-RSS ratios to LoRA r16."""
    print("\nratios to lora-r16 (step CPU time / peak RSS), side by side")
    print(f"{'method':9s}" + "".join(f" {r['model'][:17]:>17s}" for r in reports))
    by_model = [{row["method"]: row for row in r["rows"]} for r in reports]
    for name in names:
        cells = []
        for rows in by_model:
            row = rows.get(name)
            cells.append(f"{row['step_ratio']:8.2f} /{row['rss_ratio']:6.2f}" if row else f"{'n/a':>17s}")
        print(f"{name:9s}" + "".join(f" {c:>17s}" for c in cells))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--models",
        default="codyra-mini,codyra-mini-llama",
        help="comma-separated: open_clip names and/or codyra-mini-llama",
    )
    parser.add_argument("--clip-batch", type=int, default=32, help="images per CLIP step (the mini's train.batch_size)")
    parser.add_argument(
        "--lm-batch", type=int, default=4, help="sequences per LM step (the mini TRACE's train.batch_size)"
    )
    parser.add_argument(
        "--lm-seq", type=int, default=128, help="tokens per sequence (mini TRACE: 96 prompt + 32 answer)"
    )
    parser.add_argument("--steps", type=int, default=10, help="timed steps per method")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: CPU time = compute, robust to a loaded machine)"
    )
    parser.add_argument("--reference-texts", type=int, default=2000, help="ZSCL's reference captions (synthetic)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    parser.add_argument(
        "--out", type=Path, default=Path("results/benchmarks/baseline_step_cost.json"), help="JSON output"
    )
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--probe-model", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        args.model = args.probe_model
        print(json.dumps(probe(args.probe, args)))
        return
    names = [n for n in args.methods.split(",") if n]
    unknown = sorted(set(names) - set(METHODS))
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    names = ["lora-r16", *[n for n in names if n != "lora-r16"]]
    models = [m for m in args.models.split(",") if m]
    load_before = os.getloadavg()[0]
    reports = [measure(model, names) for model in models]
    for report in reports:
        print_model_table(report)
    print_side_by_side(reports, names)
    load_after = os.getloadavg()[0]
    print(f"load {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} cores")
    from codyra.store.io import write_json

    config = {k: v for k, v in vars(args).items() if not k.startswith("probe") and k != "out"}
    summary = {
        "models": reports,
        "config": config,
        "load_before": load_before,
        "load_after": load_after,
        "host": platform.node(),
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, summary)


if __name__ == "__main__":
    main()
