"""L2P on CLIP (:mod:`codyra.methods.l2p.method`): the original's prompt pool on CLIP's frozen
image encoder (google-research/l2p, as ``configs/cifar100_l2p.py`` runs it).

One pool serves the whole stream: ``pool_size`` prompts of ``length`` tokens of the encoder's
width and one learnable key per prompt (``prompt_key = True``, ``prompt_key_init =
"uniform"``), both U[0, 0.01) at task 1 and continued task to task. Each image's query is the
frozen encoder's image embedding (``embedding_key = "cls"``: the original model's
``pre_logits``, here CLIP's projected [CLS]); its ``top_k`` keys by cosine choose the prompts,
then every image of a ``vote_group`` takes its group's most chosen ones (``batchwise_prompt``,
``models/prompt.py``); they are concatenated in that order and put in front of the encoder's
tokens (``e_prompt_layer_idx = [0]``, prompt tuning). The image feature is the mean of the
prompt tokens' outputs (``vit_classifier = "prompt"``) through CLIP's ``ln_post`` and
projection, classified by CLIP's text classifier of the task's classes (the family's loss: the
reference's head with ``train_mask`` over the task's classes becomes the frozen text tower's
class embeddings). The loss subtracts ``pull_coeff`` x the pull constraint (``reduce_sim``,
``train_continual.py``), computed with the voted choice. Inference selects the same way.
"""

from __future__ import annotations

import torch
from torch import nn

from codyra.methods._prompting import pools
from codyra.methods._prompting.clip import Plan, PromptedImages, uniform_init
from codyra.methods.base import freeze

FEATURES = ("prompt", "token")


class ImagePromptPool(nn.Module):
    """The pool and its keys; its call on the frozen image embeddings (B, embed) selects the
    batch's prompts (the pull term kept for the loss)."""

    def __init__(self, prompt: torch.Tensor, key: torch.Tensor, top_k: int, vote_group: int | None):
        super().__init__()
        self.prompt, self.key = nn.Parameter(prompt.clone()), nn.Parameter(key.clone())
        self.top_k, self.vote_group = top_k, vote_group
        self.pull = None

    def forward(self, query: torch.Tensor) -> Plan:
        q = pools.l2_normalize(query, dim=1)
        k = pools.l2_normalize(self.key.to(q.dtype), dim=1)
        idx = pools.vote(torch.topk(q @ k.T, k=self.top_k, dim=1).indices, self.key.shape[0], self.vote_group)
        self.pull = pools.pull_term(q, k, idx)
        return Plan(inputs=pools.l2p_prefix(self.prompt, idx))


def setup(method, ctx):
    o = method.options
    freeze(ctx.model)
    visual = ctx.model.visual
    shapes = ((o.pool_size, o.length, visual.transformer.width), (o.pool_size, visual.output_dim))
    if ctx.previous_state is None:
        prompt, key = (uniform_init(shape, ctx.generator) for shape in shapes)
    else:
        prompt, key, _, _, _ = stored(ctx.previous_state)
        if (tuple(prompt.shape), tuple(key.shape)) != shapes:
            raise ValueError(
                f"task {ctx.task_index - 1}'s stored L2P pool is {tuple(prompt.shape)} with keys {tuple(key.shape)}, "
                f"the config and model ask {shapes[0]} and {shapes[1]}: rerun that task"
            )
    method.pool = ImagePromptPool(prompt, key, o.top_k, o.vote_group).to(ctx.device)
    method.attached = PromptedImages(ctx.model, method.pool, pool=o.image_feature)
    return [{"params": list(method.pool.parameters()), "weight_decay": ctx.weight_decay}]


def finish(method, model):
    from codyra.store.updates import TaskUpdate

    method.attached.remove()
    o, pool = method.options, method.pool
    method.state = {
        "pool": pool.prompt.detach().cpu().float(),
        "keys": pool.key.detach().cpu().float(),
        "selection": torch.tensor([o.top_k, o.vote_group or 0, FEATURES.index(o.image_feature)]),
    }
    params = pool.prompt.numel() + pool.key.numel()
    return TaskUpdate("none"), {"trainable_params": params, "inference_extra_params": params}


def prompted(model, state):
    """theta_i as evaluated: the frozen CLIP whose image encoder selects its prompts from task i's pool."""
    prompt, key, top_k, vote_group, feature = stored(state)
    PromptedImages(model, ImagePromptPool(prompt, key, top_k, vote_group).to(prompt.device), pool=feature)
    return model


def stored(state):
    """(pool, keys, top_k, vote group or None, image feature) of a stored CLIP L2P task state, checked."""
    if state is None or set(state) != {"pool", "keys", "selection"}:
        raise ValueError(
            f"a CLIP L2P task state holds pool, keys and selection, got {sorted(state or {})}: "
            "rerun the task's training job"
        )
    prompt, key, (top_k, group, feature) = state["pool"], state["keys"], state["selection"].tolist()
    if (
        prompt.dim() != 3
        or key.dim() != 2
        or key.shape[0] != prompt.shape[0]
        or not 1 <= top_k <= prompt.shape[0]
        or group < 0
        or not 0 <= feature < len(FEATURES)
    ):
        raise ValueError(
            f"corrupt CLIP L2P state: pool {tuple(prompt.shape)}, keys {tuple(key.shape)}, "
            f"selection {[top_k, group, feature]}: rerun the task's training job"
        )
    return prompt, key, top_k, group or None, FEATURES[feature]
