"""The GPU figures of a paper-scale grid, measured in one process on one GPU with random weights
(nothing is downloaded), for the docs and the cost model (scripts/estimate-cost.py).

Sections (``--sections``, default all of them, in this order):

- ``device``: the GPU, its datasheet peaks, and the rate of one large bf16 and fp32 matrix product.
- ``startup``: the seconds a fresh process takes to import what a job imports.
- ``clip_train``: the ViT-B/16 train step (image and class-prompt towers, CLIP's cross-entropy,
  backward, fused AdamW, ``after_step``, ``step_metrics``) of LoRA and CoDyRA, rank 16 on all 144
  matrices, in each of ``--clip-precisions`` as training runs them (fp32: the released code's
  arithmetic; tf32 and bf16: the fused adapter forward, ``codyra.adapters.attach.fuse_adapters``), and
  in bf16 with the forward and loss compiled (``train.compile``) and, on a GPU, compiled in mode
  reduce-overhead (``train.compile_mode``: its graphs replayed as CUDA graphs), unless
  ``--no-clip-compile``;
  CoDyRA's dense and sparse phases apart. Blocks of
  ``--block`` steps alternate between the two (order flipped every repetition); reported: each
  variant's median step, the paired CoDyRA/LoRA ratios (median, quartiles, range), the model
  FLOP utilisation (FLOPs counted by ``torch.utils.flop_counter`` / step time / the datasheet peak
  of the precision), the seconds of each variant's first ``--warmup`` steps (its compilation and
  CUDA graph recording, where asked: the cost model's compile time) and, on a GPU, the memory both
  variants' weights take at rest and the most their steps reserve (the cost model's activation memory
  of a compiled step: a CUDA graph's replay allocates nothing, its memory pool stays reserved).
- ``clip_eval``: a Food-101 folder of Food-sized noise JPEGs (``--eval-distinct`` files listed
  until the test split holds ``--eval-images``, Food's 25,250 by default). Per loader worker: the
  images/s one worker delivers from the JPEGs (decode, resize, crop, normalise) and from the
  evaluation cache (``codyra.data.eval_cache``: one reader thread). Per cell (``codyra.clip.evaluate.accuracy``,
  ``--workers`` loader workers, batch 256, bf16): the JPEG path and the cached path against the
  bare ``encode_image`` on batches already on the GPU, with the bare forward's MFU.
- ``llm_train``: a LLaMA-2-7B-shaped model (bf16 replica) with LoRA and with CoDyRA, rank 16 on
  q, k, v, o, gate, up, down of all 32 layers, each trained through
  ``codyra.llm.deepspeed_backend.ZeroBackend`` (DeepSpeed ZeRO-2, one rank): TRACE's micro-batch of
  one ``--lm-seq``-token sequence (answer loss on its last quarter); tokens/s, paired ratios,
  peak memory and MFU.
- ``generate``: ``codyra.llm.generation.generate_answers`` on the same shape (bf16): greedy answers
  of ``--gen-new-tokens`` tokens to the mini TRACE's test prompts in batches of ``--gen-batch-tokens``
  tokens (a row's path, ``eval.batch_tokens``) against ``--gen-batch`` prompts per call and one at a
  time; generated tokens/s, the generation counters, and the share of greedy answers the budgeted
  batches and the fixed ones agree on (bf16: another batch composition can move a near-tie). Then a
  row's theta_i: 8 tasks' rank-16 updates on every matrix merged into the model on the GPU
  (``codyra.store.model_states.merge_as``: fp32 sums, rounded to bf16 once), in seconds.

Every section writes its figures to ``--out`` as soon as it ends, so a failure or a timeout keeps
what came before; a failed section records its error. With ``--update``, the sections already in
``--out`` that this run does not measure are kept (each section says when it was measured): one
section rerun after a change, the others as they were. ``--smoke`` runs tiny models and sizes on
any device, to check the script (its figures mean nothing).

    python benchmarks/gpu_costs.py                               # about 7 minutes on an H200
    python benchmarks/gpu_costs.py --sections clip_train,clip_eval
    python benchmarks/gpu_costs.py --sections clip_eval --update --out docs/results/gpu/RECORD.json
    python benchmarks/gpu_costs.py --smoke --device cpu
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import write_record  # a sibling script

SECTIONS = ("device", "startup", "clip_train", "clip_eval", "llm_train", "generate")
# what a job process imports before its first step (the config and tracking layers aside)
JOB_IMPORTS = "import torch, open_clip, transformers, codyra.clip.model, codyra.methods.codyra, codyra.training.loop"
ADAPTER = {"rank": 16, "alpha": 16, "placement": "all"}
CODYRA = {"kappa_max": 0.005, "dense_ratio": 0.5}
TOTAL, PHASE_STEP = 1000, {"dense": 1, "sparse": 750}  # CoDyRA's step index in each phase of a task
# Dense (no sparsity) tensor-core and plain fp32 peaks from NVIDIA's datasheets, FLOP/s, by the
# name torch reports. H200 SXM: the H100 SXM's compute with more memory.
DATASHEET_PEAKS = {
    "H100 80GB HBM3": {"bf16": 989.4e12, "fp32": 66.9e12, "tf32": 494.7e12},
    "H100 PCIe": {"bf16": 756.5e12, "fp32": 51.2e12, "tf32": 378.0e12},
    "H100 NVL": {"bf16": 835.5e12, "fp32": 60.0e12, "tf32": 417.5e12},
    "H200": {"bf16": 989.4e12, "fp32": 66.9e12, "tf32": 494.7e12},
}
LLAMA2_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32}
LLAMA_TINY = {"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 4}


def peaks(device: torch.device) -> dict | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((p for key, p in DATASHEET_PEAKS.items() if key in name), None)


def mfu(flops: float, seconds: float, device: torch.device, precision: str) -> float | None:
    """Model FLOP utilisation against the datasheet peak of ``precision`` (tf32: its tensor-core peak)."""
    peak = peaks(device)
    return None if peak is None else flops / seconds / peak[precision if precision in peak else "fp32"]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, fn) -> float:
    sync(device)
    began = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - began


def quartiles(values: list[float]) -> dict:
    if len(values) < 2:
        return {"median": values[0], "q1": values[0], "q3": values[0], "min": values[0], "max": values[0]}
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": q2, "q1": q1, "q3": q3, "min": min(values), "max": max(values)}


def counted_flops(fn) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


def paired(variants: dict, block: int, reps: int, device: torch.device) -> dict:
    """Blocks of ``block`` steps of each variant, order flipped every repetition: per-step seconds
    of each and the paired ratios codyra / lora."""
    seconds = {name: [] for name in variants}
    ratios = []
    for rep in range(reps):
        order = list(variants) if rep % 2 == 0 else list(reversed(variants))
        step = {name: timed(device, lambda v=variants[name]: [v() for _ in range(block)]) / block for name in order}
        for name, s in step.items():
            seconds[name].append(s)
        ratios.append(step["codyra"] / step["lora"])
    return {
        "step_s_median": {name: statistics.median(s) for name, s in seconds.items()},
        "step_s": seconds,
        "paired_ratio": quartiles(ratios),
    }


# --- device


def section_device(args, device: torch.device) -> dict:
    out = {"torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        out |= {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": props.total_memory / 2**30,
            "multiprocessors": props.multi_processor_count,
            "cuda": torch.version.cuda,
            "datasheet_peak_flops": peaks(device),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        }
    n, reps = (512, 3) if args.smoke else (8192, 10)
    rates = {}
    for dtype in (torch.bfloat16, torch.float32):
        a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
        a @ b
        seconds = timed(device, lambda a=a, b=b: [a @ b for _ in range(reps)]) / reps
        rates[str(dtype).removeprefix("torch.")] = 2 * n**3 / seconds
    out["matmul_flops_per_s"] = rates
    out["matmul_size"] = n
    print(f"device: {out.get('name', device)}; {n}^3 matmul bf16 {rates['bfloat16'] / 1e12:.0f} TFLOP/s", flush=True)
    return out


# --- job start-up


def section_startup(args, device: torch.device) -> dict:
    """Seconds a fresh Python process spends importing what a job imports (median of 3): a floor
    of a job's start-up, Snakemake's own start aside."""
    import subprocess

    seconds = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", JOB_IMPORTS], check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        seconds.append(time.perf_counter() - began)
    print(f"startup: imports {statistics.median(seconds):.1f} s", flush=True)
    return {"imports": JOB_IMPORTS, "seconds": seconds, "median_s": statistics.median(seconds)}


# --- CLIP


class ClipVariant:
    """One adapted copy of the model, stepped as the training loop steps a CLIP task."""

    def __init__(self, kind: str, base, tokens, batch, precision: str, device: torch.device):
        import torch.nn.functional as F

        from codyra.adapters.attach import fuse_adapters
        from codyra.clip.family import CLIP
        from codyra.device import autocast, fuses_adapters
        from codyra.methods import build_method
        from codyra.methods.base import standalone_context
        from codyra.steps.backends import build_optimizer
        from codyra.training.step_log import StepLog

        self.model = copy.deepcopy(base).to(device).train()
        self.device, self.precision = device, precision
        spec = {"kind": kind, **ADAPTER, **(CODYRA if kind == "codyra" else {})}
        self.method = build_method(spec)
        groups = self.method.setup(standalone_context(self.model, CLIP, torch.Generator().manual_seed(0), 0.0))
        fuse_adapters(self.model, fuses_adapters(device, precision))  # as the training loop runs it
        hp = {"optimizer": "adamw", "lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-8}
        self.optimizer = build_optimizer(groups, hp)
        self.step_index = 0
        self.log = StepLog(deque(maxlen=1), lambda record: None)  # the loop's step records, read a step late
        self.graphed = False  # True: ``loss`` compiled in mode reduce-overhead, its graphs replayed step by step
        images, labels = batch
        self.inputs = (images, labels, tokens)  # what a graph replay copies into its own buffers

        def loss():
            with autocast(device, precision):
                image = self.model.encode_image(images)
                text = self.model.encode_text(tokens)
            image, text = F.normalize(image.float(), dim=-1), F.normalize(text.float(), dim=-1)
            return F.cross_entropy(self.model.logit_scale.exp() * image @ text.T, labels)

        self.loss = self.eager_loss = loss

    def forward_backward(self, loss=None) -> torch.Tensor:
        """One forward and backward of ``loss`` (default: the variant's own, compiled where asked);
        returns the loss."""
        from codyra.device import precision_scope

        with precision_scope(self.device, self.precision):  # tf32: the backward pass too
            value = (loss or self.loss)()
            value.backward()
        return value

    def __call__(self) -> None:
        if self.graphed:  # as the training loop marks each step (train.compile_mode: reduce-overhead)
            torch.compiler.cudagraph_mark_step_begin()
        loss = self.forward_backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_index += 1
        self.method.after_step(self.step_index, TOTAL)
        self.log.add({"step": self.step_index, "loss": loss, **self.method.step_metrics()})


def graph(variant: ClipVariant, cuda_graphs: bool) -> None:
    """Compile ``variant``'s forward and loss as ``train.compile`` does, in mode reduce-overhead
    (``train.compile_mode``: the compiled forward and backward replayed as CUDA graphs) where
    ``cuda_graphs``."""
    variant.loss = torch.compile(variant.loss, mode="reduce-overhead" if cuda_graphs else "default")
    variant.graphed = cuda_graphs


def clip_model(args):
    import open_clip

    import codyra.clip.model  # noqa: F401 - registers codyra-mini

    torch.manual_seed(args.seed)
    model = open_clip.create_model(args.clip_model, pretrained=None)
    size = model.visual.image_size
    return model, open_clip.get_tokenizer(args.clip_model), size[0] if isinstance(size, tuple) else size


def section_clip_train(args, device: torch.device) -> dict:
    base, tokenizer, size = clip_model(args)
    tokens = tokenizer([f"a photo of a class {k}." for k in range(args.clip_classes)]).to(device)
    generator = torch.Generator().manual_seed(args.seed)
    batch = (
        torch.randn(args.clip_batch, 3, size, size, generator=generator).to(device),
        torch.randint(0, args.clip_classes, (args.clip_batch,), generator=generator).to(device),
    )
    out = {"model": args.clip_model, "batch": args.clip_batch, "classes": args.clip_classes, "adapter": ADAPTER}
    compiled = [("bf16_compiled", "bf16")] + ([("bf16_graphed", "bf16")] if device.type == "cuda" else [])
    runs = [(p, p) for p in args.clip_precisions.split(",")] + (compiled if args.clip_compile else [])
    for label, precision in runs:
        variants = {kind: ClipVariant(kind, base, tokens, batch, precision, device) for kind in ("lora", "codyra")}
        if label.endswith(("_compiled", "_graphed")):
            for variant in variants.values():
                graph(variant, label.endswith("_graphed"))
        lora = variants["lora"]
        # counted on the eager step: a compiled one runs the same products, and its replays pass no operator
        # by the counter
        flops = counted_flops(lambda v=lora: v.forward_backward(v.eager_loss))
        lora.optimizer.zero_grad(set_to_none=True)
        resident = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
        phases, warmup = {}, {}
        for phase, start in PHASE_STEP.items():
            variants["codyra"].step_index = start - 1  # CoDyRA's threshold depends on the step index alone
            for kind, variant in variants.items():
                # the first phase's warm-up holds each variant's compilation and CUDA graph recording
                seconds = timed(device, lambda v=variant: [v() for _ in range(args.warmup)])
                warmup.setdefault(kind, seconds)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            result = paired(variants, args.block, args.reps, device)
            if device.type == "cuda":  # reserved: a replay allocates nothing, its graphs' pool stays reserved
                result["peak_reserved_gib_both_variants"] = torch.cuda.max_memory_reserved(device) / 2**30
            result["codyra_kappa"] = variants["codyra"].method.kappa
            result["lora_mfu"] = mfu(flops, result["step_s_median"]["lora"], device, precision)
            result["lora_images_per_s"] = args.clip_batch / result["step_s_median"]["lora"]
            phases[phase] = result
            q = result["paired_ratio"]
            print(
                f"clip_train {label} {phase}: LoRA {result['step_s_median']['lora'] * 1e3:.1f} ms, CoDyRA/LoRA "
                f"x{q['median']:.3f} (IQR {q['q1']:.3f}-{q['q3']:.3f}), MFU {result['lora_mfu']}",
                flush=True,
            )
        out[label] = {"lora_step_flops": flops, "phases": phases, "warmup": {"steps": args.warmup, "seconds": warmup}}
        if resident is not None:
            out[label]["resident_gib_both_variants"] = resident / 2**30
        del variants
        if device.type == "cuda":
            torch.cuda.empty_cache()
    dense = {label: out[label]["phases"]["dense"]["step_s_median"]["lora"] for label, _ in runs}
    out["speedup_over_fp32_lora"] = {label: dense["fp32"] / seconds for label, seconds in dense.items()}
    out["bf16_speedup_lora"] = out["speedup_over_fp32_lora"]["bf16"]
    out["worst_median_ratio"] = max(
        out[label]["phases"][ph]["paired_ratio"]["median"] for label, _ in runs for ph in PHASE_STEP
    )
    return out


def write_food(root: Path, distinct: int, listed: int, size=(512, 384)) -> None:
    """A Food-101 folder as torchvision reads it: ``distinct`` noise JPEGs of Food's size over its
    first three classes, the test split listing them in turn until it holds ``listed`` images."""
    from concurrent.futures import ProcessPoolExecutor

    classes = ("apple_pie", "baby_back_ribs", "baklava")
    ids = [f"{classes[k % 3]}/{k}" for k in range(distinct)]
    with ProcessPoolExecutor() as pool:
        list(pool.map(_write_jpeg, [(root / "food-101" / "images" / f"{i}.jpg", size, k) for k, i in enumerate(ids)]))
    test = {name: [] for name in classes}
    for k in range(listed):
        image_id = ids[k % distinct]
        test[image_id.split("/")[0]].append(image_id)
    meta = root / "food-101" / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "test.json").write_text(json.dumps(test))
    (meta / "train.json").write_text(json.dumps({name: [ids[k]] for k, name in enumerate(classes)}))


def _write_jpeg(item) -> None:
    import numpy as np
    from PIL import Image

    path, (width, height), seed = item
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, "JPEG", quality=90)


def worker_rate(dataset, batch_size: int, limit: int) -> float:
    """Images/s one DataLoader worker delivers from the JPEGs, after its first batch (start-up excluded)."""
    from torch.utils.data import DataLoader, Subset

    loader = iter(DataLoader(Subset(dataset, range(min(limit, len(dataset)))), batch_size=batch_size, num_workers=1))
    next(loader)
    count, began = 0, time.perf_counter()
    for images, _ in loader:
        count += len(images)
    if not count:  # one batch: its time would be the worker's start-up
        raise ValueError(f"{len(dataset)} images are one batch of {batch_size}: too few to time a worker")
    return count / (time.perf_counter() - began)


def reader_rate(cached, batch_size: int) -> float:
    """Images/s one thread reads from an evaluation cache (``CachedEvalSet.read``: the copy out of
    the memory map and the checksums), as each of a cell's reader threads does."""
    positions = list(range(len(cached)))
    began = time.perf_counter()
    for start in range(0, len(positions), batch_size):
        cached.read(positions[start : start + batch_size])
    return len(positions) / (time.perf_counter() - began)


def section_clip_eval(args, device: torch.device) -> dict:
    from codyra.clip.evaluate import accuracy
    from codyra.clip.model import ClipBundle
    from codyra.data.eval_cache import CachedEvalSet, build_eval_cache
    from codyra.data.registry import build_task
    from codyra.data.tasks import ImageConfig
    from codyra.device import autocast

    model, tokenizer, size = clip_model(args)
    model = model.to(device).eval()
    image = ImageConfig(size, (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
    bundle = ClipBundle(model, tokenizer, image)
    batch_size = args.eval_batch
    cfg = {
        "eval": {"batch_size": batch_size, "precision": "auto"},
        "data": {"label_space": "task", "num_workers": args.workers},
    }
    out = {"model": args.clip_model, "images": args.eval_images, "distinct_jpegs": args.eval_distinct}
    with tempfile.TemporaryDirectory() as scratch:
        root, cache = Path(scratch) / "data", Path(scratch) / "cache"
        began = time.perf_counter()
        write_food(root, args.eval_distinct, args.eval_images)
        out["write_jpegs_s"] = time.perf_counter() - began
        plain = build_task("Food", "mtil", root, image)
        cached = build_task("Food", "mtil", root, image, eval_cache=cache)
        view = plain.test_set()
        began = time.perf_counter()
        build_eval_cache(view.samples, view.transform, cache, workers=args.workers)
        out["cache_build_images_per_s"] = len(view) / (time.perf_counter() - began)
        out["cache_gib"] = (cache / "images.npy").stat().st_size / 2**30
        cached_set = cached.test_set()
        assert isinstance(cached_set, CachedEvalSet)
        out["worker_images_per_s"] = {
            "jpeg": worker_rate(view, batch_size, limit=args.jpeg_worker_images),
            "cache": reader_rate(cached_set, batch_size),
        }
        out["worker_speedup"] = out["worker_images_per_s"]["cache"] / out["worker_images_per_s"]["jpeg"]
        print(f"clip_eval per worker: {out['worker_images_per_s']} (x{out['worker_speedup']:.1f})", flush=True)

        resident = torch.stack([view[k][0] for k in range(batch_size)]).to(device)
        with torch.no_grad(), autocast(device, "auto"):
            model.encode_image(resident)
            image_flops = counted_flops(lambda: model.encode_image(resident)) / batch_size
        batches = -(-len(view) // batch_size)

        @torch.no_grad()
        def bare():
            with autocast(device, "auto"):
                for _ in range(batches):
                    model.encode_image(resident)

        passes = {
            "bare": bare,
            "cell_cache": lambda: accuracy(bundle, cached, [cached], cfg, device),
            "cell_jpeg": lambda: accuracy(bundle, plain, [plain], cfg, device),
        }
        seconds = {name: [] for name in passes}
        for rep in range(args.eval_repeats):
            for name in passes if rep % 2 == 0 else reversed(passes):
                if name == "cell_jpeg" and rep >= args.jpeg_repeats:
                    continue  # the slow path: fewer passes
                seconds[name].append(timed(device, passes[name]))
        n = batches * batch_size
        rates = {name: (n if name == "bare" else len(view)) / statistics.median(s) for name, s in seconds.items() if s}
        out |= {
            "seconds": seconds,
            "images_per_s": rates,
            "cell_over_bare": {name: rates[name] / rates["bare"] for name in ("cell_cache", "cell_jpeg")},
            "encode_image_flops": image_flops,
            "bare_mfu": mfu(image_flops * rates["bare"], 1.0, device, "bf16"),
            "workers": args.workers,
            "batch_size": batch_size,
        }
    print(f"clip_eval images/s {rates}; cell/bare {out['cell_over_bare']}", flush=True)
    return out


# --- causal LM


def llama(args, vocab: int, dtype: torch.dtype, device: torch.device, special: dict | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = LLAMA_TINY if args.smoke else LLAMA2_7B
    config = LlamaConfig(**shape, num_key_value_heads=shape["num_attention_heads"], vocab_size=vocab, **(special or {}))
    torch.manual_seed(args.seed)
    with torch.device(device):  # built and initialised on the device: no 27 GB fp32 copy on the host
        model = LlamaForCausalLM._from_config(config, dtype=dtype)
    return model, shape


def section_llm_train(args, device: torch.device) -> dict:
    from codyra.llm.deepspeed_backend import ZeroBackend, init_distributed
    from codyra.llm.family import CAUSAL_LM
    from codyra.llm.loss import answer_loss_sum, position_ids
    from codyra.methods import build_method
    from codyra.methods.base import standalone_context
    from codyra.trace.data import IGNORE_INDEX

    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", "29517")
    init_distributed()
    vocab = 32000
    precision = "fp32" if device.type == "cpu" else "bf16"
    base, shape = llama(args, vocab, torch.float32 if precision == "fp32" else torch.bfloat16, device)
    generator = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(3, vocab, (1, args.lm_seq), generator=generator).to(device)
    labels = ids.clone()
    labels[:, : 3 * args.lm_seq // 4] = IGNORE_INDEX  # the prompt carries no loss
    mask = torch.ones_like(ids)
    inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask)}
    hp = {"optimizer": "adamw", "lr": 1e-4, "betas": (0.9, 0.95), "eps": 1e-8, "precision": precision}
    hp |= {"batch_size": 1, "gradient_accumulation": 1}

    def loss_of(logits):
        loss_sum, tokens = answer_loss_sum(logits, labels)
        return loss_sum / tokens

    backends, methods, steps = {}, {}, {}
    flops = None
    for kind in ("lora", "codyra"):
        model = base if kind == "codyra" else copy.deepcopy(base)
        methods[kind] = build_method({"kind": kind, **ADAPTER, **(CODYRA if kind == "codyra" else {})})
        # no copy of theta_0 (13.5 GB): LoRA and CoDyRA never read it in setup
        context = standalone_context(model, CAUSAL_LM, torch.Generator().manual_seed(0), 0.0, TOTAL, keep_theta_0=False)
        groups = methods[kind].setup(context)
        if flops is None:  # LoRA's step, counted in plain autograd before DeepSpeed hooks the parameters
            flops = counted_flops(lambda model=model: loss_of(model(**inputs).logits).backward())
            model.zero_grad(set_to_none=True)
        backends[kind] = ZeroBackend(model, groups, methods[kind], hp, {"gradient_clipping": 1.0}, device)
        steps[kind] = 0
    del base, model

    def stepper(kind):
        def step():
            backend = backends[kind]
            backend.backward(loss_of(backend.forward(**inputs).logits))
            backend.step()
            steps[kind] += 1
            backend.after_step(methods[kind], steps[kind], TOTAL)

        return step

    variants = {kind: stepper(kind) for kind in backends}
    out = {"shape": shape, "vocab": vocab, "sequence_tokens": args.lm_seq, "precision": precision, "adapter": ADAPTER}
    out["step_flops"] = flops
    memory = {}
    if device.type == "cuda":
        sync(device)
        memory["resident_gib_both_models"] = torch.cuda.memory_allocated(device) / 2**30
    phases = {}
    for phase, start in PHASE_STEP.items():
        steps["codyra"] = start - 1
        for kind, fn in variants.items():
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            [fn() for _ in range(args.warmup)]
            if device.type == "cuda":
                memory[f"peak_gib_{kind}_{phase}"] = torch.cuda.max_memory_allocated(device) / 2**30
        result = paired(variants, args.lm_block, args.lm_reps, device)
        result["tokens_per_s"] = {k: args.lm_seq / s for k, s in result["step_s_median"].items()}
        result["lora_mfu"] = mfu(flops, result["step_s_median"]["lora"], device, precision)
        result["codyra_kappa"] = methods["codyra"].kappa
        phases[phase] = result
        q = result["paired_ratio"]
        print(
            f"llm_train {phase}: LoRA {result['tokens_per_s']['lora']:.0f} tok/s, CoDyRA/LoRA x{q['median']:.3f} "
            f"(IQR {q['q1']:.3f}-{q['q3']:.3f}), MFU {result['lora_mfu']}",
            flush=True,
        )
    # peak_gib_<kind>_<phase>: the most allocated during that variant's warm-up steps, with both
    # models resident: one model's training peak is about that minus half the resident memory
    out |= {"phases": phases, "memory": memory}
    out["worst_median_ratio"] = max(p["paired_ratio"]["median"] for p in phases.values())
    for backend in backends.values():
        backend.engine.destroy()
    return out


def section_generate(args, device: torch.device) -> dict:
    from codyra.llm.generation import GenerationStats, generate_answers
    from codyra.mini.trace.tasks import MINI_TRACE_TASKS, generate_task
    from codyra.mini.trace.tokenizer import MINI_TRACE_VOCAB_SIZE, train_bpe_tokenizer
    from codyra.trace.data import LengthLimits

    per_task = -(-args.gen_prompts // len(MINI_TRACE_TASKS))
    sizes = {"train": 1, "eval": 1, "test": per_task}
    examples = [e for t in MINI_TRACE_TASKS for e in generate_task(t, args.seed, sizes)["test"]]
    tokenizer = train_bpe_tokenizer([e.prompt + " " + e.answer for e in examples], MINI_TRACE_VOCAB_SIZE)
    # TRACE-length prompts: each joins --gen-join of the mini's test prompts
    prompts = [" ".join(e.prompt for e in examples[k : k + args.gen_join]) for k in range(args.gen_prompts)]
    special = {
        f"{k}_token_id": tokenizer.convert_tokens_to_ids(getattr(tokenizer, f"{k}_token"))
        for k in ("bos", "eos", "pad")
    }
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    model, shape = llama(args, len(tokenizer), dtype, device, special)
    model.eval().generation_config.min_new_tokens = args.gen_new_tokens  # every prompt: the same token count
    limits = LengthLimits(max_prompt_len=args.gen_prompt_len, max_answer_len=args.gen_new_tokens)
    prompt_tokens = [min(len(tokenizer(p)["input_ids"]), args.gen_prompt_len) for p in prompts]

    answers, counts = {}, {}

    def run(path: str, some: list[str], batch: int, budget: int | None = None) -> float:
        counts[path] = GenerationStats()
        options = {"limits": limits, "max_new_tokens": args.gen_new_tokens, "batch_size": batch, "device": device}
        options |= {"batch_tokens": budget, "stats": counts[path]}
        return timed(device, lambda: answers.__setitem__(path, generate_answers(model, tokenizer, some, **options)))

    run("warm-up", prompts[: args.gen_batch], args.gen_batch)
    single = prompts[: args.gen_single]
    seconds = {
        "budget": run("budget", prompts, args.gen_batch, args.gen_batch_tokens),
        "batched": run("batched", prompts, args.gen_batch),
        "single": run("single", single, 1),
    }
    rates = {
        path: len(some) * args.gen_new_tokens / seconds[path]
        for path, some in (("budget", prompts), ("batched", prompts), ("single", single))
    }
    pairs = list(zip(answers["budget"], answers["batched"], strict=True))
    agree = statistics.mean(a == b for a, b in pairs)
    # how far into an answer the two agree: random weights make near-ties common, so whole answers rarely match
    shared = statistics.mean(len(os.path.commonprefix([a, b])) / max(len(a), len(b), 1) for a, b in pairs)
    print(
        f"generate: {rates} generated tokens/s; budget and fixed batches agree on {agree:.1%} of answers, "
        f"on their first {shared:.1%} on average",
        flush=True,
    )
    out = {
        "shape": shape,
        "vocab": len(tokenizer),
        "prompts": len(prompts),
        "prompt_tokens_mean": statistics.mean(prompt_tokens),
        "new_tokens": args.gen_new_tokens,
        "batch": args.gen_batch,
        "batch_tokens": args.gen_batch_tokens,
        "seconds": seconds,
        "tokens_per_s": rates,
        "speedup": rates["batched"] / rates["single"],
        "budget_speedup": rates["budget"] / rates["batched"],
        "counters": {path: counts[path].as_dict() for path in seconds},
        "greedy_answers_agree_budget_vs_batched": agree,
        "greedy_answers_shared_prefix_budget_vs_batched": shared,
    }
    out["row_build_s"] = row_build_seconds(model, device, args.rank_tasks)
    return out


def row_build_seconds(model, device: torch.device, tasks: int) -> float:
    """Seconds to merge ``tasks`` rank-16 updates on every matrix into ``model`` (fp16, as a checkpoint
    loads) and cast it to bf16: what a row does on its GPU after loading theta_0."""
    from codyra.store.model_states import merge_as
    from codyra.store.updates import TaskUpdate

    model.to(torch.float16)
    generator = torch.Generator().manual_seed(0)

    def update() -> TaskUpdate:
        tensors, targets = {}, {}
        for name, param in model.named_parameters():
            if param.dim() == 2 and "embed" not in name and "lm_head" not in name:
                rows, cols = param.shape
                tensors |= {
                    f"{name}.A": torch.randn(ADAPTER["rank"], cols, generator=generator) * 1e-3,
                    f"{name}.B": torch.randn(rows, ADAPTER["rank"], generator=generator) * 1e-3,
                    f"{name}.w": torch.ones(ADAPTER["rank"]),
                }
                targets[name] = {"param": name, "rows": None}
        return TaskUpdate("lora", tensors, targets)

    updates = [update() for _ in range(tasks)]
    seconds = timed(device, lambda: merge_as(model, updates, torch.bfloat16))
    print(f"row build: {tasks} updates merged in {seconds:.1f} s", flush=True)
    return seconds


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


RUN_FACTS = ("measured", "config", "machine", "torch")  # what a kept section keeps of the run that measured it


def updated(earlier: dict, figures: dict) -> dict:
    """``figures`` of this run with the sections of the ``earlier`` record it did not measure, each kept
    section with its run's facts (its own where it has them, else the earlier record's)."""
    kept = {
        name: {**{fact: earlier[fact] for fact in RUN_FACTS if fact in earlier}, **earlier[name]}
        for name in SECTIONS
        if name in earlier and name not in figures
    }
    return {**kept, **figures}


def earlier_record(path: Path) -> dict:
    """The record ``--update`` adds to, read before any section runs; exits naming the file if it is not one."""
    fix = "name a gpu_costs.py record with --out, or drop --update"
    try:
        record = json.loads(path.read_text())
    except ValueError as err:
        raise SystemExit(f"--update: {path} is not JSON ({err}); {fix}") from None
    if not isinstance(record, dict) or "measured" not in record:
        raise SystemExit(f"--update: {path} is not a gpu_costs.py record (it has no 'measured'); {fix}")
    return record


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, from " + ", ".join(SECTIONS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    parser.add_argument("--clip-model", default="ViT-B-16")
    parser.add_argument("--clip-batch", type=int, default=64, help="train batch (the paper configs': 64)")
    parser.add_argument("--clip-classes", type=int, default=100, help="class prompts the text tower encodes per step")
    parser.add_argument("--clip-precisions", default="fp32,tf32,bf16", help="train.precision values to step in")
    parser.add_argument(
        "--no-clip-compile", dest="clip_compile", action="store_false", help="skip the compiled bf16 steps"
    )
    parser.add_argument("--reps", type=int, default=12, help="paired repetitions per phase and precision")
    parser.add_argument("--block", type=int, default=4, help="steps per variant in a repetition")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--eval-images", type=int, default=25250, help="test images (Food-101's 25,250)")
    parser.add_argument("--eval-distinct", type=int, default=1536, help="distinct JPEG files behind them")
    parser.add_argument("--eval-batch", type=int, default=256, help="eval.batch_size (the paper configs')")
    parser.add_argument("--eval-repeats", type=int, default=3)
    parser.add_argument("--jpeg-repeats", type=int, default=1, help="passes of the JPEG cell (the slow one)")
    parser.add_argument("--jpeg-worker-images", type=int, default=768, help="images of the one-worker JPEG rate")
    parser.add_argument("--workers", type=int, default=8, help="data.num_workers of a cell")
    parser.add_argument("--lm-seq", type=int, default=1024, help="tokens of the one-sequence micro-batch")
    parser.add_argument("--lm-reps", type=int, default=8)
    parser.add_argument("--lm-block", type=int, default=3)
    parser.add_argument("--gen-prompts", type=int, default=256)
    parser.add_argument("--gen-single", type=int, default=8, help="prompts generated one at a time")
    parser.add_argument("--gen-batch", type=int, default=16, help="prompts per call (TRACE's eval.batch_size)")
    parser.add_argument("--gen-batch-tokens", type=int, default=65536, help="TRACE's eval.batch_tokens")
    parser.add_argument("--rank-tasks", type=int, default=8, help="tasks' updates a row merges (TRACE: up to 8)")
    parser.add_argument("--gen-join", type=int, default=4, help="mini prompts joined into one")
    parser.add_argument("--gen-prompt-len", type=int, default=512)
    parser.add_argument("--gen-new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/gpu_costs.json"))
    parser.add_argument("--update", action="store_true", help="keep the sections of --out this run does not measure")
    args = parser.parse_args(argv)
    unknown = set(args.sections.split(",")) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    if args.smoke:
        small = {"clip_model": "codyra-mini", "clip_batch": 8, "clip_classes": 5, "reps": 2, "block": 1, "warmup": 1}
        small |= {"eval_images": 96, "eval_distinct": 12, "eval_batch": 16, "eval_repeats": 2, "workers": 1}
        small |= {"jpeg_worker_images": 48, "lm_seq": 32, "lm_reps": 2, "lm_block": 1, "gen_prompts": 4}
        small |= {"gen_single": 2, "gen_batch": 2, "gen_join": 1, "gen_prompt_len": 64, "gen_new_tokens": 4}
        small |= {"gen_batch_tokens": 256, "rank_tasks": 2}
        for key, value in small.items():
            setattr(args, key, value)
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    load_before = os.getloadavg()[0]
    figures: dict = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    functions = {name: globals()[f"section_{name}"] for name in SECTIONS}
    earlier = earlier_record(args.out) if args.update and args.out.is_file() else None
    record = {}
    for name in args.sections.split(","):
        began = time.perf_counter()
        try:
            figures[name] = functions[name](args, device)
        except Exception as err:  # noqa: BLE001 - a failed section records its error, the others' figures stay
            traceback.print_exc()
            figures[name] = {"error": f"{type(err).__name__}: {err}"}
        figures[name] |= {"section_seconds": time.perf_counter() - began, "measured": now()}
        kept = figures if earlier is None else updated(earlier, figures)
        record = write_record(args.out, kept, load_before, {"torch": torch.__version__})
    print(f"figures -> {args.out}")
    return record


if __name__ == "__main__":
    main()
