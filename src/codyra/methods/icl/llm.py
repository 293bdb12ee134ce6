"""FIX(ICL): the frozen language model prompted with in-context examples.

Format ``treelora`` (the default), as TreeLoRA's ``scripts/full_grad_methods/FIX.sh`` runs it
(ZinYY/TreeLoRA at 20c2dc2: ``inference/infer_part.py`` ``get_random_demonstrations`` and its
FIX branch, ``utils/data/data_collator.py`` ``DataCollator.decoder_call``, ``inference/ICL.py``
``TASK_PROMT`` and ``Constrained_PROMPT``). TRACE's own ``inference/ICL.py`` at its last commit
(BeyonderXX/TRACE fdbb44a, collator 216f800) builds the same prompts.

- Demonstrations: drawn once per task, uniformly with replacement, from the task's inference
  (test) set; a candidate's prompt loses the first len(instruction) characters (not Py150's,
  which keeps its whole prompt); it is kept when its prompt and answer together take at most
  limit / (2 * count) tokens, limit = max_prompt_len minus the tokens of instruction +
  constraint line, and its answer is new, or, for FOMC and C-STANCE, has been kept fewer than
  count / 3 times (6 demonstrations: each of the three labels up to twice); at most 9,999
  draws. MeetingBank's are drawn and then dropped: it gets none.
- Prompt: instruction + the "We will give you several examples ..." line (not for MeetingBank)
  + sum(["Code:\\n" for Py150] + demo prompt + demo answer + "\\n\\n") + ["Code:\\n" for Py150]
  + the test prompt without its first len(instruction) characters (Py150: the whole prompt).

The references strip len(instruction) characters whatever a prompt starts with, and so do we:
TreeLoRA's instruction strings are shorter than the lines the data release's prompts start
with (its ScienceQA line ends "reasons.\\n\\n" where the prompts go on "reasons. Your output
..."), and Py150's prompts begin "Complete the next line of the following Python code." where
its string says "Continue writing the code.".

Format ``trace-a451f6d``: TRACE's ``inference/ICL.py`` and ``utils/data/data_collator.py`` at
a451f6d (2023-09-17), the version before the above: longer instruction strings, every task
(Py150 and MeetingBank too) treated alike, answers always distinct, and its constraint line
("Following the above examples ...") counted in the budget but never inserted (the collator's
line is commented out).

A task a format's table lacks (the mini TRACE's, which carry TRACE's names but their own
instructions, and 20Minuten in a451f6d's) takes the lines every test prompt shares.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

MAX_DRAWS = 9_999  # get_random_demonstrations: ``round += 1; if round == 10000: break`` before its draw
# infer_part.py get_random_demonstrations: FOMC and C-STANCE keep an answer while it has been
# kept fewer than count / 3 times; every other task, while it has not been kept
REPEATING_TASKS = ("FOMC", "C-STANCE")


@dataclass(frozen=True)
class Format:
    """One reference's way of building FIX(ICL) prompts."""

    instructions: dict[str, str]  # the reference's instruction string per TRACE task
    constraint: str  # the line counted in the demonstrations' token budget
    task_rules: bool  # TreeLoRA's: the constraint line shown, FOMC/C-STANCE repeats, MeetingBank none, Py150 whole


FORMATS = {
    # TreeLoRA inference/ICL.py TASK_PROMT (TRACE's eight tasks; = TRACE inference/ICL.py at fdbb44a)
    "treelora": Format(
        instructions={
            "FOMC": (
                "What is the monetary policy stance for the following text? "
                "A. dovish, B. hawkish, C. neutral. Choose one from A, B and C.\n"
            ),
            "C-STANCE": "判断以下文本对指定对象的态度，选择一项：A.支持，B.反对，C.中立。输出A，B或者C。\n",
            "ScienceQA": "Choose an answer for the following question and give your reasons.\n\n",
            "NumGLUE-cm": "Solve the following math problem.\n",
            "NumGLUE-ds": "Solve the following math problem.\n",
            "MeetingBank": "Write a summary of the following meeting transcripts.\n",
            "Py150": "Continue writing the code.\n",
            "20Minuten": "Provide a simplified version of the following paragraph in German.\n\n",
        },
        constraint="We will give you several examples and you should follow them to accomplish the task.\n Examples:\n",
        task_rules=True,
    ),
    # TRACE inference/ICL.py TASK_PROMT and Constrained_PROMPT at a451f6d
    "trace-a451f6d": Format(
        instructions={
            "FOMC": (
                "What is the monetary policy stance for the following text? "
                "A. dovish, B. hawkish, C. neutral. Choose one from A, B and C.\n"
            ),
            "C-STANCE": "判断以下文本对指定对象的态度，选择一项：A.支持，B.反对，C.中立。输出A，B或者C。\n",
            "ScienceQA": (
                "Choose an answer for the following question and give your reasons. "
                "Your output should follow this format:\nAnswer: \nBecause \nNow let's begin!\n\n"
            ),
            "NumGLUE-cm": "Solve the following math problem.\nQuestion:\n",
            "NumGLUE-ds": "Solve the following math problem.\nQuestion:\n",
            "MeetingBank": "Write a summary of the following meeting transcripts.\nMeeting transcripts:\n",
            "Py150": "Continue writing the following code.\n",
            "Papyrus-f": (
                "Extract the key words of the following paper according to its title and abstract. "
                "Give your answer in French.\n"
            ),
        },
        constraint="Following the above examples to accomplish the task without generate extra examples.\n",
        task_rules=False,
    ),
}
PY150_CODE = "Code:\n"  # data_collator.py: before each Py150 demonstration and before the test prompt


def instruction(task: str, prompts: list[str], known: dict[str, str]) -> str:
    """The instruction of ``task``: its string in ``known`` (a format's table) where it has one,
    else the whole lines every prompt shares."""
    if not prompts:
        raise ValueError(f"task {task!r} has no prompts")
    if task in known:
        return known[task]
    common = os.path.commonprefix(prompts)
    return common[: common.rfind("\n") + 1]


def keeps_instruction(task: str, fmt: Format) -> bool:
    """Py150's prompts keep their instruction in TreeLoRA's format
    (infer_part.py, data_collator.py: ``task != "Py150"``)."""
    return fmt.task_rules and task == "Py150"


def body(prompt: str, prefix: str) -> str:
    """The prompt without its first len(prefix) characters, whatever they are (as the references strip)."""
    return prompt[len(prefix) :]


def demonstration_budget(max_prompt_len: int, prefix: str, fmt: Format, n_tokens) -> int:
    """The token budget for all demonstrations: the prompt limit minus instruction and constraint line."""
    return max_prompt_len - n_tokens(prefix + fmt.constraint)


def pick_demonstrations(
    pool: list[dict], task: str, prefix: str, fmt: Format, count: int, limit: int, n_tokens, rng: random.Random
) -> list[dict]:
    """``get_random_demonstrations``: up to ``count`` records {prompt, answer} drawn from ``pool``
    whose prompt + answer take <= limit / (2 count) tokens (``n_tokens(text)``, the tokenizer's
    count with special tokens, prompt and answer counted apart), each answer kept fewer than
    count / 3 times (FOMC and C-STANCE in TreeLoRA's format) or once (the rest)."""
    if count < 1:
        raise ValueError(f"the number of demonstrations must be positive, got {count}")
    per_sample = limit / (count * 2)
    repeats = count / 3 if fmt.task_rules and task in REPEATING_TASKS else 1
    chosen, answers = [], []
    for _ in range(MAX_DRAWS):
        record = pool[rng.randint(0, len(pool) - 1)]
        prompt = record["prompt"] if keeps_instruction(task, fmt) else body(record["prompt"], prefix)
        if n_tokens(prompt) + n_tokens(record["answer"]) <= per_sample and answers.count(record["answer"]) < repeats:
            chosen.append({"prompt": prompt, "answer": record["answer"]})
            answers.append(record["answer"])
            if len(chosen) == count:
                break
    if fmt.task_rules and task == "MeetingBank":
        return []  # infer_part.py: drawn, then ``demonstrations = []``
    return chosen


def icl_prompt(prompt: str, task: str, prefix: str, fmt: Format, demonstrations: list[dict]) -> str:
    """The prompt the reference's collator feeds the model for one test prompt."""
    code = PY150_CODE if keeps_instruction(task, fmt) else ""
    shown = prefix
    if fmt.task_rules and task != "MeetingBank":
        shown += fmt.constraint
    shown += "".join(code + d["prompt"] + d["answer"] + "\n\n" for d in demonstrations)
    return shown + code + (prompt if keeps_instruction(task, fmt) else body(prompt, prefix))


def demonstration_prompts(options, cfg: dict, seed: int, j: int, examples: list, tokenizer) -> tuple[list[str], int]:
    """(task j's test prompts with the demonstrations in front, the token length they are cut
    to): ``options`` are the method's (:class:`codyra.methods.icl.method.ICLOptions`)."""
    from codyra.llm.model import is_mini
    from codyra.steps.batches import derive_seed

    fmt = FORMATS[options.format]
    task = cfg["tasks"][j - 1]
    max_prompt_len = options.max_prompt_len or cfg["llm"]["max_prompt_len"]
    prompts = [e.prompt for e in examples]
    # the mini TRACE's tasks carry TRACE's names, not its instructions
    prefix = instruction(task, prompts, {} if is_mini(cfg) else fmt.instructions)

    def n_tokens(text: str) -> int:  # the references count with the tokenizer's special tokens
        return len(tokenizer(text)["input_ids"])

    limit = demonstration_budget(max_prompt_len, prefix, fmt, n_tokens)
    pool = [{"prompt": e.prompt, "answer": e.answer} for e in examples]
    rng = random.Random(derive_seed(seed, j))
    shown = pick_demonstrations(pool, task, prefix, fmt, options.demonstrations, limit, n_tokens, rng)
    return [icl_prompt(p, task, prefix, fmt, shown) for p in prompts], max_prompt_len
