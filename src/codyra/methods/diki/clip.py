"""The CLIP side of DIKI (:mod:`codyra.methods.diki.method`): residual prefixes in the attention of
both towers, the per-task Gaussians, and the calibrated task-agnostic evaluation of a row.

A task's method state holds what inference needs after it: for each prefixed block of each
tower the prefixes of tasks 1..i (``vision.<block>``, ``text.<block>``: (tasks, 2, length,
width), keys then values), and the tasks' Gaussians of the frozen model's normalised image
embeddings (``means`` (tasks, D), ``covariances`` (tasks, D, D)).

Evaluation (lloongx/DIKI ``DIKI/DIKI.py`` ``CustomCLIP.forward``): each test batch's frozen
image embeddings give every image its best learned task by log-likelihood and its weight
sigmoid(log-likelihood / scale - shift); the batch's prefixes are its most frequent best task's
(``batchwise``; else each image its own), the images weighted each by its own weight, the class
prompts (one per class, the template the task trains with, as the reference's one template per
dataset) by the batch's mean weight.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from codyra.device import autocast
from codyra.methods._prompting.clip import unwrap_attention, wrap_attention
from codyra.methods._routing.clip import routed_cells

TOWERS = ("vision", "text")
NAME = "codyra_prefixes"  # the training task's prefixes, a submodule of the model (checkpointed with it)
ROUTER = "diki"


def tower_blocks(model) -> dict[str, nn.Sequential]:
    return {"vision": model.visual.transformer.resblocks, "text": model.transformer.resblocks}


class TaskPrefixes(nn.Module):
    """One task's prefixes: per tower, per prefixed block, keys and values (length, width)."""

    def __init__(self, shapes: dict[str, list[tuple[int, int]]], generator: torch.Generator):
        super().__init__()
        for tower in TOWERS:
            # clip/attention.py: prefix_pool zeros, then uniform_(prefix_pool[:, 0], -1, 1): keys U(-1, 1), values 0
            keys = [nn.Parameter(torch.rand(s, generator=generator) * 2 - 1) for s in shapes[tower]]
            self.add_module(f"{tower}_keys", nn.ParameterList(keys))
            self.add_module(f"{tower}_values", nn.ParameterList([nn.Parameter(torch.zeros(s)) for s in shapes[tower]]))

    def pairs(self, tower: str) -> list[tuple[nn.Parameter, nn.Parameter]]:
        return list(zip(getattr(self, f"{tower}_keys"), getattr(self, f"{tower}_values"), strict=True))


@dataclass
class Stored:
    """A DIKI task state: ``prefixes[tower][block]`` (tasks, 2, length, width), the Gaussians."""

    prefixes: dict[str, list[torch.Tensor]]
    means: torch.Tensor
    covariances: torch.Tensor

    @property
    def tasks(self) -> int:
        return self.means.shape[0]


def load_state(state: dict[str, torch.Tensor]) -> Stored:
    """A stored DIKI task state, checked."""
    prefixes = {tower: [] for tower in TOWERS}
    for tower in TOWERS:
        while f"{tower}.{len(prefixes[tower])}" in state:
            prefixes[tower].append(state[f"{tower}.{len(prefixes[tower])}"])
    known = {f"{t}.{b}" for t in TOWERS for b in range(len(prefixes[t]))} | {"means", "covariances"}
    if set(state) != known or not prefixes["vision"]:
        raise ValueError(
            f"a DIKI task state holds vision.<block>, text.<block>, means and covariances, got {sorted(state)}: "
            "rerun the task's training job"
        )
    means, covariances = state["means"], state["covariances"]
    tasks, dim = means.shape
    if covariances.shape != (tasks, dim, dim) or any(
        p.dim() != 4 or p.shape[:2] != (tasks, 2) for t in TOWERS for p in prefixes[t]
    ):
        raise ValueError(
            f"corrupt DIKI state: means {tuple(means.shape)}, covariances {tuple(covariances.shape)}, prefixes "
            f"{[tuple(p.shape) for t in TOWERS for p in prefixes[t]]}: rerun the task's training job"
        )
    return Stored(prefixes, means, covariances)


def fit_gaussian(features: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, unbiased covariance + ``eps`` I) of ``features`` (N, D), as DIKI.py ``train_one_task``
    (computed in float64, kept in float32 as the reference's buffers)."""
    if features.shape[0] < 2:
        raise ValueError(f"a task's Gaussian needs at least 2 training images, got {features.shape[0]}")
    x = features.double()
    mean = x.mean(dim=0)
    delta = x - mean
    covariance = delta.T @ delta / (x.shape[0] - 1) + eps * torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
    return mean.float(), covariance.float()


def gaussian_log_probs(x: torch.Tensor, means: torch.Tensor, covariances: torch.Tensor) -> torch.Tensor:
    """(B, tasks): log N(x_b; mean_t, covariance_t) (``MultivariateNormal.log_prob``), in float64."""
    chol = torch.linalg.cholesky(covariances.double())
    diff = (x.double().unsqueeze(0) - means.double().unsqueeze(1)).transpose(1, 2)  # tasks, D, B
    z = torch.linalg.solve_triangular(chol, diff, upper=False)
    logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(dim=-1)
    dim = x.shape[1]
    return (-0.5 * (dim * math.log(2 * math.pi) + logdet.unsqueeze(1) + z.square().sum(dim=1))).T


def calibrated_routes(log_probs: torch.Tensor, options) -> tuple[torch.Tensor, torch.Tensor]:
    """(each image's task, each image's weight) from its log-likelihoods (B, tasks): weight
    sigmoid(best / weight_scale - weight_shift); with ``batchwise`` every image gets the batch's
    most frequent best task (the lower on ties)."""
    best, task = log_probs.max(dim=1)
    weight = torch.sigmoid(best / options.weight_scale - options.weight_shift).float()
    if options.batchwise:
        task = torch.full_like(task, int(torch.bincount(task, minlength=log_probs.shape[1]).argmax()))
    return task, weight


def task_gaussian(ctx, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The task's Gaussian of the frozen model's normalised image embeddings of every training image
    under the evaluation transform (DIKI.py: one pass of its training loader, whose images get CLIP's
    test preprocessing, ``get_transform``)."""
    model = ctx.model
    was_training = model.training
    model.eval()
    loader = torch.utils.data.DataLoader(
        ctx.task.train_eval_set(),
        batch_size=ctx.train["batch_size"],
        num_workers=ctx.cfg["data"]["num_workers"],
        pin_memory=ctx.device.type == "cuda",
    )
    with torch.no_grad():
        features = [F.normalize(model.encode_image(x.to(ctx.device)).float(), dim=-1) for x, _ in loader]
    model.train(was_training)
    return fit_gaussian(torch.cat(features), eps)


def _depths(options) -> dict[str, tuple[int, int]]:
    return {"vision": (options.vision_depth, options.vision_length), "text": (options.text_depth, options.text_length)}


def attach_training(model, options, generator: torch.Generator, device):
    """The training task's prefixes, new, in the first blocks of both towers, weight 1:
    (the prefixes module, the wrapped attention of each tower)."""
    blocks = tower_blocks(model)
    shapes = {}
    for tower, (depth, length) in _depths(options).items():
        if depth > len(blocks[tower]):
            raise ValueError(
                f"DIKI's {tower}_depth {depth} exceeds the {tower} tower's {len(blocks[tower])} blocks: "
                "lower it in the method's config"
            )
        shapes[tower] = [(length, blocks[tower][b].attn.embed_dim) for b in range(depth)]
    prefixes = TaskPrefixes(shapes, generator).to(device)
    model.add_module(NAME, prefixes)
    wrapped = {tower: wrap_attention(blocks[tower], range(len(shapes[tower])), "residual") for tower in TOWERS}
    for tower in TOWERS:
        for b, pair in enumerate(prefixes.pairs(tower)):
            wrapped[tower][b].prefix = pair
    return prefixes, wrapped


def finish_training(model, prefixes: TaskPrefixes, wrapped, previous: Stored | None, mean, covariance) -> dict:
    """Detach the prefixes from ``model``; the state after this task: tasks 1..i's prefixes and Gaussians."""
    blocks = tower_blocks(model)
    for tower in TOWERS:
        unwrap_attention(blocks[tower], wrapped[tower])
    delattr(model, NAME)
    state = {}
    for tower in TOWERS:
        for b, (keys, values) in enumerate(prefixes.pairs(tower)):
            new = torch.stack([keys.detach(), values.detach()]).cpu().float().unsqueeze(0)
            state[f"{tower}.{b}"] = new if previous is None else torch.cat([previous.prefixes[tower][b], new])
    means, covariances = mean.unsqueeze(0).cpu(), covariance.unsqueeze(0).cpu()
    if previous is not None:
        means, covariances = torch.cat([previous.means, means]), torch.cat([previous.covariances, covariances])
    return {**state, "means": means, "covariances": covariances}


@torch.no_grad()
def diki_row(cfg: dict, method: str, options, seed: int, i: int, js: list[int], device, state: dict):
    """Yield the cells A[i, j] of theta_0 + DIKI after task i (``state``), with their routing."""
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks
    from codyra.clip.zeroshot import label_space_classifier

    started = time.time()
    stored = load_state(state)
    if stored.tasks != i:
        raise ValueError(f"DIKI's state after task {i} holds {stored.tasks} tasks: rerun task {i}'s training job")
    bundle = pretrained_clip(cfg)
    model = bundle.model
    blocks = tower_blocks(model)
    wrapped = {t: wrap_attention(blocks[t], range(len(stored.prefixes[t])), "residual") for t in TOWERS}
    model = model.to(device).eval()
    prefixes = {t: [p.to(device) for p in stored.prefixes[t]] for t in TOWERS}
    means, covariances = stored.means.to(device), stored.covariances.to(device)
    tasks = build_tasks(cfg, bundle.image)
    precision = cfg["eval"]["precision"]

    def route(tower, task, weight):
        for b, attention in wrapped[tower].items():
            attention.prefix = None if task is None else (prefixes[tower][b][task, 0], prefixes[tower][b][task, 1])
            attention.weight = weight

    def classify(j, space):
        space = replace(space, templates=tuple(t[:1] for t in space.templates))  # the template training uses

        def predict(images):
            route("vision", None, None)  # the calibration reads the frozen model's embeddings
            with autocast(device, precision):
                features = F.normalize(model.encode_image(images).float(), dim=-1)
            routes, weights = calibrated_routes(gaussian_log_probs(features, means, covariances), options)
            predictions = torch.empty(len(images), dtype=torch.long)
            for k in routes.unique().tolist():
                chosen = routes == k
                route("vision", k, weights[chosen])
                route("text", k, weights.mean())
                with autocast(device, precision):
                    image = F.normalize(model.encode_image(images[chosen]).float(), dim=-1)
                    classifier = label_space_classifier(model, bundle.tokenizer, space, device)
                predictions[chosen.cpu()] = (image @ classifier.T).argmax(dim=-1).cpu()
            route("text", None, None)
            return predictions, routes

        return predict

    yield from routed_cells(
        cfg, method, seed, i, js, tasks, device, ROUTER, classify, started, batch_size=options.eval_batch_size
    )
