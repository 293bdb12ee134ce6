"""L2P on a frozen causal LM (:mod:`codyra.methods.l2p.method`), as TRACE runs it
(BeyonderXX/TRACE ``model/Dynamic_network/L2P.py``, ``training/main.py``; the TRACE table's runs:
ZinYY/TreeLoRA, the same file).

One prompt pool serves the whole stream: created at task 1 (``pool_size`` prompts of
``length`` random token embeddings / ``init_scale``), with fixed keys (each prompt's mean at
creation); every task trains the pool only (the LM is frozen) with the task loss minus
``pull_coeff`` x the pull constraint (whose gradient reaches the prompts through the keys'
creation graph, as in TRACE, though the keys' values stay fixed). Each sample's query is the mean of its input token
embeddings (``embedding_key``); its top-``top_k`` prompts by cosine go in front of it, in
training and in generation. The selection math is :mod:`codyra.methods._prompting.pools`; the LM
side (hooks, generation) comes through the family seam and :mod:`codyra.methods._prompting.llm`.
Task i's state (pool, keys, and the selection rule: top_k, embedding_key) is stored; task i+1
continues it, theta_i's cells select from it.
"""

from __future__ import annotations

from codyra.methods.base import freeze

QUERIES = ("mean", "max", "mean_max")  # the LM query of the input embeddings (TRACE L2P.py embedding_key)


def prompt_pool(prompt, keys, top_k: int, embedding_key: str):
    import torch
    from torch import nn

    from codyra.methods._prompting import pools as prompts

    class PromptPool(nn.Module):
        """The pool; its forward selects each sample's prompts (the pull term kept for the loss)."""

        def __init__(self):
            super().__init__()
            self.prompt = nn.Parameter(prompt.clone())
            self.register_buffer("keys", keys.clone())
            self.pull = None

        def forward(self, embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            # TRACE takes the keys once as the pool's mean, keeping its graph (hence its backward's
            # retain_graph=True): their values never move, yet the pull term's gradient reaches the
            # prompts through them, d key / d prompt = 1 / length
            means = self.prompt.mean(dim=1)
            keys = self.keys.to(means.dtype) + (means - means.detach())
            idx, self.pull = prompts.select(prompts.query(embeds, embedding_key), keys, top_k)
            return prompts.l2p_prefix(self.prompt, idx)

    return PromptPool()


def setup(method, ctx):
    from codyra.methods._prompting import pools as prompts
    from codyra.methods._prompting.llm import attach_prompts

    o = method.options
    freeze(ctx.model)
    if ctx.previous_state is None:
        embedding = ctx.model.get_input_embeddings().weight.detach().cpu()
        pool = prompts.random_token_prompts(embedding, o.pool_size, o.length, ctx.generator, scale=o.init_scale)
        keys = prompts.prompt_keys(pool)
    else:
        pool, keys, _, _ = _stored(ctx.previous_state)
        if tuple(pool.shape[:2]) != (o.pool_size, o.length):
            raise ValueError(
                f"task {ctx.task_index - 1}'s stored L2P pool is {tuple(pool.shape)}, "
                f"the config asks pool_size {o.pool_size} x length {o.length}: rerun that task"
            )
    method.pool = prompt_pool(pool, keys, o.top_k, o.embedding_key).to(ctx.device)
    method.attached = attach_prompts(ctx.model, method.pool)
    return [{"params": [method.pool.prompt], "weight_decay": ctx.weight_decay}]


def finish(method, model):
    import torch

    from codyra.store.updates import TaskUpdate

    method.attached.remove()
    o = method.options
    method.state = {
        "prompt": method.pool.prompt.detach().cpu().float(),
        "keys": method.pool.keys.cpu().float(),
        "selection": torch.tensor([o.top_k, QUERIES.index(o.embedding_key)]),
    }
    summary = {
        "trainable_params": method.pool.prompt.numel(),
        "inference_extra_params": method.pool.prompt.numel() + method.pool.keys.numel(),
    }
    return TaskUpdate("none"), summary


def prompted(model, state):
    """theta_i as evaluated: the frozen LM generating behind task i's pool."""
    from codyra.methods._prompting.llm import PromptedLM

    return PromptedLM(model, prompt_pool(*_stored(state)))


def _stored(state):
    """(pool, keys, top_k, embedding_key) of a stored L2P task state, checked."""
    if state is None or set(state) != {"prompt", "keys", "selection"}:
        raise ValueError(
            f"an L2P task state holds prompt, keys and selection, got {sorted(state or {})}: "
            "rerun the task's training job"
        )
    pool, keys, (top_k, query) = state["prompt"], state["keys"], state["selection"].tolist()
    if (
        pool.dim() != 3
        or keys.shape != (pool.shape[0], pool.shape[2])
        or not 1 <= top_k <= pool.shape[0]
        or not 0 <= query < len(QUERIES)
    ):
        raise ValueError(
            f"corrupt L2P state: pool {tuple(pool.shape)}, keys {tuple(keys.shape)}, selection {[top_k, query]}: "
            "rerun the task's training job"
        )
    return pool, keys, top_k, QUERIES[query]
