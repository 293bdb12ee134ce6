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

``fuse_adapters(model, True)`` switches every wrapper to fewer, larger kernels: the base product
and the low-rank one accumulate in one ``addmm`` (the gate and scale folded into B), and in
self-attention Q, K and V take one product against the stacked A's and one batched product
against the stacked B's. The sums then round in another order, so an fp32 run's numbers change
in their last bits (the whole input gradient is one product over Q, K, V and the adapters instead
of autograd's sum of six): the training loop fuses only where the precision already departs from
fp32 (bf16 and tf32 on a GPU, :func:`codyra.device.fuses_adapters`), and fp32 keeps the unfused
arithmetic of the released code.
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn.functional as F
from torch import nn

from codyra.adapters.lora import RankSelectiveLoRA, cast_to, gated_B
from codyra.adapters.targets import Target


class LoRALinear(nn.Linear):
    def __init__(self, base: nn.Linear, adapter: RankSelectiveLoRA):
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias
        self.lora = adapter
        self.fused = False
        self._original = (base,)  # a tuple, so nn.Module does not register it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused and self.lora.fusable:
            return _fused_linear(x, self.weight, self.bias, self.lora)
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
        # the fused forward needs the blocks to tile the rows in order, each as wide as the others
        width = self.out_features // len(blocks)
        self.tiled = self.rows == [(i * width, (i + 1) * width) for i in range(len(blocks))]
        self.fused = False
        self._original = (base,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused and self.tiled and _stackable(self.lora):
            blocks = _fused_row_blocks(x, self.weight, self.bias, list(self.lora))
            return torch.stack(blocks, dim=-2).flatten(-2)
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
        self.fused = False
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
        self_attention = query is key is value  # before the transposes below make three views
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        batch, q_len, _ = query.shape
        heads, head_dim = self.num_heads, self.embed_dim // self.num_heads

        def split_heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, t.shape[1], heads, head_dim).transpose(1, 2)

        qkv = [self.lora[kind] for kind in "qkv" if kind in self.lora]
        if self.fused and self_attention and len(qkv) == 3 and _stackable(qkv):
            q, k, v = (split_heads(t) for t in _fused_row_blocks(query, self.in_proj_weight, self.in_proj_bias, qkv))
        else:
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
        if self.fused and "o" in self.lora and self.lora["o"].fusable:
            y = _fused_linear(out, self.out_proj.weight, self.out_proj.bias, self.lora["o"])
        else:
            y = F.linear(out, self.out_proj.weight, self.out_proj.bias)
            if "o" in self.lora:
                y = y + self.lora["o"](out)
        if not self.batch_first:
            y = y.transpose(0, 1)
        return y, None


def _fused_linear(x: torch.Tensor, weight, bias, adapter: RankSelectiveLoRA) -> torch.Tensor:
    """x W^T + b + (x A^T) (B diag(w * scale))^T with the low-rank product accumulated into the
    base output in place by one addmm (the base product's backward does not read its output)."""
    flat = x.reshape(-1, x.shape[-1])
    y = F.linear(flat, weight, bias)
    h = F.linear(flat, cast_to(adapter.A, flat.dtype))
    y.addmm_(h, cast_to(gated_B(adapter.B, adapter, adapter.w), h.dtype).t())
    return y.view(*x.shape[:-1], y.shape[-1])


def _stackable(adapters) -> bool:
    """Whether the adapters' products can be stacked: one shape, gating and scale."""
    shapes = {(a.rank, a.in_features, a.out_features, a.gated, a.scale) for a in adapters}
    return all(a.fusable for a in adapters) and len(shapes) == 1


def _fused_row_blocks(x: torch.Tensor, weight, bias, adapters: list[RankSelectiveLoRA]) -> list[torch.Tensor]:
    """The row blocks of ``x W^T + b`` (Q, K, V of a fused projection), each with its adapter's
    low-rank term: one product against the stacked A's, one batched product against the stacked
    B's that adds into the base output, whatever the number of blocks."""
    blocks, rank = len(adapters), adapters[0].rank
    flat = x.reshape(-1, x.shape[-1])
    tokens = flat.shape[0]
    y = F.linear(flat, weight, bias).view(tokens, blocks, -1).transpose(0, 1)  # (blocks, tokens, rows)
    h = F.linear(flat, cast_to(torch.cat([a.A for a in adapters]), flat.dtype)).view(tokens, blocks, rank)
    h = h.transpose(0, 1)
    gates = torch.stack([a.w for a in adapters]).unsqueeze(1) if adapters[0].gated else None
    B = gated_B(torch.stack([a.B for a in adapters]), adapters[0], gates)
    # not in place: y is a strided view, and autograd would copy it back and forth for that
    out = LowRankAdd.apply(y, h, cast_to(B, h.dtype))  # B: (blocks, rows, rank)
    return [block.view(*x.shape[:-1], -1) for block in out.unbind(0)]


class LowRankAdd(torch.autograd.Function):
    """``y + h B^T`` for each block (``torch.baddbmm``), with B's gradient computed as ``g^T h``.

    bmm's own backward computes the second factor's gradient as ``h^T g``, in the layout of B^T:
    each stacked B would receive a transposed view, which AccumulateGrad copies into B's layout,
    one kernel per B (outside the graphs when the step is replayed as CUDA graphs). ``g^T h`` is
    the same products in B's own layout, so every B takes its gradient as it comes."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, h: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(h, B)
        return torch.baddbmm(y, h, B.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        h, B = ctx.saved_tensors
        return (
            grad if ctx.needs_input_grad[0] else None,
            torch.bmm(grad, B) if ctx.needs_input_grad[1] else None,
            torch.bmm(grad.transpose(1, 2), h) if ctx.needs_input_grad[2] else None,
        )


def fuse_adapters(model: nn.Module, enabled: bool) -> None:
    """Switch every adapter wrapper of ``model`` to the fused forward (module docstring) or back."""
    for module in model.modules():
        if isinstance(module, (LoRALinear, LoRARowBlockLinear, LoRAMultiheadAttention)):
            module.fused = enabled


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
