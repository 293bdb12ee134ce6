"""FIX(ICL): the frozen LM answering with in-context demonstrations, no training (TRACE
``inference/ICL.py``, ``scripts/ICL.sh``; the selection and format: :mod:`codyra.llm.icl`).

Every cell A[i, j] is theta_0 shown task j's test prompts with ``demonstrations`` examples of
task j's own test split in front, in a prompt of up to ``max_prompt_len`` tokens (ICL.sh
3584, where training and the other methods' evaluation use 1024) (TRACE draws them from the inference set), chosen once per
(seed, task): TRACE draws the tasks' demonstrations one after the other from one seeded global
random state; here each task's draw has its own seed, derive_seed(seed, j), so a cell does not
depend on which other cells ran. TRACE's ICL.py also cuts some tasks' predictions (NumGLUE at
the first newline, ScienceQA before "Question:", MeetingBank before "Meeting transcripts") after
decoding only the first generated token (``gathered_ids[:, max_seq_len]``); that slip is not
reproduced: answers are decoded and scored as every other method's.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class ICLOptions(MethodOptions):
    demonstrations: int = option(6, minimum=1, doc="examples shown per prompt (TRACE scripts/ICL.sh --demonstrations_num 6)")
    max_prompt_len: int | None = option(None, minimum=1, doc="prompt tokens with the demonstrations (ICL.sh 3584); null: llm.max_prompt_len")


class ICL(Method):
    kind = "icl"
    paper_row = "FIX(ICL)"
    trains = False
    rewrites_prompts = True
    group = "complementation"  # the paper's TRACE table: model complementation, "no training"
    Options = ICLOptions

    def setup(self, ctx):
        return []

    def finish(self, model):
        from codyra.updates import TaskUpdate

        return TaskUpdate("none"), {"trainable_params": 0, "stored_params": 0}

    @classmethod
    def test_prompts(cls, cfg, method, seed, j, examples, tokenizer):
        import random

        from codyra.batches import derive_seed
        from codyra.llm import icl
        from codyra.llm.model import is_mini

        options = cls(cfg["method_configs"][method]).options
        max_prompt_len = options.max_prompt_len or cfg["llm"]["max_prompt_len"]
        prompts = [e.prompt for e in examples]
        # the mini TRACE's tasks carry TRACE's names, not its instructions
        prefix = icl.instruction(cfg["tasks"][j - 1]["name"], prompts, {} if is_mini(cfg) else icl.TRACE_INSTRUCTIONS)

        def n_tokens(text: str) -> int:  # TRACE counts with the tokenizer's special tokens
            return len(tokenizer(text)["input_ids"])

        limit = icl.demonstration_budget(max_prompt_len, prefix, n_tokens)
        pool = [{"prompt": e.prompt, "answer": e.answer} for e in examples]
        shown = icl.pick_demonstrations(pool, prefix, options.demonstrations, limit, n_tokens, random.Random(derive_seed(seed, j)))
        return [icl.icl_prompt(p, prefix, shown) for p in prompts], max_prompt_len


METHOD = ICL
