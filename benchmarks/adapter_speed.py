"""CoDyRA vs fixed-rank LoRA on ViT-B-16 (random weights, CPU), measured side by side.

One process, the same inputs and the same starting weights for every variant:

1. Train step: CoDyRA (gates learnt, proximal soft-thresholding after the optimizer step,
   i.e. a step of the sparse phase with kappa > 0) vs fixed-rank LoRA, both rank 16 over all
   144 adapted matrices. A step = forward image + text, symmetric CLIP contrastive loss,
   backward, AdamW step, ``method.after_step``. Target: ratio <= 1.05.
2. Inference (encode_image + encode_text, inference_mode): the merged model (after
   ``method.finish``, a plain open_clip model) vs the base model. Target: ratio 1.00.
   The unmerged model (adapters still attached) is timed as a reference.
3. Size on disk: the stored CoDyRA task update (``update.safetensors`` via
   ``codyra.store.updates.save_update``) with half of each matrix's gates pruned, and as trained
   (only what the proximal steps pruned), vs a full model checkpoint (``safetensors.torch.save_file`` of the
   state dict).

Variants are interleaved per repetition (order alternating), warm-up steps are discarded;
reported are the median and the minimum of the timed steps and, the most robust figure on
a shared machine, the median of the per-repetition paired ratios (the two variants' steps
of one repetition run back to back, so slow drifts in machine load cancel). The load
average before and after is recorded: figures taken with load above --threads are noisy.
Peak RSS per training variant comes from a fresh subprocess per variant that builds the
model and runs two train steps (VmHWM); --no-rss skips it. The AdamW step and the proximal
step are also timed alone, repeated, after the run (``overheads_ms``).

    .venv/bin/python benchmarks/adapter_speed.py            # defaults: ~5 minutes on 2 idle cores
    .venv/bin/python benchmarks/adapter_speed.py --profile  # + torch.profiler op tables
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import open_clip
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from codyra import __version__ as codyra_version
from codyra.adapters.attach import LoRALinear, LoRAMultiheadAttention
from codyra.clip.family import CLIP
from codyra.clip.targets import clip_targets
from codyra.methods import build_method
from codyra.methods.base import standalone_context
from codyra.store.io import write_json
from codyra.store.updates import UPDATE_FILE, save_update

MODEL = "ViT-B-16"
TRAIN_TARGET = 1.05
INFER_TARGET = 1.00
CLASSNAMES = ["cat", "dog", "car", "tree", "boat", "plane", "house", "flower"]
# nominal schedule the CoDyRA steps pretend to belong to: they start at 90% of it, deep in
# the sparse phase (step > dense_ratio * total), so after_step thresholds with kappa ~ 0.8 kappa_max
NOMINAL_TOTAL = 1000
NOMINAL_START = 900


# ---------------------------------------------------------------- memory
def rss_probe(variant: str, args) -> dict:
    """In a fresh process: peak RSS of building the model (+ two train steps of ``variant``)."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    base, images, tokens = build_inputs(args)
    if variant != "model":
        trainer = Trainer(
            variant, base, method_spec(variant, args), args.lr, args.weight_decay, args.seed, copy_model=False
        )
        for _ in range(2):
            trainer.step(images, tokens)
    # VmHWM belongs to this process's own address space; ru_maxrss would include the parent's
    # RSS at fork time (Linux keeps it across execve), so it is only the fallback
    hwm = _status_kb("VmHWM")
    peak_kb = hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"variant": variant, "maxrss_mib": peak_kb / 1024}


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def measure_rss(args) -> dict | None:
    out = {}
    for variant in ("model", "lora", "codyra"):
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--rss-probe",
            variant,
            "--threads",
            str(args.threads),
            "--batch",
            str(args.batch),
            "--rank",
            str(args.rank),
            "--seed",
            str(args.seed),
        ]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"RSS probe {variant} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return None
        out[variant] = json.loads(done.stdout.strip().splitlines()[-1])["maxrss_mib"]
    return out


# ---------------------------------------------------------------- steps
def clip_loss(model, images, tokens):
    img = F.normalize(model.encode_image(images), dim=-1)
    txt = F.normalize(model.encode_text(tokens), dim=-1)
    logits = model.logit_scale.exp() * img @ txt.T
    labels = torch.arange(len(images))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


class Trainer:
    def __init__(self, name, base, spec, lr, weight_decay, seed, copy_model=True):
        self.name = name
        self.model = copy.deepcopy(base) if copy_model else base
        self.method = build_method(spec)
        groups = self.method.setup(
            standalone_context(self.model, CLIP, torch.Generator().manual_seed(seed), weight_decay)
        )
        self.optimizer = torch.optim.AdamW(groups, lr=lr)
        self.model.train()
        self.step_index = NOMINAL_START
        self.trainable = sum(p.numel() for g in groups for p in g["params"])

    def step(self, images, tokens):
        """One training step; returns per-phase seconds."""
        self.step_index += 1
        c0, t0 = time.process_time(), time.perf_counter()
        loss = clip_loss(self.model, images, tokens)
        t1 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        self.optimizer.step()
        t3 = time.perf_counter()
        self.method.after_step(self.step_index, NOMINAL_TOTAL)
        t4 = time.perf_counter()
        if getattr(self.method, "kappa", None) == 0.0:
            raise RuntimeError("CoDyRA step is not in the sparse phase (kappa == 0)")
        return {
            "forward": t1 - t0,
            "backward": t2 - t1,
            "optimizer": t3 - t2,
            "after_step": t4 - t3,
            "total": t4 - t0,
            "cpu": time.process_time() - c0,
        }


def method_spec(variant: str, args) -> dict:
    common = {"kind": variant, "rank": args.rank, "alpha": args.rank, "placement": "all"}
    if variant == "codyra":
        common.update(kappa_max=args.kappa_max, dense_ratio=0.5)
    return common


def build_inputs(args):
    """Random-weight ViT-B-16 (frozen, eval) and a fixed batch of images and tokenized texts."""
    torch.manual_seed(args.seed)
    base = open_clip.create_model(MODEL, pretrained=None).eval()
    for p in base.parameters():
        p.requires_grad_(False)
    gen = torch.Generator().manual_seed(args.seed)
    images = torch.randn(args.batch, 3, 224, 224, generator=gen)
    names = (CLASSNAMES * (args.batch // len(CLASSNAMES) + 1))[: args.batch]
    tokens = open_clip.get_tokenizer(MODEL)([f"a photo of a {c}." for c in names])
    return base, images, tokens


def infer(model, images, tokens):
    with torch.inference_mode():
        t0 = time.perf_counter()
        img = model.encode_image(images)
        txt = model.encode_text(tokens)
        elapsed = time.perf_counter() - t0
    return elapsed, img, txt


def interleaved(variants: dict, run, warmup: int, timed: int):
    """Run ``run(name, obj)`` warmup + timed times per variant, alternating the order."""
    names = list(variants)
    records = {n: [] for n in names}
    for rep in range(warmup + timed):
        order = names if rep % 2 == 0 else names[::-1]
        for n in order:
            result = run(n, variants[n])
            if rep >= warmup:
                records[n].append((result,))
    return records


def paired_ratios(records, num, den):
    return [a[0] / b[0] for a, b in zip(records[num], records[den], strict=True)]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- helpers
def prune_half(method) -> int:
    """Zero the half of each adapter's gates with the smallest |w| (a realistic end state)."""
    pruned = 0
    with torch.no_grad():
        for adapter in method.adapters.values():
            k = adapter.rank // 2
            idx = adapter.w.detach().abs().argsort()[:k]
            adapter.w.data[idx] = 0.0
            pruned += k
    return pruned


def has_adapters(model) -> bool:
    return any(isinstance(m, (LoRALinear, LoRAMultiheadAttention)) for m in model.modules())


def file_size(path: Path) -> int:
    return path.stat().st_size


def measure_overheads(parts: dict, args, repeats: int = 20) -> dict:
    """Fastest of ``repeats`` calls, in ms, of optimizer.step() (as configured, and with
    fused=True) and of after_step: fixed work, so the minimum is the figure least touched
    by other processes."""

    def timed(fn, n):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t0)
        return min(xs) * 1e3

    out = {}
    for n, (optimizer, method) in parts.items():
        fused = torch.optim.AdamW(
            [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in optimizer.param_groups],
            lr=args.lr,
            fused=True,
        )
        out[n] = {
            "adamw_step": timed(optimizer.step, repeats),
            "adamw_fused_step": timed(fused.step, repeats),
            "after_step": timed(functools.partial(method.after_step, NOMINAL_START + 50, NOMINAL_TOTAL), repeats),
            "optimizer_tensors": sum(len(g["params"]) for g in optimizer.param_groups),
        }
    return out


def profile_step(trainer, images, tokens, rows: int) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(images, tokens)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


# ---------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--steps", type=int, default=5, help="timed train steps per variant (default 5)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up train steps per variant (default 3)")
    p.add_argument("--infer-steps", type=int, default=10, help="timed inference passes per variant (default 10)")
    p.add_argument("--infer-warmup", type=int, default=2, help="untimed inference passes per variant (default 2)")
    p.add_argument("--batch", type=int, default=8, help="images and texts per batch (default 8)")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--kappa-max", type=float, default=0.005, help="CoDyRA kappa_max (paper default 0.005)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true", help="print a torch.profiler table of one step per variant")
    p.add_argument("--no-rss", action="store_true", help="skip the peak-RSS subprocesses (~30 s)")
    p.add_argument("--rss-probe", choices=("model", "lora", "codyra"), help=argparse.SUPPRESS)
    p.add_argument("--out", default="results/benchmarks/adapter_speed.json")
    args = p.parse_args(argv)
    if args.steps < 1 or args.infer_steps < 1 or args.warmup < 0 or args.infer_warmup < 0 or args.batch < 2:
        p.error("--steps/--infer-steps must be >= 1, warm-ups >= 0, --batch >= 2")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.rss_probe:
        print(json.dumps(rss_probe(args.rss_probe, args)))
        return {}
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    load_start = os.getloadavg()[0]
    base, images, tokens = build_inputs(args)
    n_targets = len(clip_targets(base))
    log(
        f"{MODEL} random weights, {n_targets} adapted matrices, batch {args.batch}, "
        f"{args.threads} threads, load average {load_start:.2f}"
    )
    if load_start > args.threads:
        log(
            f"WARNING: load average {load_start:.2f} > {args.threads} threads: "
            "other processes compete, timings are noisy"
        )

    trainers = {
        v: Trainer(v, base, method_spec(v, args), args.lr, args.weight_decay, args.seed) for v in ("lora", "codyra")
    }

    # 1. train steps, interleaved
    log(f"train: {args.warmup} warm-up + {args.steps} timed steps per variant, interleaved")
    train = interleaved(trainers, lambda n, t: t.step(images, tokens), args.warmup, args.steps)
    train_stats = {}
    for n, recs in train.items():
        phases = {k: median([r[0][k] for r in recs]) for k in recs[0][0]}
        train_stats[n] = {
            "median_s": phases["total"],
            "phases_median_s": phases,
            "steps_s": [r[0]["total"] for r in recs],
            "trainable_params": trainers[n].trainable,
        }
    for s in train_stats.values():
        s["min_s"] = min(s["steps_s"])
    train_ratio = train_stats["codyra"]["median_s"] / train_stats["lora"]["median_s"]
    train_paired = [
        c / l for c, l in zip(train_stats["codyra"]["steps_s"], train_stats["lora"]["steps_s"], strict=True)
    ]
    cpu_steps = {n: [r[0]["cpu"] for r in recs] for n, recs in train.items()}
    train_paired_cpu = [c / l for c, l in zip(cpu_steps["codyra"], cpu_steps["lora"], strict=True)]
    for n, s in train_stats.items():
        s["cpu_steps_s"] = cpu_steps[n]
        s["cpu_utilisation"] = sum(cpu_steps[n]) / sum(s["steps_s"])  # ~threads when the cores were ours
    codyra = trainers["codyra"]
    active_after_training = sum(a.active_rank() for a in codyra.method.adapters.values())
    final_kappa = codyra.method.kappa
    log(f"train codyra/lora: paired median {median(train_paired):.3f}, ratio of medians {train_ratio:.3f}")

    profiles = {}
    if args.profile:
        for n, t in trainers.items():
            profiles[n] = profile_step(t, images, tokens, rows=15)
    # what the overhead timing (after finish) needs of the LoRA variant: its optimizer and method
    lora_parts = (trainers["lora"].optimizer, trainers["lora"].method)
    del trainers["lora"]

    # 3 (first half). sizes: unpruned update from a copy, then prune half and finish
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="codyra-bench-") as tmp:
        tmp = Path(tmp)
        unpruned = copy.deepcopy({"model": codyra.model, "method": codyra.method})  # one deepcopy keeps sharing
        update, summary = unpruned["method"].finish(unpruned["model"])
        save_update(tmp / "unpruned", update, summary)
        sizes["update_unpruned_bytes"] = file_size(tmp / "unpruned" / UPDATE_FILE)
        sizes["update_unpruned_active_rank_total"] = summary["active_rank_total"]
        sizes["update_unpruned_stored_params"] = summary["stored_params"]
        del unpruned, update

        pruned = prune_half(codyra.method)
        unmerged = copy.deepcopy(codyra.model).eval()  # pruned, adapters attached: reference only
        update, summary = codyra.method.finish(codyra.model)
        merged = codyra.model.eval()
        if has_adapters(merged):
            raise RuntimeError("finish() left adapter modules in the model")
        save_update(tmp / "pruned", update, summary)
        sizes["update_pruned_bytes"] = file_size(tmp / "pruned" / UPDATE_FILE)
        sizes["update_pruned_active_rank_total"] = summary["active_rank_total"]
        sizes["update_pruned_stored_params"] = summary["stored_params"]
        sizes["gates_pruned_by_hand"] = pruned

        state = {k: v.detach().contiguous() for k, v in base.state_dict().items()}
        save_file(state, str(tmp / "model.safetensors"))
        sizes["full_checkpoint_bytes"] = file_size(tmp / "model.safetensors")
        sizes["full_checkpoint_params"] = sum(v.numel() for v in state.values())
        del state
    sizes["ratio_pruned_vs_full"] = sizes["update_pruned_bytes"] / sizes["full_checkpoint_bytes"]
    sizes["ratio_unpruned_vs_full"] = sizes["update_unpruned_bytes"] / sizes["full_checkpoint_bytes"]
    log("sizes measured")

    # 2. inference, interleaved
    models = {"base": base, "merged": merged, "unmerged": unmerged}
    outputs = {}

    def run_infer(n, m):
        seconds, img, txt = infer(m, images, tokens)
        outputs[n] = (img, txt)
        return seconds

    log(f"inference: {args.infer_warmup} warm-up + {args.infer_steps} timed passes per variant, interleaved")
    inf = interleaved(models, run_infer, args.infer_warmup, args.infer_steps)
    infer_stats = {
        n: {
            "median_s": median([r[0] for r in recs]),
            "min_s": min(r[0] for r in recs),
            "passes_s": [r[0] for r in recs],
        }
        for n, recs in inf.items()
    }
    infer_ratio = infer_stats["merged"]["median_s"] / infer_stats["base"]["median_s"]
    unmerged_ratio = infer_stats["unmerged"]["median_s"] / infer_stats["base"]["median_s"]
    merged_paired = paired_ratios(inf, "merged", "base")
    unmerged_paired = paired_ratios(inf, "unmerged", "base")
    merge_err = max(float((a - b).abs().max()) for a, b in zip(outputs["merged"], outputs["unmerged"], strict=True))
    moved = max(float((a - b).abs().max()) for a, b in zip(outputs["merged"], outputs["base"], strict=True))
    # CoDyRA-specific work, timed alone and repeated (robust to machine load): the AdamW step
    # (CoDyRA has 144 more, tiny, parameters: the gates) and the proximal step. After finish
    # the adapters are detached from the model but keep their grads, so nothing measured
    # above is affected.
    log("overheads: AdamW step and proximal step, timed alone")
    overheads = measure_overheads({"lora": lora_parts, "codyra": (codyra.optimizer, codyra.method)}, args)
    del lora_parts

    rss = None
    if not args.no_rss:
        del merged, unmerged, outputs, base, codyra, trainers
        log("peak RSS: one subprocess per variant")
        rss = measure_rss(args)

    result = {
        "benchmark": "adapter_speed",
        "codyra_version": codyra_version,
        "model": MODEL,
        "pretrained": None,
        "device": "cpu",
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "open_clip": open_clip.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "adapted_matrices": n_targets,
        "train": {
            **train_stats,
            "ratio_codyra_vs_lora": train_ratio,
            "ratio_codyra_vs_lora_of_min": train_stats["codyra"]["min_s"] / train_stats["lora"]["min_s"],
            "paired_ratios": train_paired,
            "paired_ratio_median": median(train_paired),
            "paired_ratio_cpu_time_median": median(train_paired_cpu),
            "target": TRAIN_TARGET,
            "meets_target": median(train_paired) <= TRAIN_TARGET,
            "codyra_final_kappa": final_kappa,
            "codyra_active_rank_after_training": active_after_training,
            "rank_total": args.rank * n_targets,
        },
        "inference": {
            **infer_stats,
            "ratio_merged_vs_base": infer_ratio,
            "ratio_merged_vs_base_of_min": infer_stats["merged"]["min_s"] / infer_stats["base"]["min_s"],
            "paired_ratios_merged": merged_paired,
            "paired_ratio_merged_median": median(merged_paired),
            "ratio_unmerged_vs_base": unmerged_ratio,
            "paired_ratio_unmerged_median": median(unmerged_paired),
            "target": INFER_TARGET,
            "meets_target_within_2pct": abs(median(merged_paired) - INFER_TARGET) <= 0.02,
            "max_abs_diff_merged_vs_unmerged": merge_err,
            "max_abs_diff_merged_vs_base": moved,
        },
        "size": sizes,
        "overheads_ms": overheads,
        "peak_rss_mib": rss,
        "loadavg_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "wall_s": time.perf_counter() - started,
    }
    write_json(args.out, result)
    print_table(result)
    for n, table in profiles.items():
        print(f"\ntorch.profiler, one {n} train step (sorted by self CPU time):\n{table}")
    print(f"\nwrote {args.out}")
    return result


def print_table(r):
    tr, inf, sz, rss = r["train"], r["inference"], r["size"], r["peak_rss_mib"]
    cfg = r["config"]
    print(
        f"\n{r['model']} (random weights), CPU, {r['threads']} threads, batch {cfg['batch']}, rank {cfg['rank']} x "
        f"{r['adapted_matrices']} matrices, torch {r['torch']}, load average {r['loadavg_1min']['start']:.2f} -> "
        f"{r['loadavg_1min']['end']:.2f}"
    )

    print(
        f"\n1. train step: fwd image+text, CLIP loss, bwd, AdamW, after_step ({cfg['warmup']} warm-up + "
        f"{cfg['steps']} timed, interleaved)"
    )
    print(
        f"   {'variant':<8} {'median s':>9} {'min s':>7} {'fwd s':>7} {'bwd s':>7} {'AdamW ms':>9} {'prox ms':>8} "
        f"{'peak RSS MiB':>13}"
    )
    for n in ("lora", "codyra"):
        s, ph = tr[n], tr[n]["phases_median_s"]
        print(
            f"   {n:<8} {s['median_s']:9.3f} {s['min_s']:7.3f} {ph['forward']:7.3f} {ph['backward']:7.3f} "
            f"{ph['optimizer'] * 1e3:9.1f} {ph['after_step'] * 1e3:8.2f} {fmt(rss and rss[n], '13.0f')}"
        )
    verdict = "OK" if tr["meets_target"] else "ABOVE TARGET"
    print(
        f"   codyra / lora: paired median {tr['paired_ratio_median']:.3f}x, "
        f"of medians {tr['ratio_codyra_vs_lora']:.3f}x, "
        f"of minima {tr['ratio_codyra_vs_lora_of_min']:.3f}x  (target <= {tr['target']:.2f}x: {verdict})"
    )
    print(
        f"   process CPU time: paired median {tr['paired_ratio_cpu_time_median']:.3f}x; CPU utilisation "
        f"lora {tr['lora']['cpu_utilisation']:.2f} / codyra {tr['codyra']['cpu_utilisation']:.2f} cores"
        + (
            " (well below --threads: the cores were shared)"
            if min(tr[n]["cpu_utilisation"] for n in ("lora", "codyra")) < 0.9 * r["threads"]
            else ""
        )
    )
    ov = r["overheads_ms"]
    print(
        f"   timed alone (min of 20, ms): AdamW step lora {ov['lora']['adamw_step']:.1f} / codyra "
        f"{ov['codyra']['adamw_step']:.1f} "
        f"({ov['lora']['optimizer_tensors']} / {ov['codyra']['optimizer_tensors']} tensors; "
        f"fused=True: {ov['lora']['adamw_fused_step']:.1f} / {ov['codyra']['adamw_fused_step']:.1f}); "
        f"proximal step {ov['codyra']['after_step']:.2f}"
    )
    print(
        f"   CoDyRA sparse phase: kappa {tr['codyra_final_kappa']:.2e} at the last step, active rank "
        f"{tr['codyra_active_rank_after_training']}/{tr['rank_total']}"
        + (f"; model alone (no step) peak RSS {rss['model']:.0f} MiB" if rss else "")
    )

    print(
        f"\n2. inference: encode_image + encode_text, inference_mode ({cfg['infer_warmup']} warm-up + "
        f"{cfg['infer_steps']} timed, interleaved)"
    )
    print(f"   {'model':<28} {'median s':>9} {'min s':>7} {'paired vs base':>15}")
    print(f"   {'base':<28} {inf['base']['median_s']:9.3f} {inf['base']['min_s']:7.3f} {1.0:15.3f}")
    print(
        f"   {'merged CoDyRA (finish)':<28} {inf['merged']['median_s']:9.3f} {inf['merged']['min_s']:7.3f} "
        f"{inf['paired_ratio_merged_median']:15.3f}"
    )
    print(
        f"   {'unmerged (adapters attached)':<28} {inf['unmerged']['median_s']:9.3f} {inf['unmerged']['min_s']:7.3f} "
        f"{inf['paired_ratio_unmerged_median']:15.3f}"
    )
    verdict = "OK" if inf["meets_target_within_2pct"] else "OFF TARGET"
    print(
        f"   merged / base: paired median {inf['paired_ratio_merged_median']:.3f}x, of medians "
        f"{inf['ratio_merged_vs_base']:.3f}x, of minima {inf['ratio_merged_vs_base_of_min']:.3f}x  "
        f"(target {inf['target']:.2f}x +- 2%: {verdict})"
    )
    print(
        f"   outputs: merged vs unmerged max |diff| {inf['max_abs_diff_merged_vs_unmerged']:.1e}; "
        f"merged vs base {inf['max_abs_diff_merged_vs_base']:.1e} (the update is non-trivial)"
    )

    print("\n3. size on disk (fp32)")
    print(f"   {'file':<44} {'bytes':>11} {'MiB':>8} {'vs full':>8}")
    full = sz["full_checkpoint_bytes"]
    rows = [
        (f"CoDyRA update, half pruned (rank {sz['update_pruned_active_rank_total']})", sz["update_pruned_bytes"]),
        (f"CoDyRA update, as trained (rank {sz['update_unpruned_active_rank_total']})", sz["update_unpruned_bytes"]),
        ("full checkpoint (state dict)", full),
    ]
    for label, b in rows:
        print(f"   {label:<44} {b:11d} {b / 2**20:8.1f} {b / full:8.4f}")


if __name__ == "__main__":
    main()
