"""Insert adapters into a backbone without renaming any backbone parameter.

- ``nn.Linear`` targets: the module is swapped for a ``LoRALinear`` that shares the same
  weight and bias Parameters, so ``c_fc.weight`` keeps its name.
- row blocks of a fused ``nn.Linear`` (BLIP's vision attention ``qkv``: Q, K, V stacked by
  rows): a ``LoRARowBlockLinear`` sharing the weight and bias, each adapter adding to its rows.
- ``nn.MultiheadAttention`` targets (Q, K, V, O): the module is swapped for a
  ``LoRAMultiheadAttention`` that shares ``in_proj_weight``, ``in_proj_bias`` and the
  ``out_proj`` module. It computes attention itself because ``nn.MultiheadAttention``
  reads ``out_proj.weight`` directly: an adapter around ``out_proj`` would never run.

``detach_adapters`` puts the original modules back (after merging).
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn.functional as F
from torch import nn

from codyra.adapters.lora import RankSelectiveLoRA
from codyra.adapters.targets import Target


class LoRALinear(nn.Linear):
    def __init__(self, base: nn.Linear, adapter: RankSelectiveLoRA):
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias
        self.lora = adapter
        self._original = (base,)  # a tuple, so nn.Module does not register it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias) + self.lora(x)

    def original(self) -> nn.Module:
        return self._original[0]


class LoRARowBlockLinear(nn.Linear):
    """A fused ``nn.Linear`` whose row blocks (Q, K, V of one matrix) each may carry an adapter:
    the adapter of rows [start, stop) adds to those output features only."""

    def __init__(self, base: nn.Linear, blocks: list[tuple[tuple[int, int], RankSelectiveLoRA]]):
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias
        self.rows = [rows for rows, _ in blocks]
        self.lora = nn.ModuleList(adapter for _, adapter in blocks)
        self._original = (base,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight, self.bias)
        for (start, stop), adapter in zip(self.rows, self.lora, strict=True):
            y = y + F.pad(adapter(x), (start, self.out_features - stop))
        return y

    def original(self) -> nn.Module:
        return self._original[0]


class LoRAMultiheadAttention(nn.Module):
    """Drop-in for a batch-first or sequence-first ``nn.MultiheadAttention`` (need_weights=False)."""

    def __init__(self, base: nn.MultiheadAttention, adapters: dict[str, RankSelectiveLoRA]):
        super().__init__()
        if not base._qkv_same_embed_dim or base.bias_k is not None or base.add_zero_attn:
            raise ValueError(
                "only nn.MultiheadAttention with a fused in_proj and no bias_k/v or zero-attn is supported"
            )
        self.embed_dim, self.num_heads = base.embed_dim, base.num_heads
        self.batch_first, self.dropout = base.batch_first, base.dropout
        self.in_proj_weight, self.in_proj_bias = base.in_proj_weight, base.in_proj_bias
        self.out_proj = base.out_proj
        self.lora = nn.ModuleDict(adapters)
        self._original = (base,)

    def original(self) -> nn.Module:
        return self._original[0]

    def _project(self, x: torch.Tensor, block: int, kind: str) -> torch.Tensor:
        e = self.embed_dim
        bias = None if self.in_proj_bias is None else self.in_proj_bias[block * e : (block + 1) * e]
        y = F.linear(x, self.in_proj_weight[block * e : (block + 1) * e], bias)
        return y + self.lora[kind](x) if kind in self.lora else y

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        if need_weights:
            raise ValueError("LoRAMultiheadAttention does not return attention weights; call with need_weights=False")
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        batch, q_len, _ = query.shape
        heads, head_dim = self.num_heads, self.embed_dim // self.num_heads

        def split_heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, t.shape[1], heads, head_dim).transpose(1, 2)

        q = split_heads(self._project(query, 0, "q"))
        k = split_heads(self._project(key, 1, "k"))
        v = split_heads(self._project(value, 2, "v"))
        mask = _additive_mask(attn_mask, key_padding_mask, batch, heads, q.dtype)
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal and mask is None,
        )
        out = out.transpose(1, 2).reshape(batch, q_len, self.embed_dim)
        y = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        if "o" in self.lora:
            y = y + self.lora["o"](out)
        if not self.batch_first:
            y = y.transpose(0, 1)
        return y, None


def _additive_mask(attn_mask, key_padding_mask, batch, heads, dtype):
    """Combine nn.MultiheadAttention's masks (bool True = blocked, or additive float) into one."""

    def additive(m):
        return (
            torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill(m, float("-inf"))
            if m.dtype == torch.bool
            else m.to(dtype)
        )

    mask = None
    if attn_mask is not None:
        mask = additive(attn_mask)
        if mask.dim() == 3:  # (batch * heads, L, S) -> (batch, heads, L, S)
            mask = mask.view(batch, heads, *mask.shape[-2:])
    if key_padding_mask is not None:
        pad = additive(key_padding_mask).view(batch, 1, 1, -1)
        mask = pad if mask is None else mask + pad
    return mask


def _parent(model: nn.Module, path: str) -> tuple[nn.Module, str]:
    parent_path, _, child = path.rpartition(".")
    return (model.get_submodule(parent_path) if parent_path else model), child


def target_module_path(target: Target) -> str:
    """The module an adapter attaches to: the attention module for Q/K/V/O, else the Linear."""
    path = target.param.rpartition(".")[0]  # strip ".weight" / ".in_proj_weight"
    if target.param.endswith(".in_proj_weight"):
        return path
    if path.endswith(".out_proj") and target.kind == "o":
        return path.rpartition(".")[0]
    return path


def attach_adapters(model: nn.Module, targets: list[Target], adapters: dict[str, RankSelectiveLoRA]) -> None:
    grouped: dict[str, list[Target]] = defaultdict(list)
    for target in targets:
        grouped[target_module_path(target)].append(target)
    for path, chosen in grouped.items():
        module = model.get_submodule(path)
        if isinstance(module, nn.MultiheadAttention):
            replacement = LoRAMultiheadAttention(module, {t.kind: adapters[t.name] for t in chosen})
        elif isinstance(module, nn.Linear) and all(t.rows is not None for t in chosen):
            replacement = LoRARowBlockLinear(module, [(t.rows, adapters[t.name]) for t in chosen])
        elif isinstance(module, nn.Linear) and len(chosen) == 1:
            replacement = LoRALinear(module, adapters[chosen[0].name])
        else:
            raise TypeError(f"cannot attach an adapter to {path} ({type(module).__name__})")
        parent, child = _parent(model, path)
        setattr(parent, child, replacement)


def detach_adapters(model: nn.Module) -> None:
    patched = [
        (n, m)
        for n, m in model.named_modules()
        if isinstance(m, (LoRALinear, LoRARowBlockLinear, LoRAMultiheadAttention))
    ]
    for path, module in patched:
        parent, child = _parent(model, path)
        setattr(parent, child, module.original())
