"""Task-agnostic inference with domain prediction for a CLIP run that kept per-task models
(CoDyRA-dagger): the cells A[i, j] of one row.

The router (``router``) is the pretrained model's zero-shot classifier over the classes of every
task of the benchmark (``zero_shot``: RAIL's domain predictor, see ``codyra.methods._routing``;
by default with RAIL's prompt ``a photo of a {}.`` for every class), or MoE-Adapters'
autoencoders on theta_0's features, one decision per test batch (``ddas``). A test image whose
predicted domain is a task k <= i is classified by theta_k (the model right after learning task
k, rebuilt from the stored updates 1..k); every other image by theta_i. So unseen tasks get
exactly the plain run's predictions (Transfer unchanged, as the paper notes for CoDyRA-dagger)
and learned tasks escape later tasks' drift as far as the router is right.

One model is in memory at a time: theta_0 routes every test image, then the updates are
applied in task order and each theta_k classifies only the images routed to it.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from codyra.clip.hits import ClassHits, classification_cell
from codyra.data.eval_cache import eval_batches
from codyra.device import autocast
from codyra.methods._routing import (
    ZERO_SHOT,
    RoutingTally,
    class_domains,
    ddas_route,
    reconstruction_losses,
    route_learned,
)
from codyra.store.model_states import require_updates
from codyra.store.updates import apply_update, load_update


@torch.no_grad()
def _predict(model, classifier, dataset, indices, cfg, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(argmax over ``classifier`` rows, labels) of the images ``indices`` of ``dataset``."""
    ev = cfg["eval"]
    if not len(indices):
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    batches = eval_batches(
        torch.utils.data.Subset(dataset, indices.tolist()),
        batch_size=ev["batch_size"],
        num_workers=cfg["data"]["num_workers"],
        device=device,
    )
    predictions, labels = [], []
    for images, y in batches:
        with autocast(device, ev["precision"]):
            features = model.encode_image(images)
        predictions.append((F.normalize(features.float(), dim=-1) @ classifier.T).argmax(dim=-1).cpu())
        labels.append(y)
    return torch.cat(predictions), torch.cat(labels)


@torch.no_grad()
def _ddas_routes(model, dataset, cfg, device, options, state: dict) -> torch.Tensor:
    """(N,) each test image's route: its batch's (``options.ddas_batch_size`` images in order),
    chosen by the autoencoders of ``state`` on theta_0's features (``codyra.methods._routing``)."""
    from codyra.methods.moe_adapters.clip import image_features, load_ddas

    autoencoders, thresholds = load_ddas(state)
    autoencoders = [ae.to(device) for ae in autoencoders]
    batches = eval_batches(
        dataset, batch_size=options.ddas_batch_size, num_workers=cfg["data"]["num_workers"], device=device
    )
    routes = []
    for images, _ in batches:
        with autocast(device, cfg["eval"]["precision"]):
            features = image_features(model, images)
        routes.append(torch.full((len(images),), ddas_route(reconstruction_losses(autoencoders, features), thresholds)))
    return torch.cat(routes)


@torch.no_grad()
def routed_row(
    cfg: dict, method: str, seed: int, i: int, js: list[int], device, options, pretrained, state: dict | None = None
):
    """Yield the cells A[i, j] for j in ``js``, each with its routing summary. ``options``: the
    method's (``router``, ``router_prompts``, and for ``router: ddas`` the selector's options,
    whose autoencoders of tasks 1..i are in ``state``); ``pretrained()`` builds theta_0 (the
    family's bundle, with the CLIP interface)."""
    from codyra.clip.streams import build_tasks
    from codyra.clip.zeroshot import label_space_classifier, router_space
    from codyra.data.registry import label_space

    if i < 1:
        raise ValueError("routed inference needs a learned task (i >= 1); row 0 is the pretrained model's")
    if options.router == "ddas" and state is None:
        raise ValueError("router: ddas routes with the stored autoencoders: pass task i's method state")
    started = time.time()
    dirs = require_updates(cfg, method, seed, i)  # fail before building anything
    bundle = pretrained()
    model = bundle.model.to(device).eval()
    tasks = build_tasks(cfg, bundle.image)
    union = label_space(tasks)  # the zero-shot router's: every domain of the benchmark
    own_space = cfg["data"]["label_space"] != "union"
    tests = {j: tasks[j - 1].test_set() for j in js}  # checks the image files before any compute

    routes = {}
    if options.router == "ddas":
        for j in js:
            routes[j] = route_learned(_ddas_routes(model, tests[j], cfg, device, options, state), i)
    else:
        with autocast(device, cfg["eval"]["precision"]):
            router = label_space_classifier(
                model, bundle.tokenizer, router_space(union, options.router_prompts), device
            )
        domain_of = class_domains([t.num_classes for t in tasks])
        for j in js:
            predicted, _ = _predict(model, router, tests[j], torch.arange(len(tests[j])), cfg, device)
            routes[j] = route_learned(domain_of[predicted], i)

    hits = {j: ClassHits.in_space(tasks[j - 1], label_space([tasks[j - 1]]) if own_space else union) for j in js}
    for k in range(1, i + 1):
        apply_update(model, load_update(dirs[k - 1]))  # model = theta_k
        classifiers = {}  # per label space, built from theta_k
        for j in js:
            chosen = routes[j] == k - 1
            if k == i:  # theta_i also takes what the router leaves to no learned task
                chosen |= routes[j] == ZERO_SHOT
            if not chosen.any():
                continue
            space = label_space([tasks[j - 1]]) if own_space else union
            if space not in classifiers:
                with autocast(device, cfg["eval"]["precision"]):
                    classifiers[space] = label_space_classifier(model, bundle.tokenizer, space, device)
            hits[j].add(*_predict(model, classifiers[space], tests[j], chosen.nonzero().flatten(), cfg, device))
    for j in js:
        tally = RoutingTally(options.router, true_domain=j - 1, learned=i)
        tally.add(routes[j])
        yield classification_cell(cfg, method, seed, i, j, hits[j], started, routing=tally.to_json())
        started = time.time()
