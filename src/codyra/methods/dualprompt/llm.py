"""DualPrompt on a frozen causal LM (:mod:`codyra.methods.dualprompt.method`), as the TRACE
table's runs do it (ZinYY/TreeLoRA ``model/Dynamic_network/DualPrompt.py``, ``training/main.py``;
TRACE itself ships no DualPrompt).

That code prompts the input, not the attention layers: a G-prompt shared by every task and
one E-prompt per task of the stream, all created at the start from random token embeddings
(unscaled); the input becomes [E_t; G; x]. Task t trains G and E_t (the LM frozen, TRACE's
weight decay 0 leaves the other E-prompts as they are). Its answers to task j's test set use
E_j: the test task is given, as the reference's evaluation loop passes it (the per-task keys
that code creates are never read, so nothing is selected). So an E-prompt of a task not yet
trained is still its random initial value. Vision DualPrompt's prefix-tuning at layers 0-1
(G) and 2-4 (E) has no counterpart in that code, so it has none here.
"""

from __future__ import annotations

from codyra.methods.base import freeze


def _prefix_module(g_prompt, e_prompt):
    from torch import nn

    from codyra.methods._prompting.pools import dualprompt_prefix

    class DualPromptPrefix(nn.Module):
        def __init__(self):
            super().__init__()
            self.g_prompt, self.e_prompt = nn.Parameter(g_prompt.clone()), nn.Parameter(e_prompt.clone())

        def forward(self, embeds, attention_mask):
            return dualprompt_prefix(self.g_prompt, self.e_prompt, embeds.shape[0])

    return DualPromptPrefix()


def setup(method, ctx):
    from codyra.methods._prompting.llm import attach_prompts
    from codyra.methods._prompting.pools import random_token_prompts

    o = method.options
    freeze(ctx.model)
    if ctx.previous_state is None:  # the reference creates G and every task's E-prompt up front
        embedding = ctx.model.get_input_embeddings().weight.detach().cpu()
        g_prompt = random_token_prompts(embedding, 1, o.g_length, ctx.generator)[0]
        e_prompts = random_token_prompts(embedding, len(ctx.cfg["tasks"]), o.e_length, ctx.generator)
    else:
        g_prompt, e_prompts = _stored(ctx.previous_state)
        if (g_prompt.shape[0], e_prompts.shape[:2]) != (o.g_length, (len(ctx.cfg["tasks"]), o.e_length)):
            raise ValueError(
                f"task {ctx.task_index - 1}'s stored DualPrompt state "
                f"(G {tuple(g_prompt.shape)}, E {tuple(e_prompts.shape)}) does not "
                f"match g_length {o.g_length}, e_length {o.e_length} and {len(ctx.cfg['tasks'])} tasks: "
                "rerun that task"
            )
    method.e_prompts, method.task = e_prompts.clone(), ctx.task_index - 1
    method.prefix = _prefix_module(g_prompt, e_prompts[method.task]).to(ctx.device)
    method.attached = attach_prompts(ctx.model, method.prefix)
    return [{"params": list(method.prefix.parameters()), "weight_decay": ctx.weight_decay}]


def extra_loss(method):
    return None


def finish(method, model):
    from codyra.store.updates import TaskUpdate

    method.attached.remove()
    method.e_prompts[method.task] = method.prefix.e_prompt.detach().cpu()
    method.state = {"g_prompt": method.prefix.g_prompt.detach().cpu().float(), "e_prompts": method.e_prompts.float()}
    g, e = method.prefix.g_prompt.numel(), method.prefix.e_prompt.numel()
    # kept at inference: G and the E-prompts of the tasks learned so far
    return TaskUpdate("none"), {"trainable_params": g + e, "inference_extra_params": g + (method.task + 1) * e}


def prompted(model, states):
    raise ValueError(
        "DualPrompt answers task j with task j's E-prompt (as the TRACE table's runs do): evaluate it per test task"
    )


def for_task(model, states, j):
    from codyra.methods._prompting.llm import PromptedLM

    g_prompt, e_prompts = _stored(states[-1])
    if not 1 <= j <= e_prompts.shape[0]:
        raise ValueError(f"task {j} has no E-prompt: the stored DualPrompt state holds {e_prompts.shape[0]}")
    return PromptedLM(model, _prefix_module(g_prompt, e_prompts[j - 1]))


def _stored(state):
    """(G-prompt, E-prompts) of a stored DualPrompt task state, checked."""
    if state is None or set(state) != {"g_prompt", "e_prompts"}:
        raise ValueError(
            f"a DualPrompt task state holds g_prompt and e_prompts, got {sorted(state or {})}: "
            "rerun the task's training job"
        )
    g_prompt, e_prompts = state["g_prompt"], state["e_prompts"]
    if g_prompt.dim() != 2 or e_prompts.dim() != 3 or g_prompt.shape[1] != e_prompts.shape[2]:
        raise ValueError(
            f"corrupt DualPrompt state: G {tuple(g_prompt.shape)}, E {tuple(e_prompts.shape)}: "
            "rerun the task's training job"
        )
    return g_prompt, e_prompts
