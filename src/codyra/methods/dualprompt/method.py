"""DualPrompt (Wang et al., ECCV 2022): a shared G-prompt and per-task E-prompts in front of a
frozen model, in both families.

- causal LM (the TRACE table): as the TRACE table's runs do it (ZinYY/TreeLoRA
  ``model/Dynamic_network/DualPrompt.py``): input prompts [E_j; G; x], the test task given,
  :mod:`codyra.methods.dualprompt.llm`;
- CLIP (the full-shot MTIL table's DualPrompt-dagger): the original's prefix-tuning on CLIP's
  frozen image encoder, E-prompts chosen by key-query matching (google-research/l2p
  ``configs/cifar100_dualprompt.py``), classified by CLIP's text classifier of the task's
  classes, :mod:`codyra.methods.dualprompt.clip`.

The family part is picked by the model itself (a model with an image encoder gets CLIP's).
Options read by one family only say so; the CLIP configs set the prompt lengths to the
original's (5 and 5), where TreeLoRA's defaults below stand for the LM.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class DualPromptOptions(MethodOptions):
    g_length: int = option(
        2, minimum=1, doc="G-prompt tokens (TreeLoRA main.py args.g_prompt_length = 2; l2p cifar100_dualprompt.py 5)"
    )
    e_length: int = option(
        3,
        minimum=1,
        doc="E-prompt tokens per task (TreeLoRA args.e_prompt_length = 3; l2p cifar100_dualprompt.py length 5)",
    )
    pool_size: int = option(
        10, minimum=1, doc="CLIP only: E-prompts in the pool (l2p cifar100_dualprompt.py prompt_pool_param.pool_size)"
    )
    g_layers: int = option(
        2, minimum=0, doc="CLIP only: G-prefixes in the first this many blocks (cifar100_dualprompt.py [0, 1])"
    )
    e_layers: int = option(
        3, minimum=1, doc="CLIP only: E-prefixes in the next this many blocks (cifar100_dualprompt.py [2, 3, 4])"
    )
    pull_coeff: float = option(
        1.0, minimum=0, doc="CLIP only: weight of the pull constraint (cifar100_dualprompt.py pull_constraint_coeff)"
    )
    shared_prompt_pool: bool = option(
        True,
        doc="CLIP only: before task t trains (t < pool_size), its E-prefix starts as task t-1's trained one "
        "(cifar100_dualprompt.py shared_prompt_pool = True; train_continual.py: 'Transfer previous learned prompt "
        "params to the new prompt'); false: from its initialisation at task 1",
    )
    shared_prompt_key: bool = option(
        False,
        doc="CLIP only: the E-key likewise (cifar100_dualprompt.py shared_prompt_key = False: each key its own)",
    )
    vote_group: int | None = option(
        24,
        minimum=1,
        doc="CLIP only: images per majority vote of the E-prompt (cifar100_dualprompt.py batchwise_prompt = True "
        "over one device's per_device_batch_size 24); null: each image its own",
    )


def family_part(model):
    """DualPrompt's family part for ``model``: CLIP's (prefixes in its image encoder) for a model
    with one, else the causal LM's (prompts before its input embeddings)."""
    if hasattr(model, "visual"):
        from codyra.methods.dualprompt import clip as part
    else:
        from codyra.methods.dualprompt import llm as part
    return part


class DualPrompt(Method):
    kind = "dualprompt"
    families = ("causal_lm", "clip")
    paper_row = "DualPrompt"
    group = "complementation"

    @classmethod
    def daggered(cls, family) -> bool:
        # the paper: DualPrompt† on CLIP (full-shot MTIL, codyra.tex line 923), DualPrompt on TRACE (line 322)
        return family.classifies

    Options = DualPromptOptions

    def setup(self, ctx):
        self.part = family_part(ctx.model)
        return self.part.setup(self, ctx)

    def extra_loss(self, ctx, batch, outputs):
        return self.part.extra_loss(self)

    def finish(self, model):
        return self.part.finish(self, model)

    def state_to_store(self):
        return self.state

    @classmethod
    def for_inference(cls, model, states):
        return family_part(model).prompted(model, states)

    @classmethod
    def for_task(cls, model, states, j):
        return family_part(model).for_task(model, states, j)


METHOD = DualPrompt
