"""FIX(ICL)'s prompts, task by task, against strings derived by hand from the references:
TreeLoRA ``inference/infer_part.py`` (``get_random_demonstrations``, the FIX branch of
``main``) and ``utils/data/data_collator.py`` (``decoder_call``), and TRACE's ``inference/ICL.py``
and collator at a451f6d. Tokens are whitespace-separated words; the draws are scripted."""

from __future__ import annotations

import random

import pytest

from codyra.methods.icl import llm as icl

TREE = icl.FORMATS["treelora"]
A451 = icl.FORMATS["trace-a451f6d"]
EXAMPLES_LINE = "We will give you several examples and you should follow them to accomplish the task.\n Examples:\n"
FOMC_LINE = (
    "What is the monetary policy stance for the following text? "
    "A. dovish, B. hawkish, C. neutral. Choose one from A, B and C.\n"
)


def words(text: str) -> int:
    return len(text.split())


class Draws:
    """A random source whose ``randint`` returns the scripted pool indices in turn."""

    def __init__(self, *indices: int):
        self.indices = list(indices)

    def randint(self, low: int, high: int) -> int:
        index = self.indices.pop(0)
        assert low <= index <= high
        return index


def build(task, fmt, pool, test_prompt, count, draws, max_prompt_len=10_000, known=None):
    prefix = icl.instruction(task, [r["prompt"] for r in pool], fmt.instructions if known is None else known)
    limit = icl.demonstration_budget(max_prompt_len, prefix, fmt, words)
    demos = icl.pick_demonstrations(pool, task, prefix, fmt, count, limit, words, draws)
    return icl.icl_prompt(test_prompt, task, prefix, fmt, demos)


def fomc_pool():
    answers = ["A", "A", "A", "B", "C", "B", "C"]
    return [{"prompt": FOMC_LINE + f"Text: t{k}\nStance:", "answer": a} for k, a in enumerate(answers)]


def test_fomc_an_answer_repeats_while_kept_fewer_than_count_over_3_times():
    # draws 0, 1, 2: A, A, then a third A is refused (2 < 6/3 fails); 3..6: B, C, B, C
    shown = build("FOMC", TREE, fomc_pool(), FOMC_LINE + "Text: q\nStance:", 6, Draws(0, 1, 2, 3, 4, 5, 6))
    assert shown == (
        FOMC_LINE
        + EXAMPLES_LINE
        + "Text: t0\nStance:A\n\nText: t1\nStance:A\n\nText: t3\nStance:B\n\n"
        + "Text: t4\nStance:C\n\nText: t5\nStance:B\n\nText: t6\nStance:C\n\n"
        + "Text: q\nStance:"
    )


def test_c_stance_repeats_as_fomc():
    line = "判断以下文本对指定对象的态度，选择一项：A.支持，B.反对，C.中立。输出A，B或者C。\n"
    pool = [{"prompt": line + f"文本：{k}\n态度：", "answer": a} for k, a in enumerate("AABBCC")]
    shown = build("C-STANCE", TREE, pool, line + "文本：q\n态度：", 6, Draws(5, 4, 3, 2, 1, 0))
    assert shown == line + EXAMPLES_LINE + (
        "文本：5\n态度：C\n\n文本：4\n态度：C\n\n文本：3\n态度：B\n\n"
        "文本：2\n态度：B\n\n文本：1\n态度：A\n\n文本：0\n态度：A\n\n"
        "文本：q\n态度："
    )


def test_other_tasks_keep_distinct_answers():
    line = "Solve the following math problem.\n"
    pool = [{"prompt": line + f"Question:\nq{k}?\nAnswer:", "answer": a} for k, a in enumerate("112")]
    # draws 0, 1 (answer 1 again: refused), 2; count 2 reached
    shown = build("NumGLUE-cm", TREE, pool, line + "Question:\nx?\nAnswer:", 2, Draws(0, 1, 2))
    assert (
        shown == line + EXAMPLES_LINE + "Question:\nq0?\nAnswer:1\n\nQuestion:\nq2?\nAnswer:2\n\nQuestion:\nx?\nAnswer:"
    )


def test_meetingbank_gets_no_demonstrations_and_no_examples_line():
    line = "Write a summary of the following meeting transcripts.\n"
    pool = [{"prompt": line + f"Meeting transcripts:\nm{k}\nSummary:", "answer": f"s{k}"} for k in range(3)]
    test = line + "Meeting transcripts:\nhello all\nSummary:"
    assert build("MeetingBank", TREE, pool, test, 2, Draws(0, 1)) == test


def test_py150_keeps_its_whole_prompts_behind_code_lines():
    # the data release's Py150 prompts start with another line than TreeLoRA's "Continue writing the code.\n"
    line = "Complete the next line of the following Python code.\n"
    pool = [{"prompt": line + f"<s> a{k} = 1 <EOL>", "answer": f"b{k} = 2"} for k in range(2)]
    shown = build("Py150", TREE, pool, line + "<s> x = 1 <EOL>", 2, Draws(1, 0))
    assert shown == (
        "Continue writing the code.\n"
        + EXAMPLES_LINE
        + "Code:\nComplete the next line of the following Python code.\n<s> a1 = 1 <EOL>b1 = 2\n\n"
        + "Code:\nComplete the next line of the following Python code.\n<s> a0 = 1 <EOL>b0 = 2\n\n"
        + "Code:\nComplete the next line of the following Python code.\n<s> x = 1 <EOL>"
    )


def test_a_prompt_not_starting_with_the_instruction_loses_its_length_without_an_error():
    # TreeLoRA's ScienceQA string is 68 characters; the data's prompts go on "reasons. Your output ..."
    data_line = (
        "Choose an answer for the following question and give your reasons. Your output should follow this format:\n"
    )
    pool = [{"prompt": data_line + "Question:\nq0\n", "answer": "Answer: A"}]
    shown = build("ScienceQA", TREE, pool, data_line + "Question:\nq1\n", 1, Draws(0))
    body = "our output should follow this format:\n"
    assert shown == (
        "Choose an answer for the following question and give your reasons.\n\n"
        + EXAMPLES_LINE
        + body
        + "Question:\nq0\nAnswer: A\n\n"
        + body
        + "Question:\nq1\n"
    )


def test_the_token_budget_per_demonstration():
    line = "Solve the following math problem.\n"  # 5 words; + the examples line: 21 words
    pool = [{"prompt": line + "a b c", "answer": "1"}, {"prompt": line + "a b c d e", "answer": "2"}]
    # max_prompt_len 37: limit 37 - 21 = 16, per demonstration 16 / (2 * 2) = 4 words
    assert icl.demonstration_budget(37, line, TREE, words) == 16
    demos = icl.pick_demonstrations(
        pool, "NumGLUE-cm", line, TREE, 2, 16, words, Draws(1, 0, *[1] * (icl.MAX_DRAWS - 2))
    )
    assert demos == [{"prompt": "a b c", "answer": "1"}]  # 3 + 1 words fit; 5 + 1 never do
    # the second never fits: the draws stop after 9,999
    assert icl.pick_demonstrations(pool, "NumGLUE-cm", line, TREE, 2, 16, words, random.Random(0)) == [
        {"prompt": "a b c", "answer": "1"}
    ]


def test_trace_a451f6d_treats_every_task_alike():
    # FOMC: distinct answers only, its constraint line counted but never shown
    fomc = build("FOMC", A451, fomc_pool(), FOMC_LINE + "Text: q\nStance:", 3, Draws(0, 1, 2, 3, 4))
    assert fomc == FOMC_LINE + "Text: t0\nStance:A\n\nText: t3\nStance:B\n\nText: t4\nStance:C\n\nText: q\nStance:"
    # Py150: its string (37 characters) stripped from every prompt, no "Code:" lines
    line = "Complete the next line of the following Python code.\n"
    pool = [{"prompt": line + "<s> a <EOL>", "answer": "b"}]
    py = build("Py150", A451, pool, line + "<s> x <EOL>", 1, Draws(0))
    assert (
        py
        == "Continue writing the following code.\n"
        + "ng Python code.\n<s> a <EOL>b\n\n"
        + "ng Python code.\n<s> x <EOL>"
    )
    # MeetingBank: demonstrations like any task
    mline = "Write a summary of the following meeting transcripts.\nMeeting transcripts:\n"
    meeting = build(
        "MeetingBank", A451, [{"prompt": mline + "m0\nSummary:", "answer": "s0"}], mline + "m1\nSummary:", 1, Draws(0)
    )
    assert meeting == mline + "m0\nSummary:s0\n\nm1\nSummary:"


def test_tasks_without_a_string_share_their_prompts_leading_lines():
    # the mini TRACE (its own instructions) and a451f6d's missing 20Minuten
    assert (
        icl.instruction("20Minuten", ["Do it.\nText: a\nAnswer:", "Do it.\nText: b\nAnswer:"], A451.instructions)
        == "Do it.\n"
    )
    assert (
        icl.instruction("20Minuten", ["x"], TREE.instructions)
        == "Provide a simplified version of the following paragraph in German.\n\n"
    )
    with pytest.raises(ValueError, match="has no prompts"):
        icl.instruction("FOMC", [], TREE.instructions)
    with pytest.raises(ValueError, match="must be positive"):
        icl.pick_demonstrations([{"prompt": "p", "answer": "a"}], "FOMC", "", TREE, 0, 10, words, Draws())
