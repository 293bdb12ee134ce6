"""The CLIP side of MoE-Adapters (``codyra.methods.moe_adapters.method``): experts in every block of
both towers (the reference's ``AdapterDoubleEncoder``), their stored state, and the task-agnostic
evaluation of a row with the DDAS selector.

A task's method state holds everything inference needs after that task: every layer's experts,
the routers of tasks 1..i and the frozen-expert marks (``<layer>.experts.*``, ``<layer>.routers.*``,
``<layer>.noise.*``, ``<layer>.frozen``), and the DDAS autoencoders of tasks 1..i with their
thresholds (``ddas.<k>.*``, ``ddas.threshold``).

Evaluation (``mtil/src/models/evaluation.py``): each test batch (``--batch-size-eval``, 128) is
routed as a whole. Its frozen
theta_0 image features go through every learned task's autoencoder; the best reconstruction
picks the task k whose router then gates the experts of both towers (image features and the
class-prompt features), or, above the threshold, the batch is classified by the plain
zero-shot model.
"""

from __future__ import annotations

import re
import time

import torch
import torch.nn.functional as F

from codyra.device import autocast
from codyra.methods._routing import ZERO_SHOT, DomainAutoencoder, ddas_route, reconstruction_losses
from codyra.methods._routing.clip import routed_cells
from codyra.methods.moe_adapters import layer as moe

ROUTER = "ddas"
_BACKBONE = ("ln_2.", "mlp.")  # a MoE layer's wrapped block parts: the frozen backbone, never stored


def attach_experts(model, options, generator=None) -> tuple[moe.Control, dict[str, moe.MoELayer]]:
    """Experts beside the MLP of every block of both towers of an open_clip model, initialised from
    ``generator`` (training; a row loads the stored experts over them)."""
    control = moe.Control()
    moe.attach(
        [model.visual.transformer, model.transformer],
        control,
        experts=options.experts,
        top_k=options.top_k,
        bottleneck=options.bottleneck,
        scale=options.adapter_scale,
        dropout=options.dropout,
        generator=generator,
    )
    return control, {name: m for name, m in model.named_modules() if isinstance(m, moe.MoELayer)}


def expert_state(layers: dict[str, moe.MoELayer]) -> dict[str, torch.Tensor]:
    """Experts, routers and frozen marks of every layer (not the wrapped backbone, not the counts)."""
    return {
        f"{name}.{key}": t.detach().cpu()
        for name, layer in layers.items()
        for key, t in layer.state_dict().items()
        if not key.startswith(_BACKBONE) and key != "counts"
    }


def load_expert_state(layers: dict[str, moe.MoELayer], state: dict[str, torch.Tensor]) -> int:
    """Load a stored task's experts, routers and frozen marks; return the number of routers."""
    routers = None
    for name, layer in layers.items():
        own = {k[len(name) + 1 :]: v for k, v in state.items() if k.startswith(name + ".")}
        count = sum(1 for k in own if re.fullmatch(r"routers\.\d+", k))
        if routers is not None and count != routers:
            raise ValueError(f"MoE-Adapters state: layer {name} has {count} routers, others {routers}")
        routers = count
        while len(layer.routers) < count:
            layer.add_router()
        result = layer.load_state_dict(
            {**{k: v for k, v in layer.state_dict().items() if k.startswith(_BACKBONE) or k == "counts"}, **own}
        )
        if result.missing_keys or result.unexpected_keys:  # pragma: no cover - load_state_dict is strict
            raise ValueError(f"MoE-Adapters state of layer {name} does not fit: {result}")
    return routers or 0


def ddas_state(autoencoders: list[DomainAutoencoder], thresholds: list[float]) -> dict[str, torch.Tensor]:
    state = {
        f"ddas.{k}.{key}": t.detach().cpu() for k, ae in enumerate(autoencoders) for key, t in ae.state_dict().items()
    }
    return {**state, "ddas.threshold": torch.tensor(thresholds, dtype=torch.float32)}


def load_ddas(state: dict[str, torch.Tensor]) -> tuple[list[DomainAutoencoder], torch.Tensor]:
    """(the autoencoders of tasks 1..i, their thresholds) from a stored task's state."""
    thresholds = state["ddas.threshold"]
    autoencoders = []
    for k in range(len(thresholds)):
        own = {key[len(f"ddas.{k}.") :]: v for key, v in state.items() if key.startswith(f"ddas.{k}.")}
        code_dim, input_dim = own["encoder.0.weight"].shape
        ae = DomainAutoencoder(input_dim, code_dim)
        ae.load_state_dict(own)
        autoencoders.append(ae.eval())
    return autoencoders, thresholds


def inference_params(layers: dict[str, moe.MoELayer], autoencoders: list[DomainAutoencoder]) -> int:
    """Parameters kept beside the frozen backbone at inference: every expert, each task's gate
    weights (the noise weights act in training only) and the DDAS autoencoders."""
    experts = sum(p.numel() for layer in layers.values() for p in layer.experts.parameters())
    gates = sum(p.numel() for layer in layers.values() for p in layer.routers)
    return experts + gates + sum(p.numel() for ae in autoencoders for p in ae.parameters())


def image_features(model, images: torch.Tensor) -> torch.Tensor:
    return F.normalize(model.encode_image(images).float(), dim=-1)


@torch.no_grad()
def moe_row(cfg: dict, method: str, options, seed: int, i: int, js: list[int], device, state: dict):
    """Yield the cells A[i, j] of theta_0 + MoE-Adapters after task i (``state``), with their routing."""
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks
    from codyra.clip.zeroshot import label_space_classifier

    started = time.time()
    bundle = pretrained_clip(cfg)
    model = bundle.model
    control, layers = attach_experts(model, options)
    if load_expert_state(layers, state) != i:
        raise ValueError(
            f"MoE-Adapters' state after task {i} holds {len(next(iter(layers.values())).routers)} routers, expected {i}"
        )
    autoencoders, thresholds = load_ddas(state)
    model = model.to(device).eval()
    autoencoders = [ae.to(device) for ae in autoencoders]
    tasks = build_tasks(cfg, bundle.image)
    ev = cfg["eval"]
    classifiers = {}  # (route, space) -> class-prompt features under that route

    def classify(images, route, space):
        control.route = None if route == ZERO_SHOT else route
        with autocast(device, ev["precision"]):
            if (route, space) not in classifiers:
                classifiers[route, space] = label_space_classifier(model, bundle.tokenizer, space, device)
            return (image_features(model, images) @ classifiers[route, space].T).argmax(dim=-1).cpu()

    def classify_task(j, space):
        def predict(images):
            control.route = None  # the selector reads theta_0's features
            with autocast(device, ev["precision"]):
                features = image_features(model, images)
            route = ddas_route(reconstruction_losses(autoencoders, features), thresholds)
            return classify(images, route, space), torch.full((len(images),), route)

        return predict

    # DDAS routes a whole batch: batches of the reference's size (options.ddas_batch_size), not eval.batch_size
    yield from routed_cells(
        cfg, method, seed, i, js, tasks, device, ROUTER, classify_task, started, batch_size=options.ddas_batch_size
    )
