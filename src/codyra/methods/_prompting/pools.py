"""Prompt pools for a frozen language model: L2P's key-query selection and DualPrompt's
placement, as the TRACE-benchmark code runs them.

L2P (BeyonderXX/TRACE ``model/Dynamic_network/L2P.py``):
- pool of ``pool_size`` prompts of ``length`` tokens, each row a random token's embedding
  divided by 100 (``prompt_init: uniform``);
- keys: the mean of each prompt over its tokens, taken once at initialisation (they are
  not parameters and never move);
- query: the mean of the input token embeddings over the whole (left-padded) sequence
  (``embedding_key: mean``; ``max`` and ``mean_max`` = max + 2 mean are its alternatives);
- both L2-normalised as x * rsqrt(max(sum x^2, 1e-12)); cosine similarity; the top-k keys
  per sample (k = 3) select the prompts, concatenated in rank order in front of the input;
- loss: task loss - 0.5 * sum(selected keys . query) / batch ("pull constraint").

DualPrompt (as the TRACE table's runs do it, ZinYY/TreeLoRA
``model/Dynamic_network/DualPrompt.py``): a shared G-prompt and one E-prompt per task, rows
drawn from random token embeddings (not scaled); the input becomes [E; G; x], the prompt
positions attended to and ignored by the loss; the E-prompt of the evaluated task is used
(the per-task keys that code creates are never read).
"""

from __future__ import annotations

import torch

IGNORE_INDEX = -100


def random_token_prompts(
    embedding: torch.Tensor, count: int, length: int, generator: torch.Generator, scale: float = 1.0
) -> torch.Tensor:
    """(count, length, C): rows of randomly drawn token embeddings divided by ``scale`` (L2P: 100, DualPrompt: 1)."""
    tokens = torch.randint(embedding.shape[0], (count, length), generator=generator)
    return embedding.detach()[tokens].clone() / scale


def l2_normalize(x: torch.Tensor, dim: int = -1, epsilon: float = 1e-12) -> torch.Tensor:
    square_sum = x.square().sum(dim=dim, keepdim=True)
    return x * torch.rsqrt(torch.clamp(square_sum, min=epsilon))


def query(inputs_embeds: torch.Tensor, mode: str = "mean") -> torch.Tensor:
    """(B, C) the L2P query of a batch of input embeddings (B, T, C); every position counts, padding included."""
    if mode == "mean":
        return inputs_embeds.mean(dim=1)
    if mode == "max":
        return inputs_embeds.max(dim=1).values
    if mode == "mean_max":
        return inputs_embeds.max(dim=1).values + 2 * inputs_embeds.mean(dim=1)
    raise ValueError(f"unknown L2P embedding_key {mode!r}; choose mean, max or mean_max")


def prompt_keys(pool: torch.Tensor) -> torch.Tensor:
    """(pool_size, C): each prompt's mean over its tokens (L2P's fixed keys)."""
    return pool.detach().mean(dim=1)


def select(query_vectors: torch.Tensor, keys: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(indices (B, top_k) of the most similar keys, best first; pull-constraint term
    sum(selected normalised keys . normalised query) / B)."""
    if not 1 <= top_k <= keys.shape[0]:
        raise ValueError(f"top_k must be in 1..{keys.shape[0]} (the pool size), got {top_k}")
    q = l2_normalize(query_vectors, dim=1)
    k = l2_normalize(keys.to(q.dtype), dim=1)
    idx = torch.topk(q @ k.T, k=top_k, dim=1).indices
    return idx, pull_term(q, k, idx)


def pull_term(q: torch.Tensor, k: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """L2P's pull constraint of normalised queries ``q`` (B, C) and keys ``k`` (pool, C) at the
    chosen indices ``idx`` (B, top_k): sum over samples and choices of key . query, over B."""
    return (k[idx] * q.unsqueeze(1)).sum() / q.shape[0]


def vote(idx: torch.Tensor, pool_size: int, group: int | None) -> torch.Tensor:
    """L2P's ``batchwise_prompt`` (google-research/l2p ``models/prompt.py``): within each run of
    ``group`` consecutive samples (the reference votes over one device's batch), every sample
    takes the ``top_k`` prompts chosen most often in its group, the most chosen first, ties to
    the lower index (``jnp.unique``'s sorted ids, ``lax.top_k``'s order); ``group`` None: each
    sample keeps its own (B, top_k) choice."""
    if group is None:
        return idx
    top_k, out = idx.shape[1], torch.empty_like(idx)
    for start in range(0, idx.shape[0], group):
        counts = torch.bincount(idx[start : start + group].flatten(), minlength=pool_size)
        order = torch.sort(counts, descending=True, stable=True).indices[:top_k]
        out[start : start + group] = order
    return out


def prepend(
    prefix: torch.Tensor, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor | None = None
):
    """Put ``prefix`` (B, P, C) in front of the inputs: attended to, ignored by the loss.

    (L2P fills the prefix labels with ``labels[0][0]``, which TRACE's left-padding collator
    always sets to -100, the ignore index used here.)"""
    batch, length = prefix.shape[:2]
    embeds = torch.cat([prefix.to(inputs_embeds.dtype), inputs_embeds], dim=1)
    mask = torch.cat([attention_mask.new_ones(batch, length), attention_mask], dim=1)
    if labels is None:
        return embeds, mask, None
    return embeds, mask, torch.cat([labels.new_full((batch, length), IGNORE_INDEX), labels], dim=1)


def l2p_prefix(pool: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """(B, top_k * length, C): the selected prompts, concatenated in rank order."""
    chosen = pool[idx]  # B, top_k, length, C
    return chosen.reshape(chosen.shape[0], -1, chosen.shape[-1])


def dualprompt_prefix(g_prompt: torch.Tensor, e_prompt: torch.Tensor, batch: int) -> torch.Tensor:
    """(B, Le + Lg, C): the task's E-prompt, then the shared G-prompt ([E; G; x] once prepended)."""
    return torch.cat([e_prompt, g_prompt]).unsqueeze(0).expand(batch, -1, -1)
