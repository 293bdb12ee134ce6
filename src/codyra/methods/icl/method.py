"""FIX(ICL): the frozen LM answering with in-context demonstrations, no training, as TreeLoRA's
``scripts/full_grad_methods/FIX.sh`` runs it (``inference/infer_part.py``; the selection and the
prompt formats: :mod:`codyra.methods.icl.llm`).

Every cell A[i, j] is theta_0 shown task j's test prompts with up to ``demonstrations`` examples
of task j's own test split in front (the references draw them from the inference set), in a
prompt of up to ``max_prompt_len`` tokens (FIX.sh 3584, where training and the other methods'
evaluation use 1024), chosen once per (seed, task): the references draw the tasks'
demonstrations one after the other from one seeded global random state; here each task's draw
has its own seed, derive_seed(seed, j), so a cell does not depend on which other cells ran.
TRACE's ICL.py also cuts some tasks' predictions (NumGLUE at the first newline, ScienceQA before
"Question:", MeetingBank before "Meeting transcripts") after decoding only the first generated
token (``gathered_ids[:, max_seq_len]``); TreeLoRA's infer_part.py does not cut, nor do we:
answers are decoded and scored as every other method's.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method
from codyra.methods.icl.llm import FORMATS
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class ICLOptions(MethodOptions):
    demonstrations: int = option(
        6, minimum=1, doc="examples drawn per task (TreeLoRA infer_part.py sets args.demonstrations_num = 6)"
    )
    max_prompt_len: int | None = option(
        None, minimum=1, doc="prompt tokens with the demonstrations (FIX.sh 3584); null: llm.max_prompt_len"
    )
    format: str = option(
        "treelora",
        choices=tuple(FORMATS),
        doc="treelora: TreeLoRA FIX.sh (= TRACE ICL.py at fdbb44a); trace-a451f6d: TRACE ICL.py at a451f6d",
    )


class ICL(Method):
    kind = "icl"
    families = ("causal_lm",)
    paper_row = "FIX(ICL)"
    trains = False
    rewrites_prompts = True
    group = "complementation"  # the paper's TRACE table: model complementation, "no training"
    Options = ICLOptions

    def setup(self, ctx):
        return []

    def finish(self, model):
        from codyra.store.updates import TaskUpdate

        return TaskUpdate("none"), {"trainable_params": 0, "stored_params": 0}

    @classmethod
    def test_prompts(cls, cfg, method, seed, j, examples, tokenizer):
        from codyra.methods.icl.llm import demonstration_prompts

        return demonstration_prompts(cls(cfg["method_configs"][method]).options, cfg, seed, j, examples, tokenizer)

    @classmethod
    def footprint(cls, options, task_index):
        """No training; its rows show prompts of up to ``max_prompt_len`` tokens, demonstrations included."""
        from codyra.methods.base import Footprint

        return Footprint(prompt_tokens=options.max_prompt_len)


METHOD = ICL
