"""The cells of a routed CLIP row: each test batch predicted by a method's own routing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

from codyra.clip.hits import ClassHits, classification_cell
from codyra.data.eval_cache import eval_batches
from codyra.methods._routing import RoutingTally

# predict(images on the device) -> (predicted class indices in the label space, routes): (B,) tensors
Predict = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def routed_cells(
    cfg: dict,
    method: str,
    seed: int,
    i: int,
    js: list[int],
    tasks: list,
    device,
    router: str,
    classify: Callable[[int, object], Predict],
    started: float,
    batch_size: int | None = None,
) -> Iterator[dict]:
    """Yield A[i, j] for j in ``js``: ``classify(j, space)`` gives the batch predictor of task j over
    its label space (the task's own classes, or the union of every task's), whose routes the cell
    records with the router's accuracy. ``batch_size``: the test batch when the router decides per
    batch (default ``eval.batch_size``); ``started``: when building the model began (the first
    cell's seconds include it)."""
    from codyra.data.registry import label_space

    union = label_space(tasks)
    own_space = cfg["data"]["label_space"] != "union"
    for j in js:
        task = tasks[j - 1]
        space = label_space([task]) if own_space else union
        predict = classify(j, space)
        batches = eval_batches(
            task.test_set(),
            batch_size=batch_size or cfg["eval"]["batch_size"],
            num_workers=cfg["data"]["num_workers"],
            device=device,
        )
        tally, hits = RoutingTally(router, true_domain=j - 1, learned=i), ClassHits.in_space(task, space)
        for images, labels in batches:
            predicted, routes = predict(images)
            tally.add(routes)
            hits.add(predicted, labels)
        yield classification_cell(cfg, method, seed, i, j, hits, started, routing=tally.to_json())
        started = time.time()
