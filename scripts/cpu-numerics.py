#!/usr/bin/env python
"""Fingerprints of this machine's CPU numerics, to compare between machines.

``ops``: a sha256 prefix of the output of every kernel the minis' pretraining and training run
(matrix products of their shapes, the patch convolution, attention, norms, activations, losses,
AdamW steps), on fixed inputs, with 1 and 2 threads. ``pipeline``: the hashes of a tiny mini CLIP
and mini TRACE run end to end (corpus, theta_0, each task's update digest, the cells).
``compare``: the entries two such files disagree on; exit status 1 if any. ``ops`` also hashes the
kernels the platform avoids because they differ between processors (marked "avoided"; compared
with ``--avoided``).

Two runs agree bit for bit only where every entry agrees. To see another processor's numbers on
this one, run under QEMU's user-mode emulator with another CPU model, e.g.
``qemu-x86_64 -cpu Haswell .venv/bin/python scripts/cpu-numerics.py ops`` (an Intel AVX2 CPU)
and ``-cpu EPYC-Rome`` (an AMD one): the vendor and instruction sets differ from the host's,
which is how the platform's CPU pins were chosen (docs: "What the platform guarantees"). Under
the emulator, ``pipeline`` needs ``NPY_DISABLE_CPU_FEATURES=X86_V3`` (numpy's baseline kernels
instead of its AVX2 ones): without it, matplotlib's PDF writer fails inside numpy when a run
saves its heatmap (an IndexError in its palette lookup); with it, the emulated Haswell computed
the host's fingerprints, which ran without it.

Usage:
  python scripts/cpu-numerics.py ops [--out FILE]
  python scripts/cpu-numerics.py pipeline [--out FILE] [--workdir DIR]
  python scripts/cpu-numerics.py compare A.json B.json
  python scripts/cpu-numerics.py report FILE.json ... [--out PAGE.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import codyra  # noqa: F401  (pins the CPU numerics before torch runs)

ROOT = Path(__file__).resolve().parents[1]


def _digest(value) -> str:
    import torch

    def flat(v):
        return [t for item in v for t in flat(item)] if isinstance(v, (tuple, list)) else [v]

    h = hashlib.sha256()
    for t in flat(value):
        h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()[:16]


def _randn(*shape, seed: int):
    import torch

    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _backward(fn, *inputs):
    """Gradients of sum(fn(inputs) * fixed weights) with respect to every input."""
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    (out * _randn(*out.shape, seed=99)).sum().backward()
    return [t.grad for t in leaves]


def _adamw_steps(fused: bool):
    import torch

    p = torch.nn.Parameter(_randn(4096, 64, seed=40))
    opt = torch.optim.AdamW([p], lr=2e-3, betas=(0.9, 0.98), weight_decay=0.1, fused=fused or None)
    for step in range(3):
        p.grad = _randn(4096, 64, seed=41 + step)
        opt.step()
    return p.data


def kernels() -> dict:
    """name -> (function of no arguments giving a tensor or tensors)."""
    import torch
    import torch.nn.functional as F

    out = {}
    # (rows, in, out): the minis' linear layers (BLIP vision width 128, CLIP towers 64, LLaMA 64/172) and logits
    for m, k, n in [
        (2048, 128, 384),
        (2048, 128, 256),
        (4096, 64, 128),
        (256, 64, 64),
        (1536, 64, 172),
        (128, 64, 1024),
        (64, 128, 5),
    ]:
        x, w, b = _randn(m, k, seed=1), _randn(n, k, seed=2), _randn(n, seed=3)
        out[f"linear {m}x{k}x{n}"] = lambda x=x, w=w, b=b: F.linear(x, w, b)
        out[f"linear backward {m}x{k}x{n}"] = lambda x=x, w=w, b=b: _backward(F.linear, x, w, b)
    images, patches = _randn(64, 3, 32, 32, seed=5), _randn(128, 3, 8, 8, seed=6)
    out["conv2d patch 8"] = lambda: _backward(lambda x, w: F.conv2d(x, w, stride=8), images, patches)
    rows = _randn(2048, 128, seed=7)
    out["layer_norm"] = lambda: _backward(lambda x, w: F.layer_norm(x, (128,), w), rows, torch.ones(128))
    out["softmax"] = lambda: _backward(lambda x: torch.softmax(x, -1), rows)
    out["gelu"] = lambda: _backward(F.gelu, rows)
    out["silu"] = lambda: _backward(F.silu, rows)
    out["exp, log"] = lambda: (rows.exp(), rows.abs().add(1).log())
    out["rsqrt, rms_norm"] = lambda: _backward(lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), rows)
    out["sum"] = lambda: (rows.sum(), rows.sum(0), rows.mean(-1))
    q, k, v = (_randn(64, 2, 24, 32, seed=s) for s in (8, 9, 10))
    causal = torch.triu(torch.full((24, 24), float("-inf")), 1)
    out["attention"] = lambda: _backward(F.scaled_dot_product_attention, q, k, v)
    out["attention causal"] = lambda: _backward(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=causal), q, k, v
    )
    logits, soft = _randn(128, 128, seed=11), torch.softmax(_randn(128, 128, seed=12), -1)
    out["cross_entropy"] = lambda: (
        _backward(lambda x: F.cross_entropy(x, soft), logits),
        _backward(lambda x: F.cross_entropy(x, torch.arange(128)), logits),
    )
    ids = torch.randint(0, 1024, (64, 24), generator=torch.Generator().manual_seed(13))
    out["embedding"] = lambda: _backward(lambda w: F.embedding(ids, w), _randn(1024, 64, seed=14))
    out["adamw fused"] = lambda: _adamw_steps(True)
    return out


def avoided_kernels() -> dict:
    """Kernels the platform keeps out of its CPU computations because their rounding depends on
    the processor: ``torch.sqrt`` (MKL's vector math; ``codyra.device.portable_sqrt``) and with it
    the unfused AdamW step (``codyra.steps.backends.PlainBackend`` runs the fused one)."""
    rows = _randn(2048, 128, seed=7)
    return {"sqrt (avoided)": lambda: rows.abs().sqrt(), "adamw unfused (avoided)": lambda: _adamw_steps(False)}


def ops() -> dict:
    import torch

    report = {"environment": environment()}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for name, fn in (kernels() | avoided_kernels()).items():
            report[f"{name} [{threads} threads]"] = _digest(fn())
    return report


def environment() -> dict:
    import os
    from importlib.metadata import version

    import torch

    from codyra import CPU_NUMERICS

    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        **{name: os.environ.get(name) for name in CPU_NUMERICS},
        **{pkg: version(pkg) for pkg in ("torch", "numpy", "open_clip_torch", "transformers", "tokenizers")},
    }


def _stream_digests(cfg: dict, methods: list[str], out: dict) -> None:
    from codyra.cli import run_stream
    from codyra.store.io import read_json
    from codyra.store.paths import SUMMARY_FILE, task_dir

    for method in methods:
        result = run_stream(cfg, method, 0)
        for i in range(1, len(cfg["tasks"]) + 1):
            out[f"{cfg['benchmark']} {method} task{i}"] = read_json(task_dir(cfg, method, 0, i) / SUMMARY_FILE)[
                "update_digest"
            ][:16]
        out[f"{cfg['benchmark']} {method} A"] = result["A"]


def tiny_configs(results: Path) -> list[tuple[dict, list[str]]]:
    """A mini CLIP and a mini TRACE run small enough for a test: 2 tasks, a few steps each."""
    from codyra.experiment.config import load_config
    from codyra.yaml_loader import load_yaml

    with open(ROOT / "config/config.yaml") as f:
        clip = load_yaml(f)
    clip.update(results=str(results), seeds=[0], methods=["lora-r16", "codyra", "full-ft"], tracking={"enabled": False})
    clip["tasks"] = clip["tasks"][:2]
    clip["mini"].update(
        corpus_size=512,
        pretrain_steps=8,
        pretrain_batch_size=64,
        pretrain_threads=1,
        test_per_task=64,
        train_per_task=128,
    )
    clip["train"].update(iterations=6, batch_size=32)
    with open(ROOT / "config/mini_trace.yaml") as f:
        lm = load_yaml(f)
    lm.update(results=str(results), seeds=[0], methods=["lora-r8-qv", "codyra"], tracking={"enabled": False})
    lm["tasks"] = lm["tasks"][:2]
    lm["task_settings"] = {t: {"train": {"epochs": 1}} for t in lm["tasks"]}
    lm["mini"].update(corpus_size=200, pretrain_steps=6, pretrain_batch_size=8, train_per_task=16, test_per_task=10)
    lm["llm"]["mini"]["eval_per_task"] = 4
    return [(load_config(clip), clip["methods"]), (load_config(lm), lm["methods"])]


def pipeline(workdir: Path) -> dict:
    from codyra.data.scenes.corpus import make_corpus
    from codyra.experiment.pretraining import own_pretraining

    images, captions = make_corpus(512, 0)
    out = {
        "environment": environment(),
        "mini corpus": hashlib.sha256(images.tobytes() + "\n".join(captions).encode()).hexdigest()[:16],
    }
    for cfg, methods in tiny_configs(workdir):
        _stream_digests(cfg, methods, out)
        weights = Path(own_pretraining(cfg))
        out[f"{cfg['benchmark']} theta_0"] = hashlib.sha256(weights.read_bytes()).hexdigest()[:16]
    return out


def compare(a: dict, b: dict, *, avoided: bool = False) -> list[str]:
    """The entries that differ (``avoided``: the avoided kernels' too)."""
    keys = [k for k in sorted(set(a) | set(b)) if k != "environment" and (avoided or "(avoided)" not in k)]
    return [f"{key}: {a.get(key)} vs {b.get(key)}" for key in keys if a.get(key) != b.get(key)]


def report(files: list[Path]) -> str:
    """A Markdown page comparing fingerprint files pairwise (file stems as labels): each pair of
    the same entries and the same MKL branch (``MKL_CBWR``), i.e. the same code on two processors."""
    runs = {f.stem: json.loads(f.read_text()) for f in files}
    lines = [
        "# CPU numerics: fingerprints compared",
        "",
        (
            f"Rendered {time.strftime('%Y-%m-%d')} by `scripts/cpu-numerics.py report` from {len(runs)} files of "
            "`scripts/cpu-numerics.py ops|pipeline` (in `cpu-numerics/`); each pair of files of the same "
            "entries and MKL branch is compared. Kernels the platform avoids are counted apart."
        ),
        "",
        "| file | MKL_CBWR | kernels | torch |",
        "|---|---|---|---|",
    ]
    for name, run in runs.items():
        env = run["environment"]
        lines.append(f"| `{name}` | {env['MKL_CBWR']} | {env['capability']} | {env['torch']} |")
    lines += ["", "| compared | entries differing | which | avoided kernels differing |", "|---|---|---|---|"]
    names = list(runs)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if set(runs[a]) != set(runs[b]) or runs[a]["environment"]["MKL_CBWR"] != runs[b]["environment"]["MKL_CBWR"]:
                continue
            differing = [d.split(":")[0] for d in compare(runs[a], runs[b])]
            avoided = [d.split(":")[0] for d in compare(runs[a], runs[b], avoided=True) if "(avoided)" in d]
            which = ", ".join(sorted({d.split(" [")[0] for d in differing})) or "-"
            lines.append(f"| `{a}` vs `{b}` | {len(differing)} of {len(runs[a]) - 1} | {which} | {len(avoided)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("ops", "pipeline"):
        p = sub.add_parser(name)
        p.add_argument("--out", type=Path, help="write the JSON here (default: print it)")
        if name == "pipeline":
            p.add_argument("--workdir", type=Path, help="results folder of the tiny runs (default: a temporary one)")
    p = sub.add_parser("report")
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--out", type=Path, help="write the page here (default: print it)")
    p = sub.add_parser("compare")
    p.add_argument("files", type=Path, nargs=2)
    p.add_argument("--avoided", action="store_true", help="compare the kernels the platform avoids too")
    args = parser.parse_args(argv)
    if args.command == "compare":
        a, b = (json.loads(f.read_text()) for f in args.files)
        diffs = compare(a, b, avoided=args.avoided)
        print("\n".join(diffs) if diffs else f"identical: {len(a) - 1} entries")
        return 1 if diffs else 0
    if args.command == "report":
        page = report(args.files)
        if args.out:
            args.out.write_text(page)
        else:
            print(page, end="")
        return 0
    if args.command == "ops":
        fingerprints = ops()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            fingerprints = pipeline(args.workdir or Path(tmp))
    text = json.dumps(fingerprints, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
