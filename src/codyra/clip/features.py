"""One pass of frozen CLIP image features over a task's training set (``CLIP.feature_pass``):
what a closed-form method fits on (RAIL's regression, CoDyRA + RAIL's head), instead of
gradient steps. Labels are global over the stream (task k's classes follow tasks 1..k-1's).
"""

from __future__ import annotations

import torch

from codyra.clip.model import pretrained_clip
from codyra.clip.streams import build_tasks
from codyra.device import autocast
from codyra.steps.batches import derive_seed


@torch.no_grad()
def image_features(model, dataset, batches, cfg, device, precision: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """[(fp32 image features on the CPU, labels)] of ``dataset`` over the index batches ``batches``."""
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=batches, num_workers=cfg["data"]["num_workers"], pin_memory=device.type == "cuda"
    )
    out = []
    for images, labels in loader:
        with autocast(device, precision):
            out.append((model.encode_image(images.to(device, non_blocking=True)).float().cpu(), labels))
    return out


def train_batches(n: int, batch_size: int, seed: int, task_index: int) -> list[list[tuple[int, int]]]:
    """One shuffled pass over a training set of ``n`` (RAIL: augmentation_time 1): batches of
    (index, aug_seed) keys, a pure function of (seed, task)."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(seed, task_index, 0))).tolist()
    keys = [(index, derive_seed(seed, task_index, position, 7)) for position, index in enumerate(order)]
    return [keys[s : s + batch_size] for s in range(0, n, batch_size)]


def task_feature_batches(
    cfg: dict, seed: int, task_index: int, train: dict, device, model=None, pretrained=pretrained_clip
) -> tuple[list, int]:
    """(one pass of the image features of task i's training set, in batches of the job's ``train``
    batch_size and under its augmentation, with labels global over the stream, classes of tasks
    1..i). The features are theta_0's (``pretrained(cfg)``: the family's theta_0, a bundle with the
    CLIP interface), or ``model``'s (CoDyRA + RAIL: theta_i, the backbone right after task i)."""
    bundle = pretrained(cfg)
    tasks = build_tasks(cfg, bundle.image, seed, train["augmentation"])
    offset = sum(t.num_classes for t in tasks[: task_index - 1])
    data = tasks[task_index - 1].train_set()
    model = (bundle.model if model is None else model).to(device).eval()
    batches = image_features(
        model,
        data,
        train_batches(len(data), train["batch_size"], seed, task_index),
        cfg,
        device,
        cfg["train"]["precision"],
    )
    return [(f, y + offset) for f, y in batches], offset + tasks[task_index - 1].num_classes
