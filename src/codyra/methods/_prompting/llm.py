"""Prompts prepended to a frozen causal LM's input embeddings (L2P, DualPrompt on TRACE).

A prompt module maps a batch's input embeddings and attention mask to the prefix (B, P, C) put
in front of them (:mod:`codyra.methods._prompting.pools` holds the selection math). Training
(:func:`attach_prompts`): the prompt module as a submodule and hooks on the model itself, so the
engine's forward, backend and loss stay those of every method; the logits of the prefix
positions are dropped, so the family's loss sees the batch's shapes (the prefix labels are the
ignore index in the references, which is the same loss). Inference (:class:`PromptedLM`): a
wrapper whose ``generate`` prepends the prefix once, before decoding (a forward hook would
prepend it again at every cached decoding step), and returns prompt + answer ids like
``generate`` on ids does. Positions count from each row's first real token, prefix included, as
for every LM job here.
"""

from __future__ import annotations

import torch
from torch import nn

from codyra.llm.loss import position_ids
from codyra.methods._prompting.pools import prepend


def _prompted_inputs(model: nn.Module, prompts: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    embeds = model.get_input_embeddings()(input_ids)
    prefix = prompts(embeds, attention_mask)
    embeds, mask, _ = prepend(prefix, embeds, attention_mask)
    return embeds, mask, prefix.shape[1]


class PromptAttachment:
    """The prompts attached to a model for training; ``remove()`` leaves the model as it was."""

    NAME = "codyra_prompts"  # the submodule: the backends checkpoint and optimise it with the model

    def __init__(self, model: nn.Module, prompts: nn.Module):
        if hasattr(model, self.NAME):
            raise ValueError(f"the model already has prompts attached ({self.NAME}): remove them first")
        self.model = model
        model.add_module(self.NAME, prompts)
        length = {}

        def before(module, args, kwargs):
            if args or "input_ids" not in kwargs:
                raise TypeError(
                    "a prompted LM is called with keyword input_ids and attention_mask (as the LM family does)"
                )
            embeds, mask, length["prefix"] = _prompted_inputs(
                module, prompts, kwargs.pop("input_ids"), kwargs["attention_mask"]
            )
            kwargs.update(inputs_embeds=embeds, attention_mask=mask, position_ids=position_ids(mask))
            return args, kwargs

        def after(module, args, kwargs, output):
            output.logits = output.logits[:, length.pop("prefix") :]
            return output

        self.hooks = [
            model.register_forward_pre_hook(before, with_kwargs=True),
            model.register_forward_hook(after, with_kwargs=True),
        ]

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()
        delattr(self.model, self.NAME)


def attach_prompts(model: nn.Module, prompts: nn.Module) -> PromptAttachment:
    """Make every forward of ``model`` on ``input_ids`` run on ``prompts``' prefix + the input
    embeddings, logits returned for the input positions only; ``prompts`` becomes a submodule
    of ``model`` (as in TRACE, ``model.model.prompt``), so its parameters train, checkpoint and
    resume with the model's."""
    return PromptAttachment(model, prompts)


class PromptedLM(nn.Module):
    """theta_i as evaluated: the frozen LM with ``prompts`` prepended to every generation."""

    def __init__(self, model: nn.Module, prompts: nn.Module):
        super().__init__()
        self.model, self.prompts = model, prompts

    @property
    def generation_config(self):
        return self.model.generation_config

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> torch.Tensor:
        embeds, mask, _ = _prompted_inputs(self.model, self.prompts, input_ids, attention_mask)
        # from embeddings alone, a decoder's generate returns the new tokens only
        answer = self.model.generate(inputs_embeds=embeds, attention_mask=mask, **kwargs)
        return torch.cat([input_ids, answer], dim=1)
