"""CLIP cells A[i, j]: top-1 accuracy on task j's test images after training tasks 1..i.

A row's cells share one theta_i (built once) and the task list; the text classifier is built
once per cell (once per (model state, task)); images stream through a DataLoader (from the
task's evaluation cache once built: ``codyra.data.eval_cache``). Label
space ``task`` classifies over task j's own classes (MTIL), ``union`` over the classes of
every task of the benchmark (X-TAIL), each class embedded with its own task's templates.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from codyra.clip.hits import ClassHits, classification_cell
from codyra.clip.model import pretrained_clip
from codyra.clip.rebuild import rebuild_clip
from codyra.clip.streams import build_tasks
from codyra.clip.zeroshot import label_space_classifier
from codyra.device import autocast, pick_device, use_threads
from codyra.progress import progress_bar
from codyra.store.model_states import for_inference


def hits_on_task(bundle, tasks, j: int, cfg: dict, device) -> ClassHits:
    """Task j's hits over its own classes, or over every task's (X-TAIL's 1,100) when
    data.label_space is union."""
    task = tasks[j - 1]
    return class_hits(bundle, task, tasks if cfg["data"]["label_space"] == "union" else [task], cfg, device)


@torch.no_grad()
def class_hits(bundle, task, space_tasks, cfg: dict, device) -> ClassHits:
    """``task``'s test predictions tallied over the classes of ``space_tasks`` (which include it)."""
    from codyra.data.eval_cache import eval_batches
    from codyra.data.registry import label_space  # imports torchvision: only CLIP cells pay for it

    ev = cfg["eval"]
    model = bundle.model.to(device).eval()
    # The registry's label space, each class with its own dataset's templates; built from
    # theta_i here, never cached.
    space = label_space(space_tasks)
    test_set = task.test_set()  # checks its image files first: a broken dataset fails before any compute
    with autocast(device, ev["precision"]):
        classifier = label_space_classifier(model, bundle.tokenizer, space, device)
    batches = eval_batches(test_set, batch_size=ev["batch_size"], num_workers=cfg["data"]["num_workers"], device=device)
    hits = ClassHits.in_space(task, space)
    bar = progress_bar(total=len(test_set), desc=f"eval {task.name}")
    for images, labels in batches:
        hits.add(class_scores(model, images, classifier, ev["precision"]).argmax(dim=-1), labels)
        bar.update(len(labels))
    bar.close()
    return hits


def class_scores(model, images, classifier, precision: str):
    """(B, classes) scores of ``images`` over ``classifier``'s rows: the cosines of the model's image
    features. A model that combines several image encodings itself (a method's inference module:
    LAE's ensemble of its online and offline modules, ``combine_class_scores``) gets the function
    computing those cosines for an image encoder, and returns its own scores."""

    def cosines(encode):
        with autocast(images.device, precision):
            features = encode(images)
        # fp32 logits: in bf16, near-tied classes of a 1,100-way argmax could swap
        return F.normalize(features.float(), dim=-1) @ classifier.T

    combine = getattr(model, "combine_class_scores", None)
    return cosines(model.encode_image) if combine is None else combine(cosines)


def clip_cells(cfg: dict, row, device, pretrained=pretrained_clip, rebuild=rebuild_clip):
    """Yield the cells A[i, j] of ``row`` (:class:`codyra.methods.base.Row`): of theta_i, through
    ``row.kind``'s ``for_inference`` hook, or of theta_0 for the pretrained row (``kind`` None).
    ``pretrained(cfg)`` and ``rebuild(cfg, method, seed, i)`` build the family's bundles (a model
    with the CLIP interface: ``encode_image``, ``encode_text``; its tokenizer; its image settings)."""
    use_threads(cfg["eval"]["threads"])
    started = time.time()  # the first cell's seconds include building the model
    method, seed, i = row.method, row.seed, row.i
    bundle = (
        pretrained(cfg)
        if row.kind is None
        else for_inference(cfg, method, seed, i, rebuild(cfg, method, seed, i), row.kind)
    )
    tasks = build_tasks(cfg, bundle.image)
    device = pick_device(device)
    for j in row.js:
        yield classification_cell(cfg, method, seed, i, j, hits_on_task(bundle, tasks, j, cfg, device), started)
        started = time.time()
