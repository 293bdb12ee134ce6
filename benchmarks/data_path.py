"""Images/s of one data worker on this machine's CPU: a test set read from its JPEGs against its
evaluation cache, and a few-shot training set read from its JPEGs against the same set decoded
once into memory; beside the rate a ViT-B/16 step consumes on a GPU (read from a
``gpu_costs.py`` record), so that the workers a GPU needs can be read off.

The images are a Food-101 folder of Food-sized (512 x 384) noise JPEGs (``gpu_costs.write_food``).
Evaluation: one DataLoader worker decoding, resizing, cropping and normalising (the JPEG path)
against one thread reading the cache (``CachedEvalSet.read``: a copy out of the memory map and
the checksums; normalisation happens on the GPU). Training: one DataLoader worker producing
augmented images (random resized crop, flip, normalise) for random (image, augmentation seed)
keys, as the training loop's sampler draws them, from the files and from the decoded images;
the augmented images are checked to be equal. Each rate excludes the worker's start-up.

    .venv/bin/python benchmarks/data_path.py
    .venv/bin/python benchmarks/data_path.py --gpu-record docs/results/gpu/gpu_costs-nvidia-h200-2026-11-29.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_costs import reader_rate, worker_rate, write_food  # sibling scripts
from run_record import write_record

TARGET = 10.0  # the cache feeds at least 10x the images/s of the JPEG path, per worker


def train_rate(dataset, keys: list[tuple[int, int]], batch_size: int) -> float:
    """Images/s one DataLoader worker delivers for ``keys`` (after its first batch)."""
    batches = [keys[k : k + batch_size] for k in range(0, len(keys), batch_size)]
    loader = iter(torch.utils.data.DataLoader(dataset, batch_sampler=batches, num_workers=1))
    next(loader)
    count, began = 0, time.perf_counter()
    for images, _ in loader:
        count += len(images)
    return count / (time.perf_counter() - began)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1024, help="test images (and distinct JPEGs)")
    parser.add_argument("--shots", type=int, default=5, help="few-shot k per class (3 classes)")
    parser.add_argument("--train-images", type=int, default=512, help="augmented training images timed")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=224, help="the model's input resolution")
    parser.add_argument("--gpu-record", type=Path, help="a gpu_costs.py record: the model's images/s beside")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/data_path.json"))
    args = parser.parse_args(argv)

    from codyra.data.eval_cache import build_eval_cache
    from codyra.data.registry import build_task
    from codyra.data.tasks import ImageConfig

    load_before = os.getloadavg()[0]
    image = ImageConfig(args.size, (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
    figures: dict = {"images": args.images, "size": args.size, "batch_size": args.batch_size, "target": TARGET}
    with tempfile.TemporaryDirectory() as scratch:
        root, cache = Path(scratch) / "data", Path(scratch) / "cache"
        write_food(root, args.images, args.images)
        (root / "food-101" / "meta" / "train.json").write_text((root / "food-101" / "meta" / "test.json").read_text())
        plain = build_task("Food", "mtil", root, image)
        view = plain.test_set()
        build_eval_cache(view.samples, view.transform, cache, workers=0)
        cached = build_task("Food", "mtil", root, image, eval_cache=cache).test_set()
        figures["eval_images_per_s"] = {
            "jpeg": worker_rate(view, args.batch_size, len(view)),
            "cache": reader_rate(cached, args.batch_size),
        }
        figures["eval_speedup"] = figures["eval_images_per_s"]["cache"] / figures["eval_images_per_s"]["jpeg"]

        files = build_task("Food", "mtil", root, image).train_set()
        decoded = build_task("Food", "mtil", root, image, fewshot_k=args.shots).train_set()
        generator = torch.Generator().manual_seed(0)
        picks = torch.randint(0, len(decoded), (args.train_images + args.batch_size,), generator=generator)
        keys = [(int(k), 1000 + n) for n, k in enumerate(picks)]
        on_files = [(files.samples.keys.index(decoded.samples.keys[i]), seed) for i, seed in keys]
        for (i, seed), (j, _) in zip(keys[:8], on_files[:8], strict=True):
            assert torch.equal(decoded[(i, seed)][0], files[(j, seed)][0]), "decoded and file images differ"
        figures["train_images_per_s"] = {
            "jpeg": train_rate(files, on_files, args.batch_size),
            "decoded": train_rate(decoded, keys, args.batch_size),
        }
        figures["train_speedup"] = figures["train_images_per_s"]["decoded"] / figures["train_images_per_s"]["jpeg"]
        figures["fewshot_images"] = len(decoded)
    figures["meets_target"] = figures["eval_speedup"] >= TARGET
    if args.gpu_record:
        gpu = json.loads(args.gpu_record.read_text())
        phase = gpu["clip_train"]["bf16"]["phases"]["dense"]
        consumes = {"train": phase["lora_images_per_s"], "eval": gpu["clip_eval"]["images_per_s"]["bare"]}
        figures["gpu"] = {"name": gpu["device"]["name"], "record": str(args.gpu_record), "images_per_s": consumes}
        figures["workers_to_feed_gpu"] = {
            "eval_jpeg": consumes["eval"] / figures["eval_images_per_s"]["jpeg"],
            "eval_cache": consumes["eval"] / figures["eval_images_per_s"]["cache"],
            "train_jpeg": consumes["train"] / figures["train_images_per_s"]["jpeg"],
            "train_decoded": consumes["train"] / figures["train_images_per_s"]["decoded"],
        }
    record = write_record(args.out, figures, load_before, {"torch": torch.__version__})
    print(json.dumps({k: v for k, v in record.items() if k not in ("host",)}, indent=1))
    return record


if __name__ == "__main__":
    main()
