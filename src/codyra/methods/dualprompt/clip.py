"""DualPrompt on CLIP (:mod:`codyra.methods.dualprompt.method`): the original's prefix-tuning on
CLIP's frozen image encoder (google-research/l2p, as ``configs/cifar100_dualprompt.py`` runs it).

A G-prefix (keys and values of ``g_length`` tokens) in each of the first ``g_layers`` blocks,
shared by every task; a pool of ``pool_size`` E-prefixes (``e_length`` tokens) in each of the
next ``e_layers`` blocks, one learnable key per pool entry; all U[0, 0.01) at task 1
(``models/vit.py``, ``models/prompt.py``) and continued task to task; before task t trains, its
E-prefix (and, with ``shared_prompt_key``, its key) starts as task t-1's trained one
(``shared_prompt_pool``: :func:`transfer_previous`). A prefix's keys and values
are concatenated before the block's projected ones (``models/prefix_attention.py``). Training
task t (0-based) uses E-prefix t (``use_prompt_mask``: ``train_continual.py`` masks the choice
to [t * top_k, (t + 1) * top_k), top_k 1; a task beyond the pool selects as inference does);
inference picks each image's E-prefix by the cosine of its query (the frozen encoder's image
embedding, ``embedding_key = "cls"``) to the keys, top-1, then every image of a ``vote_group``
takes its group's most chosen one (``batchwise_prompt``). The image feature is the [CLS]
token's (``vit_classifier = "token"``) through CLIP's ``ln_post`` and projection, classified by
CLIP's text classifier of the task's classes; the loss subtracts ``pull_coeff`` x the pull
constraint of the chosen keys.
"""

from __future__ import annotations

import torch
from torch import nn

from codyra.methods._prompting import pools
from codyra.methods._prompting.clip import Plan, PromptedImages, uniform_init
from codyra.methods.base import freeze


class DualPromptPrefixes(nn.Module):
    """G (g_layers, 2, g_length, width), the E-pool (e_layers, 2, pool, e_length, width) and its
    keys (pool, embed); its call on the frozen image embeddings chooses the batch's E-prefix
    (``task``: the training task's, when it has one) and returns every block's prefix."""

    def __init__(self, g, e, key, vote_group: int | None, task: int | None = None):
        super().__init__()
        self.g, self.e, self.key = nn.Parameter(g.clone()), nn.Parameter(e.clone()), nn.Parameter(key.clone())
        self.vote_group, self.task, self.pull = vote_group, task, None

    def forward(self, query: torch.Tensor) -> Plan:
        q = pools.l2_normalize(query, dim=1)
        k = pools.l2_normalize(self.key.to(q.dtype), dim=1)
        batch = q.shape[0]
        if self.task is None:
            idx = pools.vote(torch.topk(q @ k.T, k=1, dim=1).indices, self.key.shape[0], self.vote_group)
        else:
            idx = torch.full((batch, 1), self.task, dtype=torch.long, device=q.device)
        self.pull = pools.pull_term(q, k, idx)
        prefixes = {i: tuple(self.g[i, part].expand(batch, -1, -1) for part in (0, 1)) for i in range(self.g.shape[0])}
        chosen = self.e[:, :, idx[:, 0]]  # e_layers, 2, B, e_length, width
        for layer in range(self.e.shape[0]):
            prefixes[self.g.shape[0] + layer] = (chosen[layer, 0], chosen[layer, 1])
        return Plan(prefixes=prefixes)


def _blocks(o) -> list[int]:
    return list(range(o.g_layers + o.e_layers))


def setup(method, ctx):
    o = method.options
    freeze(ctx.model)
    visual = ctx.model.visual
    width, depth = visual.transformer.width, len(visual.transformer.resblocks)
    if o.g_layers + o.e_layers > depth:
        raise ValueError(
            f"DualPrompt's g_layers {o.g_layers} + e_layers {o.e_layers} blocks exceed the image encoder's {depth}: "
            "lower them in the method's config"
        )
    shapes = (
        (o.g_layers, 2, o.g_length, width),
        (o.e_layers, 2, o.pool_size, o.e_length, width),
        (o.pool_size, visual.output_dim),
    )
    if ctx.previous_state is None:
        g, e, key = (uniform_init(shape, ctx.generator) for shape in shapes)
    else:
        g, e, key, _ = stored(ctx.previous_state)
        if tuple(tuple(t.shape) for t in (g, e, key)) != shapes:
            raise ValueError(
                f"task {ctx.task_index - 1}'s stored DualPrompt prefixes {[tuple(t.shape) for t in (g, e, key)]} "
                f"do not match the config and model's {list(shapes)}: rerun that task"
            )
    t = ctx.task_index - 1
    e, key = transfer_previous(e, key, t, o.shared_prompt_pool, o.shared_prompt_key)
    task = t if t < o.pool_size else None  # train_continual.py: no mask once (t + 1) * top_k > pool_size
    method.pool = DualPromptPrefixes(g, e, key, o.vote_group, task).to(ctx.device)
    method.attached = PromptedImages(ctx.model, method.pool, prefix_blocks=_blocks(o), pool="token")
    return [{"params": list(method.pool.parameters()), "weight_decay": ctx.weight_decay}]


def transfer_previous(e, key, t: int, prompts: bool, keys: bool):
    """(E-prefix pool, keys) with entry ``t`` (0-based task) a copy of entry t-1, the prompts where
    ``prompts`` and the keys where ``keys``, as google-research/l2p ``train_continual.py`` does before task t
    trains (top_k 1: one entry per task); no copy at task 0 or once entry t is beyond the pool."""
    if t == 0 or t >= key.shape[0]:
        return e, key
    if prompts:
        e = e.clone()
        e[:, :, t] = e[:, :, t - 1]
    if keys:
        key = key.clone()
        key[t] = key[t - 1]
    return e, key


def extra_loss(method):
    return -method.options.pull_coeff * method.pool.pull


def finish(method, model):
    from codyra.store.updates import TaskUpdate

    method.attached.remove()
    pool = method.pool
    method.state = {
        "g_prefix": pool.g.detach().cpu().float(),
        "e_prefix": pool.e.detach().cpu().float(),
        "e_keys": pool.key.detach().cpu().float(),
        "selection": torch.tensor([method.options.vote_group or 0]),
    }
    params = sum(p.numel() for p in pool.parameters())
    return TaskUpdate("none"), {"trainable_params": params, "inference_extra_params": params}


def prompted(model, states):
    """theta_i as evaluated: the frozen CLIP whose image encoder chooses its E-prefix by key-query matching."""
    g, e, key, vote_group = stored(states[-1])
    prefixes = DualPromptPrefixes(g, e, key, vote_group)
    PromptedImages(model, prefixes, prefix_blocks=range(g.shape[0] + e.shape[0]), pool="token")
    return model


def for_task(model, states, j):
    """CLIP's DualPrompt is evaluated task-agnostic (the MTIL table's protocol): the test task is not used."""
    return prompted(model, states)


def stored(state):
    """(G-prefix, E-prefix pool, E-keys, vote group or None) of a stored CLIP DualPrompt task state, checked."""
    if state is None or set(state) != {"g_prefix", "e_prefix", "e_keys", "selection"}:
        raise ValueError(
            f"a CLIP DualPrompt task state holds g_prefix, e_prefix, e_keys and selection, got {sorted(state or {})}: "
            "rerun the task's training job"
        )
    g, e, key, (group,) = state["g_prefix"], state["e_prefix"], state["e_keys"], state["selection"].tolist()
    if (
        g.dim() != 4
        or e.dim() != 5
        or key.dim() != 2
        or g.shape[1] != 2
        or e.shape[1] != 2
        or e.shape[2] != key.shape[0]
        or g.shape[-1] != e.shape[-1]
        or group < 0
    ):
        raise ValueError(
            f"corrupt CLIP DualPrompt state: G {tuple(g.shape)}, E {tuple(e.shape)}, keys {tuple(key.shape)}: "
            "rerun the task's training job"
        )
    return g, e, key, group or None
