"""Prompts and attention prefixes in a frozen open_clip CLIP (L2P and DualPrompt on CLIP, DIKI).

Two ways a prompt reaches a transformer block:

- **prefix attention** (:class:`PrefixAttention`, wrapping a block's ``nn.MultiheadAttention``):
  keys and values (B, P, width) given per forward, split into heads as the block's own. Mode
  ``concat`` is prefix-tuning (google-research/l2p ``models/prefix_attention.py``: the prefix
  keys and values are concatenated before the projected ones, one softmax over both: DualPrompt);
  mode ``residual`` is DIKI's residual attention (lloongx/DIKI ``clip/attention.py``: a second
  attention of the same queries over the prefix alone, times a per-sample weight, added to the
  block's own attention before the output projection, so a zero weight or zero values leave the
  frozen model's output as it was). Without a prefix the wrapped module runs as before.
- **input prompts** (L2P's prompt tuning): tokens put in front of the image encoder's tokens
  after its ``ln_pre`` (the input of its first block: the reference prepends them to the
  encoder's input at layer 0, after the position embedding, ``models/vit.py``).

:class:`PromptedImages` attaches both to ``model.visual`` with hooks, so ``model.encode_image``
is the prompted encoder wherever it is called (the training session's forward, the evaluation's
cells): each forward first runs the frozen encoder unprompted (the query: its image embedding,
the reference's ``cls_features`` of the original model), hands it to the prompt module, which
returns this batch's input prompts and per-block prefixes, then runs prompted. The image
feature is the [CLS] token's (``pool: token``) or the mean of the prompt tokens' outputs
(``pool: prompt``, L2P's ``vit_classifier = "prompt"``: the mean of the encoder's normalised
outputs at the prompt positions, ``models/vit.py``), through CLIP's ``ln_post`` and projection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

MODES = ("concat", "residual")
POOLS = ("token", "prompt")


def prefixed_attention(
    mha: nn.MultiheadAttention,
    x: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mode: str,
    weight: torch.Tensor | None = None,
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Self-attention of ``mha`` (batch first) on ``x`` (B, L, width) with prefix ``keys`` and
    ``values`` (B, P, width), or (P, width) for every sample, see the module docstring;
    ``weight`` (B,) or one value for all scales the residual term."""
    if mode not in MODES:
        raise ValueError(f"unknown prefix mode {mode!r}; choose from {', '.join(MODES)}")
    batch, length, width = x.shape
    heads = mha.num_heads
    keys, values = (t.expand(batch, -1, -1) if t.dim() == 2 else t for t in (keys, values))

    def split(t):
        return t.reshape(batch, t.shape[1], heads, width // heads).transpose(1, 2)

    q, k, v = (split(t) for t in F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1))
    pk, pv = split(keys.to(x.dtype)), split(values.to(x.dtype))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        raise TypeError("prefix attention takes an additive (float) attention mask, as open_clip builds")
    if mode == "concat":
        # every position attends to the whole prefix: the mask gets zero columns in front
        mask = None if attn_mask is None else F.pad(attn_mask.to(x.dtype), (keys.shape[1], 0))
        out = F.scaled_dot_product_attention(q, torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2), attn_mask=mask)
    else:
        mask = None if attn_mask is None else attn_mask.to(x.dtype)
        extra = F.scaled_dot_product_attention(q, pk, pv)
        if weight is not None:
            extra = extra * (weight if weight.dim() == 0 else weight.view(batch, 1, 1, 1)).to(x.dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask) + extra
    return mha.out_proj(out.transpose(1, 2).reshape(batch, length, width))


class PrefixAttention(nn.Module):
    """A block's attention with an optional prefix: set ``prefix`` to (keys, values) ((B, P, width)
    or (P, width)) and ``weight`` ((B,), one value, or None: 1) before a forward; ``prefix`` None
    runs the wrapped module itself."""

    def __init__(self, mha: nn.MultiheadAttention, mode: str):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"unknown prefix mode {mode!r}; choose from {', '.join(MODES)}")
        if not mha.batch_first:
            raise ValueError("prefix attention wraps batch-first attention (open_clip's transformers)")
        self.mha, self.mode = mha, mode
        self.prefix: tuple[torch.Tensor, torch.Tensor] | None = None
        self.weight: torch.Tensor | None = None

    def forward(self, query, key, value, need_weights: bool = False, attn_mask=None):
        if self.prefix is None:
            return self.mha(query, key, value, need_weights=need_weights, attn_mask=attn_mask)
        if key is not query or value is not query:
            raise ValueError("prefix attention is self-attention: query, key and value must be the same tensor")
        return prefixed_attention(self.mha, query, *self.prefix, self.mode, self.weight, attn_mask), None


def wrap_attention(blocks, indices, mode: str) -> dict[int, PrefixAttention]:
    """Replace the attention of ``blocks[i]`` for i in ``indices`` by a :class:`PrefixAttention`."""
    if any(not 0 <= i < len(blocks) for i in indices):
        raise ValueError(f"prompted blocks {sorted(indices)} do not exist: the transformer has {len(blocks)} blocks")
    wrapped = {}
    for i in indices:
        wrapped[i] = PrefixAttention(blocks[i].attn, mode)
        blocks[i].attn = wrapped[i]
    return wrapped


def unwrap_attention(blocks, wrapped: dict[int, PrefixAttention]) -> None:
    for i, attention in wrapped.items():
        blocks[i].attn = attention.mha


@dataclass
class Plan:
    """A batch's prompts: ``inputs`` (B, P, width) put in front of the tokens, or None; ``prefixes``
    {block index: (keys, values) (B, P, width)}."""

    inputs: torch.Tensor | None = None
    prefixes: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)


class PromptedImages:
    """``model.encode_image`` prompted by ``prompts``, a module whose call on the frozen image
    embedding (B, embed_dim) returns the batch's :class:`Plan`; ``prefix_blocks``: the vision
    blocks its prefixes may go to; ``pool``: which output becomes the image feature. The module
    becomes the image encoder's submodule ``codyra_prompts`` (its parameters train, checkpoint and
    resume with the model's, and count as the image tower's: the frozen text tower's class
    embeddings are computed once); ``remove()`` leaves the model as it was."""

    NAME = "codyra_prompts"

    def __init__(self, model: nn.Module, prompts: nn.Module, prefix_blocks=(), pool: str = "token"):
        visual = model.visual
        if pool not in POOLS:
            raise ValueError(f"unknown prompt pooling {pool!r}; choose from {', '.join(POOLS)}")
        if getattr(visual, "attn_pool", None) is not None or getattr(visual, "pool_type", None) != "tok":
            raise ValueError("prompting needs a ViT image encoder pooling its [CLS] token (open_clip pool_type 'tok')")
        if hasattr(visual, self.NAME):
            raise ValueError(f"the image encoder already has prompts attached ({self.NAME}): remove them first")
        self.visual, self.pool, self.querying, self.plan, self.prompt_outputs = visual, pool, False, Plan(), None
        visual.add_module(self.NAME, prompts)
        self.blocks = visual.transformer.resblocks
        self.wrapped = wrap_attention(self.blocks, sorted(set(prefix_blocks)), "concat")
        self.hooks = [
            visual.register_forward_pre_hook(self._query),
            visual.register_forward_hook(self._clear),
            visual.transformer.register_forward_pre_hook(self._prepend),
            visual.transformer.register_forward_hook(self._pool),
        ]

    def _query(self, visual, args):
        if self.querying:
            return
        self.querying = True
        try:
            query = visual(*args)  # the frozen encoder: no plan is set
        finally:
            self.querying = False
        self.plan = getattr(visual, self.NAME)(query.float())
        for i, attention in self.wrapped.items():
            attention.prefix = self.plan.prefixes.get(i)

    def _clear(self, visual, args, output):
        if self.plan.inputs is not None and self.pool == "prompt":
            # the reference normalises every output token (encoder_norm), then averages the prompt positions
            output = visual.ln_post(self.prompt_outputs).mean(dim=1) @ visual.proj
        self.plan, self.prompt_outputs = Plan(), None
        for attention in self.wrapped.values():
            attention.prefix = None
        return output

    def _prepend(self, transformer, args):
        if self.plan.inputs is None:
            return args
        x, *rest = args
        return (torch.cat([self.plan.inputs.to(x.dtype), x], dim=1), *rest)

    def _pool(self, transformer, args, output):
        if self.plan.inputs is None:
            return output
        length = self.plan.inputs.shape[1]
        self.prompt_outputs = output[:, :length]  # pool "prompt": the feature, once the encoder returns
        return output[:, length:]  # the encoder's own sequence: [CLS] first, then the patches

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()
        unwrap_attention(self.blocks, self.wrapped)
        delattr(self.visual, self.NAME)


def uniform_init(shape, generator: torch.Generator) -> torch.Tensor:
    """Flax's ``nn.initializers.uniform()`` (scale 0.01): U[0, 0.01), the reference's prompt and
    key initialiser (google-research/l2p ``models/prompt.py``, ``models/vit.py``)."""
    return torch.rand(shape, generator=generator) * 0.01
