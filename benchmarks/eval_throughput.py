"""Evaluation-cell throughput of ViT-B-16 (random weights) on the CPU vs the bare model.

A cell is `codyra.clip.evaluate.accuracy_on_task`: it builds the task's text classifier, then
streams the test set through the registry's EvalView (JPEG decode, CLIP preprocessing) and
a DataLoader with workers into the image tower. The bare model is `encode_image` alone on
the same preprocessed batches, held in memory. Their images/s ratio says how much of the
model's speed a cell loses to data loading and bookkeeping (target >= 0.9).

The test stream is a Food-101 folder in its real on-disk layout (``write_food_stream``)
with Food-sized noise JPEGs (512 x 384) in a temporary directory. After an untimed warm-up batch
of the model, cell and bare passes alternate (the order flips every repetition, so drift in
a shared machine's load hits both alike); medians are reported. A cell's one-off costs
(worker start-up, text classifier) count against it, as they do in a job.

    .venv/bin/python benchmarks/eval_throughput.py                        # about 10 minutes on 2 cores
    .venv/bin/python benchmarks/eval_throughput.py --images 256 --repeats 1

Prints the figures and writes them as JSON to --out (default results/benchmarks/eval_throughput.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from codyra.clip.evaluate import accuracy_on_task
from codyra.clip.model import create_clip
from codyra.data.registry import build_task
from codyra.store.io import write_json

REPO = Path(__file__).resolve().parent.parent

MODEL = "ViT-B-16"
FOOD_IMAGE_SIZE = (512, 384)  # Food-101's images have a longest side of 512
FOOD_CLASSES = ("apple_pie", "baby_back_ribs", "baklava")  # Food-101's first three
TARGET = 0.9


def write_food_stream(root: Path, test_per_class: int) -> None:
    """A Food-101 folder as torchvision reads it (images/<class>/<id>.jpg, meta/{train,test}.json):
    one training image and ``test_per_class`` test images per class, noise JPEGs of Food's size."""
    base, rng = root / "food-101", np.random.default_rng(0)
    width, height = FOOD_IMAGE_SIZE
    for split, per_class in (("train", 1), ("test", test_per_class)):
        meta = {name: [f"{name}/{split}{k}" for k in range(per_class)] for name in FOOD_CLASSES}
        for image_id in (i for ids in meta.values() for i in ids):
            path = base / "images" / f"{image_id}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path, "JPEG")
        (base / "meta").mkdir(parents=True, exist_ok=True)
        (base / "meta" / f"{split}.json").write_text(json.dumps(meta))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64, help="test images in the stream (rounded up to 3 classes)")
    parser.add_argument("--batch-size", type=int, default=64, help="eval.batch_size")
    parser.add_argument("--workers", type=int, default=1, help="data.num_workers: DataLoader worker processes")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (eval.threads)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions of each pass")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "benchmarks" / "eval_throughput.json")
    return parser.parse_args(argv)


def cell_seconds(bundle, tasks, cfg) -> float:
    started = time.perf_counter()
    accuracy_on_task(bundle, tasks, 1, cfg, torch.device("cpu"))
    return time.perf_counter() - started


@torch.no_grad()
def bare_seconds(model, batches) -> float:
    started = time.perf_counter()
    for images in batches:
        model.encode_image(images)
    return time.perf_counter() - started


def main(argv=None) -> None:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    torch.set_num_threads(args.threads)
    bundle = create_clip(MODEL, None)
    cfg = {
        "eval": {"batch_size": args.batch_size, "precision": "auto"},
        "data": {"label_space": "task", "num_workers": args.workers},
    }
    with tempfile.TemporaryDirectory() as root:
        write_food_stream(Path(root), test_per_class=math.ceil(args.images / len(FOOD_CLASSES)))
        tasks = [build_task("Food", "mtil", root, bundle.image)]
        test_set = tasks[0].test_set()
        loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size)
        started = time.perf_counter()
        batches = [images for images, _ in loader]
        preprocess = time.perf_counter() - started

        bare_seconds(bundle.model, batches[:1])  # warm-up
        passes = {"cell": lambda: cell_seconds(bundle, tasks, cfg), "bare": lambda: bare_seconds(bundle.model, batches)}
        seconds = {name: [] for name in passes}
        for repeat in range(args.repeats):
            for name in sorted(passes, reverse=repeat % 2 == 1):
                seconds[name].append(passes[name]())

    n = len(test_set)
    cell_rate, bare_rate = (n / statistics.median(seconds[name]) for name in ("cell", "bare"))
    ratio = cell_rate / bare_rate
    print(
        f"{MODEL} eval cell on the CPU: {n} images of {FOOD_IMAGE_SIZE[0]}x{FOOD_IMAGE_SIZE[1]} -> "
        f"{bundle.image.size} px, batch {args.batch_size}, {args.workers} loader worker(s), "
        f"{args.threads} torch thread(s), median of {args.repeats}"
    )
    print(f"  decode + preprocess alone (1 process): {n / preprocess:8.1f} images/s")
    print(f"  bare encode_image on those batches:    {bare_rate:8.1f} images/s")
    print(f"  eval cell (classifier + stream):       {cell_rate:8.1f} images/s")
    print(f"  ratio cell / bare: {ratio:.3f} (target >= {TARGET}: {'met' if ratio >= TARGET else 'NOT met'})")
    print(
        "  seconds per pass: "
        + "; ".join(f"{name} " + " ".join(f"{t:.1f}" for t in ts) for name, ts in seconds.items())
    )
    load = (load_before, os.getloadavg()[0])
    print(f"  1-minute load average at start / end: {load[0]:.1f} / {load[1]:.1f} on {os.cpu_count()} cores")
    write_json(
        args.out,
        {
            "model": MODEL,
            "images": n,
            "image_size": bundle.image.size,
            "batch_size": args.batch_size,
            "workers": args.workers,
            "threads": args.threads,
            "repeats": args.repeats,
            "preprocess_images_per_s": n / preprocess,
            "bare_images_per_s": bare_rate,
            "cell_images_per_s": cell_rate,
            "ratio": ratio,
            "meets_target": ratio >= TARGET,
            "seconds": seconds,
            "loadavg_1min": load,
        },
    )
    print(f"  written to {args.out}")


if __name__ == "__main__":
    main()
