"""Kernels launched per CLIP train step, counted on the CPU: a proxy of a GPU step that is bound
by kernel launches, not by FLOPs (on an H200 the ViT-B/16 LoRA step at batch 64 takes far longer
under bf16 than its FLOPs need).

The step is ``benchmarks/gpu_costs.py``'s (``ClipVariant``): open_clip ViT-B/16 with random
weights (nothing is downloaded), image tower on a batch of random images and text tower on
``--classes`` class prompts, CLIP's cross-entropy, backward, fused AdamW, the method's
``after_step`` and ``step_metrics``, and the copies of the step's record to the host
(``codyra.training.step_log``); rank-16 adapters on all 144 matrices, as the paper configs
place them. Each of LoRA and CoDyRA is counted on four paths (``PATHS``): the unfused adapter
forward (what fp32 training runs), the fused one (``codyra.adapters.attach.fuse_adapters``: what
bf16 and tf32 training run on a GPU), the fused one with the forward and loss compiled
(``torch.compile``, as ``train.compile: true`` compiles the training step's forward), and that
one replayed as CUDA graphs (``train.compile_mode: reduce-overhead``).

What is counted: ``torch.profiler`` CPU events of one step after a warm-up step (AdamW's state
exists by then): the ATen operators (``aten::`` events) that compute and call no other operator
that computes, i.e. the lowest computing level of the call tree (``aten::linear`` is counted as
the ``aten::addmm`` it calls), and matrix products (``PRODUCTS``), whose own GEMM is a kernel
whatever they call besides (``aten::addmm`` copying its input into its output: two kernels).
Operators that only make a view, resolve a conjugate bit or
allocate (``NO_KERNEL``) compute nothing: on a GPU they launch nothing, while every operator
counted launches (at least) one kernel there. An operator over a list of tensors
(``MULTI_TENSOR``: fused AdamW, its step counters) is one kernel on a GPU and is counted once,
not the per-tensor loop the CPU runs for it. A kernel that ``torch.compile`` generates is one
event (``torch._inductor.config.cpp.enable_kernel_profile``) and counts as one launch. The count
does not depend on the batch (batch 8 keeps the CPU time small) nor on the CPU. The graphed path
is compiled in mode reduce-overhead, which on the CPU runs the compiled step (CUDA graphs are
CUDA's); it is counted as a GPU replays it: each call of a compiled graph (the forward's, the
backward's) one launch, plus one copy per tensor the graph takes that is not a parameter (a
replay copies those into the graph's own buffers: the batch and the class prompts into the
forward, the loss's gradient into the backward), plus every kernel outside the graphs as above
(AdamW, the method's hooks, and a copy for each gradient that reaches its parameter in another
layout than the parameter's). Reading the last step's record from its host copies (``READ``)
launches nothing on a GPU and is not counted. On the CPU the
step is fp32: ``codyra.device.autocast`` autocasts to bf16 on a GPU only, where autocast adds a
cast kernel per weight matrix and call on either path (one per stacked A and B on the fused one).

    python benchmarks/kernel_count.py                        # about 15 minutes on 2 cores
    python benchmarks/kernel_count.py --paths unfused,fused  # no compilation: about 3 minutes
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_costs import ClipVariant, clip_model, graph  # sibling scripts
from run_record import write_record

from codyra.training.step_log import READ

KINDS = ("lora", "codyra")
PATHS = ("unfused", "fused", "compiled", "graphed")
# operators over lists of tensors (AdamW's step): one multi-tensor kernel on a GPU, a loop over the
# tensors on the CPU; counted once, what they call not at all
MULTI_TENSOR = ("aten::_foreach_", "aten::_fused_")
PRODUCTS = frozenset(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"))
INDUCTOR_KERNEL = "cpp_fused_"  # in the name of a kernel torch.compile generated for the CPU
GRAPH = "## Call CompiledFxGraph"  # the profiler's event for one call of a graph torch.compile made
BACKWARD = "CompiledFunctionBackward"  # above the backward graph's call
# operators that launch no kernel on a GPU: views, metadata, allocation without filling
NO_KERNEL = frozenset(
    "aten::" + name
    for name in (
        "empty",
        "empty_strided",
        "empty_like",
        "new_empty",
        "new_empty_strided",
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "reshape",
        "as_strided",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "slice",
        "select",
        "narrow",
        "unsqueeze",
        "squeeze",
        "flatten",
        "unflatten",
        "alias",
        "detach",
        "detach_",
        "lift_fresh",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
        "to",
        "contiguous",
        "resize_",
        "result_type",
        "view_as",
        "set_",
        "resolve_conj",
        "resolve_neg",
    )
)


def clip_inputs(model_name: str, batch: int, classes: int, seed: int, device: torch.device):
    """(base model, class-prompt tokens, (images, labels)) as gpu_costs.py's train section builds them."""
    base, tokenizer, size = clip_model(argparse.Namespace(seed=seed, clip_model=model_name))
    tokens = tokenizer([f"a photo of a class {k}." for k in range(classes)]).to(device)
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch, 3, size, size, generator=generator).to(device)
    labels = torch.randint(0, classes, (batch,), generator=generator).to(device)
    return base, tokens, (images, labels)


def train_step(
    kind: str,
    path: str,
    base,
    tokens,
    batch,
    precision: str = "fp32",
    device: torch.device | None = None,
) -> ClipVariant:
    """One adapted copy of ``base`` stepped as the training loop steps a CLIP task (call it for a
    step), on one of ``PATHS``: the unfused adapter forward, the fused one, the fused one with
    the forward and loss compiled (``train.compile``; compiled at the first call), or compiled in
    mode reduce-overhead (``train.compile_mode``: CUDA graphs on a GPU, the compiled step on the CPU)."""
    from codyra.adapters.attach import fuse_adapters

    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}; choose one of {', '.join(PATHS)}")
    variant = ClipVariant(kind, base, tokens, batch, precision, device or torch.device("cpu"))
    fuse_adapters(variant.model, path != "unfused")
    if path in ("compiled", "graphed"):
        graph(variant, path == "graphed")
    return variant


def count_kernels(step, graph_inputs: int | None = None) -> Counter:
    """Kernel-launching operators of one call of ``step`` (module docstring), by name.

    ``graph_inputs``: count the launches of the step replayed as CUDA graphs, the tensors a
    forward graph takes besides parameters being that many: a call of a compiled graph is one
    launch (``graph replay``) instead of its kernels, and a replay copies its inputs that are not
    parameters into the graph's own buffers (``graph input copy``): the forward graph's
    ``graph_inputs``, the backward graph's one, the loss's gradient."""
    from torch._inductor import config as inductor
    from torch.profiler import ProfilerActivity, profile

    inductor.cpp.enable_kernel_profile = True  # an event per generated kernel, counted as one launch
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    computes = {}

    def launches(event) -> bool:
        """Whether ``event`` or an operator it calls launches a kernel."""
        if event.id not in computes:
            below = [launches(child) for child in event.cpu_children]  # all of them: each is memoised
            computes[event.id] = any(below) or (event.name.startswith("aten::") and event.name not in NO_KERNEL)
        return computes[event.id]

    def counted(event) -> bool:
        if graph_inputs is not None and _inside(event, GRAPH):  # replayed with its graph
            return False
        if _inside(event, READ):  # the last step's record read from host memory: no launch on a GPU
            return False
        if INDUCTOR_KERNEL in event.name:
            return True
        if not (event.name.startswith("aten::") and launches(event)):
            return False
        if _inside(event, MULTI_TENSOR):  # counted with the multi-tensor operator
            return False
        if event.name.startswith(MULTI_TENSOR) or event.name in PRODUCTS:
            return True
        return not any(launches(c) for c in event.cpu_children)

    kernels = Counter(e.name for e in prof.events() if counted(e))
    if graph_inputs is not None:
        for event in prof.events():
            if event.name.startswith(GRAPH):
                kernels["graph replay"] += 1
                kernels["graph input copy"] += 1 if _inside(event, BACKWARD) else graph_inputs
    return kernels


def _inside(event, prefix) -> bool:
    """Whether an event above ``event`` has a name starting with ``prefix`` (a string or a tuple)."""
    parent = event.cpu_parent
    while parent is not None and not parent.name.startswith(prefix):
        parent = parent.cpu_parent
    return parent is not None


def measure(args) -> dict:
    device = torch.device("cpu")
    base, tokens, batch = clip_inputs(args.model, args.batch, args.classes, args.seed, device)
    counts = {}
    for kind in KINDS:
        for path in args.paths:
            step = train_step(kind, path, base, tokens, batch, "fp32", device)
            step()  # warm-up: AdamW's state (and the compilation)
            ops = count_kernels(step, len(step.inputs) if path == "graphed" else None)
            counts.setdefault(kind, {})[path] = {"total": sum(ops.values()), "ops": dict(ops)}
            print(f"{kind} {path}: {sum(ops.values())} kernels per step", flush=True)
    totals = {kind: {path: counts[kind][path]["total"] for path in args.paths} for kind in KINDS}
    return {
        "model": args.model,
        "batch": args.batch,
        "classes": args.classes,
        "precision": "fp32",
        "kernels_per_step": totals,
        "codyra_over_lora": {path: totals["codyra"][path] / totals["lora"][path] for path in args.paths},
        "counts": counts,
    }


def markdown(record: dict, command: str) -> str:
    totals = record["kernels_per_step"]
    paths = [p for p in PATHS if p in record["codyra_over_lora"]]  # a record's JSON holds them sorted by name
    head = "| method | " + " | ".join(paths) + " | " + " | ".join(f"unfused / {p}" for p in paths[1:]) + " |"
    rows = "\n".join(
        f"| {name} | "
        + " | ".join(str(totals[kind][p]) for p in paths)
        + " | "
        + " | ".join(f"{totals[kind]['unfused'] / totals[kind][p]:.2f}x" for p in paths[1:])
        + " |"
        for kind, name in (("lora", "LoRA"), ("codyra", "CoDyRA"))
    )
    ratios = ", ".join(f"{record['codyra_over_lora'][p]:.3f} {p}" for p in paths)
    products = {p: sum(n for op, n in record["counts"]["lora"][p]["ops"].items() if op in PRODUCTS) for p in paths}
    floor = ", ".join(f"{n} {p}" for p, n in products.items())
    outside = ""
    if "graphed" in paths:
        ops = sorted(record["counts"]["lora"]["graphed"]["ops"].items(), key=lambda item: (-item[1], item[0]))
        outside = "\n\nLoRA's graphed step, launch by launch: " + ", ".join(f"{n} `{op}`" for op, n in ops) + "."
    return f"""# Kernels per CLIP train step

Operators that launch a kernel, per train step of open_clip ViT-B/16 (random weights, batch
{record["batch"]}, {record["classes"]} class prompts, rank 16 on all 144 matrices): forward, backward, fused
AdamW, the method's step hooks and the copies of the step's record (loss, step values) to the
host, which the training loop reads a step later, counted with `torch.profiler` on the CPU in fp32
(`benchmarks/kernel_count.py` states what is counted). **unfused**: the adapter forward fp32
training runs (each adapter its own products, gate multiply and sum). **fused**: the forward bf16
and tf32 training run on a GPU (`codyra.adapters.attach.fuse_adapters`: base and low-rank
products accumulated in one `addmm`, gates folded into B, one product for Q, K and V against the
stacked A's and one batched product against the stacked B's). **compiled**: fused, with the
forward and loss through `torch.compile` (`train.compile: true`; each kernel inductor generates
counted as one). **graphed**: compiled, with the forward and backward graphs replayed as CUDA
graphs (`train.compile_mode: reduce-overhead`), counted as a GPU launches them: one launch per
graph, one copy per tensor a graph takes besides the parameters, and every kernel outside the
graphs (AdamW, the method's hooks, and a copy for each gradient that reaches its parameter in
another layout than the parameter's).

- Machine: {record["machine"]}, {record["cpu_count"]} CPUs; torch {record["torch"]}
- Date: {record["measured"][:10]}
- Command: `{command}`

{head}
|{"---|" * (2 * len(paths))}
{rows}

CoDyRA / LoRA kernels per step: {ratios}.

Matrix products (`aten::mm`, `addmm`, `bmm`, `baddbmm`) launched apart among LoRA's kernels:
{floor}.
Fusing lowers their count only where products share an operand (Q, K and V); the rest, one
product per adapter factor and direction, stays whatever the fusion, so a step launches at least
that many kernels unless its graphs are replayed whole.{outside}

The count does not depend on the batch or the CPU. On a GPU under bf16 autocast each path but the
graphed one adds cast kernels (the fused path one per stacked A and B instead of one per adapter
matrix; the graphed path replays them in its graphs); the step's time there is measured by
`benchmarks/gpu_costs.py`.
"""


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ViT-B-16")
    parser.add_argument("--batch", type=int, default=8, help="images per step (the count does not depend on it)")
    parser.add_argument("--classes", type=int, default=100, help="class prompts the text tower encodes per step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated, from " + ", ".join(PATHS))
    parser.add_argument("--out", type=Path, default=Path("docs/results/kernels/kernel_count.json"))
    parser.add_argument("--page", type=Path, default=Path("docs/results/kernels.md"), help="the Markdown page")
    args = parser.parse_args(argv)
    args.paths = args.paths.split(",")
    if args.paths[0] != "unfused" or not set(args.paths) <= set(PATHS):
        parser.error(f"--paths: 'unfused' first (the reference), then any of {', '.join(PATHS[1:])}")
    load_before = os.getloadavg()[0]
    record = write_record(args.out, measure(args), load_before, {"torch": torch.__version__})
    command = "python benchmarks/kernel_count.py" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    args.page.parent.mkdir(parents=True, exist_ok=True)
    args.page.write_text(markdown(record, command))
    for kind in KINDS:
        print(f"{kind}: " + ", ".join(f"{p} {n}" for p, n in record["kernels_per_step"][kind].items()))
    print(f"CoDyRA/LoRA: {record['codyra_over_lora']}")
    print(f"figures -> {args.out}, page -> {args.page}")
    return record


if __name__ == "__main__":
    main()
