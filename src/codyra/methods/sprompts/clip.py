"""The CLIP side of S-Prompts (``codyra.methods.sprompts.method``): image prompts inserted into
the image tower, CoOp's learned context in the class prompts, the stored domains, and the
cells of a row with the K-means domain selector.

A task's method state holds every learned domain k (0-based): ``image.<k>`` (prompt tokens x
image width), ``context.<k>`` (context vectors x text width) and ``centroids.<k>`` (K x
embedding dimension).
"""

from __future__ import annotations

import itertools
import time

import torch
import torch.nn.functional as F
from torch import nn

from codyra.device import autocast
from codyra.methods._routing.clip import routed_cells
from codyra.methods.sprompts.selector import select_domains

ROUTER = "kmeans"
_ATTRIBUTE = "sprompts"  # where the training domain's prompts sit on the image tower


class PromptInsertion:
    """A forward pre-hook on the image tower's ``ln_pre``: ``prompts`` ((L, W) for every image,
    (B, L, W) one set per image, None for none) go between the class token and the patch tokens,
    after the positional embedding (``models/clip/model.py`` ``VisionTransformer.forward``)."""

    def __init__(self, visual):
        self.prompts: torch.Tensor | None = None
        self.handle = visual.ln_pre.register_forward_pre_hook(self._insert)

    def _insert(self, module, args):
        if self.prompts is None:
            return None
        x = args[0]
        prompts = self.prompts.to(x.dtype)
        if prompts.dim() == 2:
            prompts = prompts.expand(len(x), -1, -1)
        return (torch.cat([x[:, :1], prompts, x[:, 1:]], dim=1), *args[1:])

    def remove(self) -> None:
        self.handle.remove()


class DomainPrompts(nn.Module):
    """One domain's image prompts and text context (its ``PromptInsertion`` is kept unregistered)."""

    def __init__(self, image: torch.Tensor, context: torch.Tensor):
        super().__init__()
        self.image = nn.Parameter(image)
        self.context = nn.Parameter(context)
        self._insertion: tuple[PromptInsertion, ...] = ()


def attach_prompts(model, options, generator: torch.Generator) -> DomainPrompts:
    """A new domain's prompts on ``model``'s image tower: image prompts U(+-1/sqrt(width))
    (``nn.Linear(embd_dim, prompt_length)``'s default init), context N(0, 0.02) (``PromptLearner``)."""
    width = model.visual.transformer.width
    text_width = model.token_embedding.weight.shape[1]
    bound = width**-0.5
    image = torch.empty(options.prompt_length, width).uniform_(-bound, bound, generator=generator)
    context = torch.empty(options.context_length, text_width).normal_(0.0, 0.02, generator=generator)
    prompts = DomainPrompts(image, context)
    insertion = PromptInsertion(model.visual)
    insertion.prompts = prompts.image
    prompts._insertion = (insertion,)
    setattr(model.visual, _ATTRIBUTE, prompts)  # registers the prompts with the model: they train and checkpoint
    return prompts


def detach_prompts(model) -> None:
    """Put the image tower back as it was (theta_0)."""
    getattr(model.visual, _ATTRIBUTE)._insertion[0].remove()
    delattr(model.visual, _ATTRIBUTE)


def tokenize_classes(cfg_or_tokenizer, classnames, context_length: int) -> torch.Tensor:
    """The tokens of CoOp's prompts "X X ... X <class name>." (``context_length`` X's; the X
    embeddings are replaced by the learned context). ``cfg_or_tokenizer``: the config (its
    model's tokenizer) or an open_clip tokenizer."""
    if isinstance(cfg_or_tokenizer, dict):
        from codyra.clip.model import clip_tokenizer

        tokenizer = clip_tokenizer(cfg_or_tokenizer["model"]["name"])
    else:
        tokenizer = cfg_or_tokenizer
    prompts = [" ".join(["X"] * context_length) + " " + name.replace("_", " ") + "." for name in classnames]
    tokens = tokenizer(prompts)
    longest = max(prompts, key=lambda p: len(tokenizer.encode(p)))
    if len(tokenizer.encode(longest)) + 2 > tokens.shape[1]:  # with the start and end tokens
        raise ValueError(
            f"S-Prompts: the prompt {longest!r} takes {len(tokenizer.encode(longest)) + 2} tokens, the text tower "
            f"reads {tokens.shape[1]}: lower the option context_length ({context_length})"
        )
    return tokens


def context_text_features(model, tokens: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
    """L2-normalised text features of ``tokens`` with the learned ``context`` in place of the
    embeddings of tokens 1..n (after the start token, as CoOp's ``class_token_position 'end'``)."""
    n = len(context)

    def insert(module, args, output):
        return torch.cat([output[:, :1], context.to(output.dtype).expand(len(output), -1, -1), output[:, 1 + n :]], 1)

    handle = model.token_embedding.register_forward_hook(insert)
    try:
        return F.normalize(model.encode_text(tokens).float(), dim=-1)
    finally:
        handle.remove()


@torch.no_grad()
def domain_features(ctx) -> torch.Tensor:
    """(N, D) the frozen model's L2-normalised image features (no prompts) of one epoch of the
    task's training batches, as training draws them."""
    model = ctx.model
    was_training = model.training
    model.eval()
    try:
        batches = itertools.islice(ctx.task_batches(), ctx.steps_per_epoch)
        return torch.cat([ctx.forward(model, b)["image_features"].float() for b in batches])
    finally:
        model.train(was_training)


def load_domains(state: dict | None, learned: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(image prompts, context, centroids) of the ``learned`` domains of a stored state."""
    if not learned:
        return []
    if state is None:
        raise ValueError(f"S-Prompts: the stored state of task {learned} is missing; rerun its training")
    stored = sum(1 for k in state if k.startswith("image."))
    if stored != learned:
        raise ValueError(f"S-Prompts: the stored state holds {stored} domains, expected {learned}: rerun its training")
    return [(state[f"image.{k}"], state[f"context.{k}"], state[f"centroids.{k}"]) for k in range(learned)]


def domain_state(domains) -> dict[str, torch.Tensor]:
    state = {}
    for k, (image, context, centroids) in enumerate(domains):
        state |= {f"image.{k}": image, f"context.{k}": context, f"centroids.{k}": centroids}
    return {k: v.detach().float().cpu().contiguous() for k, v in state.items()}


@torch.no_grad()
def sprompts_row(cfg: dict, method: str, options, seed: int, i: int, js: list[int], device, state: dict):
    """Yield the cells A[i, j] after task i (``state``), each image classified with the prompts of
    the domain its frozen feature's nearest centroid belongs to."""
    from codyra.clip.model import pretrained_clip
    from codyra.clip.streams import build_tasks

    started = time.time()
    domains = load_domains(state, i)
    bundle = pretrained_clip(cfg)
    model = bundle.model.to(device).eval()
    insertion = PromptInsertion(model.visual)
    images_of = torch.stack([image for image, _, _ in domains]).to(device)
    centroids = [c.to(device) for _, _, c in domains]
    tasks = build_tasks(cfg, bundle.image)
    ev = cfg["eval"]

    def embed(images, prompts):
        insertion.prompts = prompts
        with autocast(device, ev["precision"]):
            return F.normalize(model.encode_image(images).float(), dim=-1)

    def classify(j, space):
        tokens = tokenize_classes(bundle.tokenizer, [name for _, name in space.entries], options.context_length)
        texts = {}  # domain -> the label space's class features with its context

        def predict(images):
            chosen = select_domains(embed(images, None), centroids)
            features = embed(images, images_of[chosen])
            predicted = torch.empty(len(images), dtype=torch.long)
            for k in chosen.unique().tolist():
                if k not in texts:
                    with autocast(device, ev["precision"]):
                        texts[k] = context_text_features(model, tokens.to(device), domains[k][1].to(device))
                rows = chosen == k
                predicted[rows.cpu()] = (features[rows] @ texts[k].T).argmax(dim=-1).cpu()
            return predicted, chosen

        return predict

    yield from routed_cells(cfg, method, seed, i, js, tasks, device, ROUTER, classify, started)
    insertion.remove()
