"""Zero-shot heads: class embeddings from class names x template ensembles."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def encode_prompts(model, tokenizer, prompts: list[str], device, batch_size: int = 256) -> torch.Tensor:
    """L2-normalised text embeddings, computed in batches (gradients flow if enabled)."""
    chunks = []
    for start in range(0, len(prompts), batch_size):
        tokens = tokenizer(prompts[start : start + batch_size]).to(device)
        chunks.append(F.normalize(model.encode_text(tokens).float(), dim=-1))
    return torch.cat(chunks)


@torch.no_grad()
def class_embeddings(model, tokenizer, classnames, templates, device, batch_size: int = 256) -> torch.Tensor:
    """(C, D): per class, the L2-normalised mean of its L2-normalised template embeddings."""
    prompts = [template.format(c) for c in classnames for template in templates]
    emb = encode_prompts(model, tokenizer, prompts, device, batch_size)
    emb = emb.view(len(classnames), len(templates), -1).mean(dim=1)
    return F.normalize(emb, dim=-1)


@torch.no_grad()
def label_space_classifier(model, tokenizer, space, device, batch_size: int = 256) -> torch.Tensor:
    """(len(space), D): every class of a `codyra.data.registry.LabelSpace`, in label order,
    embedded with its own dataset's templates."""
    return torch.cat(
        [
            class_embeddings(model, tokenizer, names, templates, device, batch_size)
            for names, templates in space.blocks()
        ]
    )


ROUTER_PROMPTS = ("rail", "dataset")


def router_space(space, prompts: str):
    """The label space a zero-shot domain predictor (and RAIL's fused head) embeds: ``rail`` =
    every class with RAIL's single template (``codyra.data.templates.RAIL_TEMPLATE``, as RAIL
    runs it); ``dataset`` = each class with its own dataset's templates (the benchmark's)."""
    from codyra.data.templates import RAIL_TEMPLATE

    if prompts not in ROUTER_PROMPTS:
        raise ValueError(f"unknown router prompts {prompts!r}; choose from {', '.join(ROUTER_PROMPTS)}")
    return space.with_template(RAIL_TEMPLATE) if prompts == "rail" else space
