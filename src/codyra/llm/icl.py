"""FIX(ICL): the frozen language model prompted with in-context examples, as TRACE runs it
(BeyonderXX/TRACE ``inference/ICL.py`` and ``utils/data/data_collator.py``, ``scripts/ICL.sh``).

- Demonstrations: drawn once per task, uniformly at random with replacement tries, from the
  task's inference (test) set; a candidate is kept when its prompt (task instruction
  stripped) and answer together take at most limit / (2 * count) tokens and its answer
  differs from those kept; at most 10,000 draws. limit = max_prompt_len minus the tokens of
  the instruction and TRACE's "Following the above examples ..." line (that line is counted
  but, in the collator that builds the prompts, never inserted). count = 6 (ICL.sh).
- Prompt: instruction + sum(demo prompt + demo answer + "\\n\\n") + the test prompt without
  its instruction.
"""

from __future__ import annotations

import os
import random

# TRACE's instruction line per task (the prefix every prompt of the task starts with).
TRACE_INSTRUCTIONS = {
    "FOMC": "What is the monetary policy stance for the following text? A. dovish, B. hawkish, C. neutral. Choose one from A, B and C.\n",
    "C-STANCE": "判断以下文本对指定对象的态度，选择一项：A.支持，B.反对，C.中立。输出A，B或者C。\n",
    "ScienceQA": "Choose an answer for the following question and give your reasons. Your output should follow this format:\nAnswer: \nBecause \nNow let's begin!\n\n",
    "NumGLUE-cm": "Solve the following math problem.\nQuestion:\n",
    "NumGLUE-ds": "Solve the following math problem.\nQuestion:\n",
    "MeetingBank": "Write a summary of the following meeting transcripts.\nMeeting transcripts:\n",
    "Py150": "Continue writing the following code.\n",
    "Papyrus-f": "Extract the key words of the following paper according to its title and abstract. Give your answer in French.\n",
}
CONSTRAINED_PROMPT = "Following the above examples to accomplish the task without generate extra examples.\n"
MAX_DRAWS = 10_000


def instruction(task: str, prompts: list[str], known: dict[str, str] = TRACE_INSTRUCTIONS) -> str:
    """The instruction prefix of ``task``: its line in ``known`` (TRACE's) where it has one, else
    the lines every prompt shares (tasks TRACE's table lacks, e.g. 20Minuten, and the mini
    TRACE's tasks, which have TRACE's names but their own instructions: pass ``known={}``).
    Every prompt must start with it: TRACE strips its length blindly, we refuse a mismatch."""
    if not prompts:
        raise ValueError(f"task {task!r} has no prompts")
    if task in known:
        prefix = known[task]
    else:
        common = os.path.commonprefix(prompts)
        prefix = common[: common.rfind("\n") + 1]
    bad = next((p for p in prompts if not p.startswith(prefix)), None)
    if bad is not None:
        raise ValueError(f"task {task!r}: a prompt does not start with its instruction {prefix!r}: {bad[:80]!r}")
    return prefix


def demonstration_budget(max_prompt_len: int, prefix: str, n_tokens) -> int:
    """TRACE's token budget for all demonstrations: the prompt limit minus instruction and constraint line."""
    return max_prompt_len - n_tokens(prefix + CONSTRAINED_PROMPT)


def pick_demonstrations(pool: list[dict], prefix: str, count: int, limit: int, n_tokens, rng: random.Random) -> list[dict]:
    """TRACE's ``get_random_demonstrations``: up to ``count`` records {prompt (instruction
    stripped), answer} whose prompt + answer take <= limit / (2 count) tokens (``n_tokens(text)``,
    the tokenizer's count with special tokens, prompt and answer counted apart), answers distinct."""
    if count < 1:
        raise ValueError(f"the number of demonstrations must be positive, got {count}")
    per_sample = limit / (count * 2)
    chosen, answers = [], set()
    for _ in range(MAX_DRAWS):
        record = pool[rng.randint(0, len(pool) - 1)]
        prompt = record["prompt"][len(prefix) :]
        if n_tokens(prompt) + n_tokens(record["answer"]) <= per_sample and record["answer"] not in answers:
            chosen.append({"prompt": prompt, "answer": record["answer"]})
            answers.add(record["answer"])
            if len(chosen) == count:
                break
    return chosen


def icl_prompt(prompt: str, prefix: str, demonstrations: list[dict]) -> str:
    """The prompt TRACE's collator feeds the model: instruction, demonstrations, the test prompt's body."""
    if not prompt.startswith(prefix):
        raise ValueError(f"prompt does not start with its task instruction {prefix!r}: {prompt[:80]!r}")
    shown = "".join(d["prompt"] + d["answer"] + "\n\n" for d in demonstrations)
    return prefix + shown + prompt[len(prefix) :]
