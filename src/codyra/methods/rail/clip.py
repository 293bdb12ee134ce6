"""The CLIP side of RAIL (``codyra.methods.rail.method``): the closed-form fit on one pass of frozen
image features per task (the family's ``feature_pass``, :mod:`codyra.clip.features`), and the
fused task-agnostic evaluation of a row.

Labels are global over the stream (task k's classes follow tasks 1..k-1's), so the regression
after task i scores the classes of tasks 1..i, and fusion happens over the classes of every
task of the benchmark (RAIL's 1,100 on X-TAIL). Where the cell's label space is the task's own
(MTIL), the fused scores are read on task j's class block (RAIL's routing and fusion unchanged).
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from codyra.clip.hits import ClassHits, classification_cell
from codyra.data.eval_cache import eval_batches
from codyra.device import autocast
from codyra.methods._routing import RoutingTally, route_learned, zero_shot_domains
from codyra.methods.rail import regression as rail
from codyra.steps.batches import derive_seed

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def expansion(options, seed: int, feature_dim: int) -> torch.Tensor | None:
    """RAIL-Primal's frozen random expansion: the same for every task of a run (a function of the seed)."""
    if options.variant != "primal" or not options.hidden_dim:
        return None
    return rail.expansion_weight(
        feature_dim, options.hidden_dim, torch.Generator().manual_seed(derive_seed(seed, 0, 11))
    )


def fit(options, previous: dict | None, batches: list, num_classes: int, seed: int) -> dict[str, torch.Tensor]:
    """The method state after one more task: ``batches`` of (raw image features, global labels)."""
    dtype = DTYPES[options.precision]
    if options.variant == "dual":
        krr = rail.DualKernelRidge(options.kernel_gamma, options.kernel_lambda, dtype)
        if previous is not None:
            krr = rail.DualKernelRidge.from_state(previous, options.kernel_gamma, options.kernel_lambda)
        x = torch.cat([F.normalize(f, dim=-1) for f, _ in batches])
        krr.fit_task(x, torch.cat([y for _, y in batches]), num_classes)
        return krr.state()
    weight = expansion(options, seed, batches[0][0].shape[1])
    dim = batches[0][0].shape[1] if weight is None else weight.shape[0]
    ridge = (
        rail.PrimalRidge(dim, options.gamma, dtype)
        if previous is None
        else rail.PrimalRidge.from_state(previous, options.gamma)
    )
    ridge.fit_task(((rail.expand(f.to(dtype), weight), y) for f, y in batches), num_classes)
    return ridge.state()


def scorer(options, state: dict, seed: int, feature_dim: int):
    """features (B, D) -> adapter scores (B, classes learned)."""
    if options.variant == "dual":
        krr = rail.DualKernelRidge.from_state(state, options.kernel_gamma, options.kernel_lambda)
        return lambda f: krr.scores(F.normalize(f, dim=-1))
    weight = expansion(options, seed, feature_dim)
    ridge = rail.PrimalRidge.from_state(state, options.gamma)
    return lambda f: ridge.scores(rail.expand(f.to(ridge.dtype), weight))


def extra_params(options, state: dict, feature_dim: int) -> tuple[int, int]:
    """(parameters, stored sample values) RAIL keeps beside the frozen backbone at inference (the
    paper's cost table, "params / memory": Primal the expansion and regression weights; Dual the
    dual weights, and as memory the features of every sample seen)."""
    if options.variant == "dual":
        return len(state["memory"]) * int(state["num_classes"]), state["memory"].numel()
    hidden = options.hidden_dim
    return (feature_dim * hidden if hidden else 0) + state["W"].numel(), 0


@torch.no_grad()
def rail_row(cfg: dict, method: str, options, seed: int, i: int, js: list[int], device, state: dict, bundle):
    """Yield the cells A[i, j] of ``bundle``'s model (theta_0, or CoDyRA + RAIL's theta_i; the
    family's bundle, with the CLIP interface) + RAIL's adapter after task i (``state``), each with
    its routing summary."""
    from codyra.clip.streams import build_tasks
    from codyra.clip.zeroshot import label_space_classifier, router_space
    from codyra.data.registry import label_space

    started = time.time()
    model = bundle.model.to(device).eval()
    tasks = build_tasks(cfg, bundle.image)
    union = label_space(tasks)
    sizes = [t.num_classes for t in tasks]
    learned = sum(sizes[:i])
    own_space = cfg["data"]["label_space"] != "union"
    with autocast(device, cfg["eval"]["precision"]):
        classifier = label_space_classifier(model, bundle.tokenizer, router_space(union, options.prompts), device)
    scores = None
    for j in js:
        batches = eval_batches(
            tasks[j - 1].test_set(),
            batch_size=cfg["eval"]["batch_size"],
            num_workers=cfg["data"]["num_workers"],
            device=device,
        )
        offset = union.offset(tasks[j - 1].name)
        tally = RoutingTally("zero_shot", true_domain=j - 1, learned=i)
        # the own label space is the task's slice of the fused scores: its predictions index it from 0
        hits = ClassHits.in_space(tasks[j - 1], label_space([tasks[j - 1]]) if own_space else union)
        for images, labels in batches:
            with autocast(device, cfg["eval"]["precision"]):
                features = model.encode_image(images).float().cpu()
            if scores is None:
                scores = scorer(options, state, seed, features.shape[1])
            zero_shot = 100.0 * F.normalize(features, dim=-1) @ classifier.float().cpu().T  # RAIL: logits x 100
            adapter = scores(features)
            if adapter.shape[1] != learned:
                raise ValueError(
                    f"RAIL's state after task {i} scores {adapter.shape[1]} classes, tasks 1..{i} have {learned}"
                )
            fused, _ = rail.fuse(zero_shot, adapter, options.fusion_weight)
            tally.add(route_learned(zero_shot_domains(zero_shot, sizes), i))
            hits.add((fused[:, offset : offset + sizes[j - 1]] if own_space else fused).argmax(dim=-1), labels)
        yield classification_cell(cfg, method, seed, i, j, hits, started, routing=tally.to_json())
        started = time.time()
