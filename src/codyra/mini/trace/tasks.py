"""A synthetic mini TRACE: eight small tasks in TRACE's file format, and the general text a
tiny LM is pretrained on, for CPU runs and tests.

Each task borrows the name, answer format and metric of the TRACE task it imitates, so
configs, scoring (:func:`codyra.trace.metrics.score_task`) and tables work unchanged:

===========  ==============================================  ========================
task         what the model must do                          metric
===========  ==============================================  ========================
C-STANCE     stance of a sentence toward a target: A/B/C     accuracy
FOMC         monetary-policy stance of a sentence: A/B/C     accuracy
MeetingBank  one-sentence summary of three-sentence notes    ROUGE-L
Py150        next line of placeholder-abstracted code        edit similarity
ScienceQA    pick an option, then "Because ..."              first-character accuracy
NumGLUE-cm   one-step addition word problem                  accuracy
NumGLUE-ds   subtraction or multiplication word problem      accuracy
20Minuten    drop the embellishments of a sentence           SARI
===========  ==============================================  ========================

The pretraining corpus (:func:`general_corpus`) is plain text about the same world, one
kind of document per task (opinions whose words agree in polarity, policy news, council
notes, statements of code in the same abstracted style but in random order, facts about
animals and plants, arithmetic and stories that end with their outcome, long and short news
sentences), and 30 % instructions of 13 other tasks (:data:`OTHER_INSTRUCTIONS`: repeat a
sentence, compute, true or false, which option is a number, copy code, ...) answered in the
benchmark's answer formats after one of three shared cues, so the format an answer takes
depends on the instruction, not on the cue. It holds every word and answer token the tasks
need, so a small adapter learns a task in tens of steps, but never a task's instruction,
field labels, answer cue or mapping: how the code continues, what a summary or a
simplification looks like, which letter answers which question. So the pretrained model
knows the language and fails every task. The stance tasks end with TRACE's cue "Stance:",
the others with the mini's "Answer:", "Summary:", "Simplified:" or Py150's "<EOL>"; the
tokenizer keeps a word and its colon together (:mod:`codyra.mini.trace.tokenizer`), so a
prompt's last token names its cue.

Generation is deterministic in the seed: each task draws from its own ``random.Random``
seeded with ``"{seed}:{task}"`` (string seeds are hashed with SHA-512, independent of
``PYTHONHASHSEED``), the corpus from ``"{seed}:corpus:{task}"``. Prompts are unique across
the three splits of a task. All text is English ASCII (the real 20Minuten is German; the
metric does not care).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from codyra.trace.data import SPLITS, TraceExample
from codyra.trace.metrics import TRACE_TASKS

DEFAULT_SIZES = {"train": 200, "eval": 50, "test": 50}
_MAX_DRAWS_PER_EXAMPLE = 50  # a template space too small for the sizes fails loudly

_LETTERS = "ABC"
_NAMES = ("Anna", "Ben", "Carla", "David", "Emma", "Felix", "Greta", "Hugo")
_ITEMS = ("apples", "books", "coins", "pencils", "stamps", "marbles")


def _lines(rng: random.Random, make: Callable[[], str], low: int = 2, high: int = 4) -> str:
    return "\n".join(make() for _ in range(rng.randint(low, high)))


# C-STANCE: the verb or adjective of a sentence cues its stance (support, oppose, neutral).
_STANCE_TARGETS = (
    "the new stadium",
    "remote work",
    "electric cars",
    "the school reform",
    "public transport",
    "the tax plan",
    "city parks",
    "online voting",
)
_STANCE_WORDS = (
    (("love", "welcome", "need", "admire"), ("great", "helpful", "wonderful", "fair")),
    (("hate", "reject", "fear", "oppose"), ("bad", "harmful", "useless", "unfair")),
    (("discussed", "studied", "mentioned", "reviewed"), ("new", "on the agenda", "in the news", "debated")),
)
_STANCE_CUE = "Stance:"  # TRACE's cue of C-STANCE (in Chinese) and FOMC
_SPEAKERS = ("", "Anna says ", "A user wrote: ", "My neighbor thinks ")


def _opinion(rng: random.Random, target: str, label: int) -> str:
    verbs, adjectives = _STANCE_WORDS[label]
    text = rng.choice((f"we {rng.choice(verbs)} {target}.", f"{target} is {rng.choice(adjectives)}."))
    return rng.choice(_SPEAKERS) + text


def _c_stance(rng: random.Random) -> TraceExample:
    target, label = rng.choice(_STANCE_TARGETS), rng.randrange(3)
    prompt = (
        "Stance? A. support, B. oppose, C. neutral.\n"
        f"Target: {target}\nText: {_opinion(rng, target, label)}\n{_STANCE_CUE}"
    )
    return TraceExample(prompt, _LETTERS[label])


def _opinions_text(rng: random.Random) -> str:
    """Opinions on one target that agree: the corpus ties each cue word to its polarity."""
    target, label = rng.choice(_STANCE_TARGETS), rng.randrange(3)
    return _lines(rng, lambda: _opinion(rng, target, label))


# FOMC: the verb and the reason of a policy sentence cue dovish, hawkish or neutral.
_POLICY_WORDS = (
    (("will cut", "may lower", "plans to reduce"), ("to support jobs", "to help growth", "to lift demand")),
    (("will raise", "may increase", "plans to lift"), ("to fight inflation", "to cool prices", "to slow lending")),
    (("will keep", "may hold", "plans to leave"), ("steady", "unchanged", "where they are")),
)


def _policy(rng: random.Random, label: int) -> str:
    verbs, reasons = _POLICY_WORDS[label]
    subject = rng.choice(("The committee", "Officials", "The board", "Members"))
    when = rng.choice(("next month", "this year", "soon", "in March", "after the meeting"))
    return f"{subject} {rng.choice(verbs)} rates {rng.choice(reasons)} {when}."


def _fomc(rng: random.Random) -> TraceExample:
    label = rng.randrange(3)  # A dovish, B hawkish, C neutral
    prompt = f"Monetary policy stance? A. dovish, B. hawkish, C. neutral.\nText: {_policy(rng, label)}\n{_STANCE_CUE}"
    return TraceExample(prompt, _LETTERS[label])


def _policy_text(rng: random.Random) -> str:
    label = rng.randrange(3)
    return _lines(rng, lambda: _policy(rng, label))


# MeetingBank: the summary names the decision and the topic of shuffled notes.
def _meeting(rng: random.Random) -> tuple[list[str], str]:
    decision = rng.choice(("approved", "rejected", "delayed"))
    item = rng.choice(("new lights", "a bike lane", "more benches", "street repairs", "a new library", "a bus stop"))
    place = rng.choice(("the park", "Main Street", "the harbor", "the old school", "the market"))
    topic = rng.choice(("parking fees", "noise rules", "school buses", "tree planting", "water prices"))
    end = rng.choice(("7 pm", "8 pm", "9 pm", "noon"))
    notes = [
        f"The council {decision} {item} for {place}.",
        f"Members discussed {topic}.",
        f"The meeting ended at {end}.",
    ]
    rng.shuffle(notes)
    return notes, f"Council {decision} {item} for {place} and discussed {topic}."


def _meetingbank(rng: random.Random) -> TraceExample:
    notes, summary = _meeting(rng)
    return TraceExample("Summarize the meeting.\n" + " ".join(notes) + "\nSummary:", summary)


def _meeting_text(rng: random.Random) -> str:
    return "Council meeting\n" + "\n".join(_meeting(rng)[0])


# Py150: the next line follows from the code before it: a getter returns what its setter
# set, a counted loop logs its tag and index, what is loaded under a key is saved back.
_CODE_NAMES = ("size", "name", "count", "path", "value", "mode", "level", "color")
_CODE_OBJECTS = ("data", "items", "config", "result", "cache", "table")
_CODE_WORDS = ("debug", "ready", "error", "start", "done", "skip")
_CODE_INDICES = ("i", "j", "k", "n")
_CODE_ARGUMENTS = ("value", "new", "x", "arg")


def _py150(rng: random.Random) -> TraceExample:
    name, other, word = rng.choice(_CODE_NAMES), rng.choice(_CODE_OBJECTS), rng.choice(_CODE_WORDS)
    pattern = rng.randrange(3)
    if pattern == 0:
        argument = rng.choice(_CODE_ARGUMENTS)
        code = (
            f"def set_{name} ( self , {argument} ) : <EOL> self . {name} = {argument} <EOL> "
            f"def get_{name} ( self ) : <EOL>"
        )
        line = f"return self . {name}"
    elif pattern == 1:
        index = rng.choice(_CODE_INDICES)
        code = f"tag = <STR_LIT:{word}> <EOL> {other} = <NUM_LIT> <EOL> for {index} in range ( {other} ) : <EOL>"
        line = f"print ( <STR_LIT:{word}> , {index} )"
    else:
        code = f"import {name} <EOL> {other} = {name} . load ( <STR_LIT:{word}> ) <EOL>"
        line = f"{other} . save ( <STR_LIT> , <NUM_LIT> )"
    # Real Py150 prompts contain a literal "<s>", which tokenizers read as BOS, and end with
    # "<EOL>" and no space (BeyonderXX/TRACE, LLM-CL_Benchmark/dataset_examples.txt); so do these.
    return TraceExample(f"Continue the code.\n<s> {code}", line)


def _statement(rng: random.Random) -> str:
    """One statement of the tasks' code, its names drawn independently of any context."""
    name, other, word = rng.choice(_CODE_NAMES), rng.choice(_CODE_OBJECTS), rng.choice(_CODE_WORDS)
    index, argument = rng.choice(_CODE_INDICES), rng.choice(_CODE_ARGUMENTS)
    return rng.choice(
        (
            f"def set_{name} ( self , {argument} ) :",
            f"self . {name} = {argument}",
            f"def get_{name} ( self ) :",
            f"return self . {name}",
            f"tag = <STR_LIT:{word}>",
            f"{other} = <NUM_LIT>",
            f"for {index} in range ( {other} ) :",
            f"print ( <STR_LIT:{word}> , {index} )",
            f"import {name}",
            f"{other} = {name} . load ( <STR_LIT:{word}> )",
            f"{other} . save ( <STR_LIT> , <NUM_LIT> )",
        )
    )


def _code_text(rng: random.Random) -> str:
    """Statements in random order: the syntax and words of the code, none of its dependencies."""
    return " <EOL> ".join(_statement(rng) for _ in range(rng.randint(3, 6)))


# ScienceQA: which option has a quality, and the reason.
_SCIENCE_FACTS = {
    "can fly": (("eagles", "bats", "parrots", "owls", "ducks", "crows"), "have wings"),
    "live in water": (("sharks", "whales", "octopuses", "crabs", "dolphins", "eels"), "breathe under water"),
    "are plants": (("oaks", "ferns", "cacti", "roses", "mosses", "tulips"), "grow from seeds"),
    "are insects": (("ants", "beetles", "wasps", "moths", "fleas", "locusts"), "have six legs"),
}


def _scienceqa(rng: random.Random) -> TraceExample:
    quality = rng.choice(sorted(_SCIENCE_FACTS))
    members, reason = _SCIENCE_FACTS[quality]
    answer = rng.choice(members)
    others = [m for q, (ms, _) in sorted(_SCIENCE_FACTS.items()) if q != quality for m in ms]
    options = [answer, *rng.sample(others, 2)]
    rng.shuffle(options)
    letter = _LETTERS[options.index(answer)]
    listed = " ".join(f"{_LETTERS[i]}. {option}" for i, option in enumerate(options))
    prompt = f"Choose an answer and give your reasons.\nQuestion: Which of these {quality}?\nOptions: {listed}\nAnswer:"
    return TraceExample(prompt, f"{letter}\nBecause {answer} {reason}.")


def _science_text(rng: random.Random) -> str:
    """Facts with their reasons, or a lettered list of facts."""
    facts = [
        (member, quality, reason) for quality, (members, reason) in sorted(_SCIENCE_FACTS.items()) for member in members
    ]
    picked = rng.sample(facts, 3)
    if rng.random() < 0.5:
        return "\n".join(f"{_LETTERS[k]}. {m} {q}." for k, (m, q, _) in enumerate(picked))
    return "\n".join(f"{m} {q}.\nBecause {m} {r}." for m, q, r in picked[:2])


# NumGLUE: one-step word problems.
def _numglue_cm(rng: random.Random) -> TraceExample:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(1, 5), rng.randint(1, 4)
    question = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
    return TraceExample(f"Solve the math problem.\nQuestion: {question}\nAnswer:", str(a + b))


def _numglue_ds(rng: random.Random) -> TraceExample:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    if rng.random() < 0.5:
        a = rng.randint(3, 9)
        b = rng.randint(1, a - 1)
        question, answer = f"{name} had {a} {item} and gave away {b}. How many {item} are left?", a - b
    else:
        a, b = rng.randint(2, 4), rng.randint(2, 3)
        question, answer = f"{name} has {a} boxes with {b} {item} each. How many {item} in total?", a * b
    return TraceExample(f"Solve the math problem.\nQuestion: {question}\nAnswer:", str(answer))


def _equation(rng: random.Random) -> tuple[str, int]:
    """A sum, difference or product in the NumGLUE tasks' ranges."""
    op = rng.randrange(3)
    if op == 0:
        a, b = rng.randint(1, 5), rng.randint(1, 4)
        return f"{a}+{b}", a + b
    if op == 1:
        a = rng.randint(3, 9)
        b = rng.randint(1, a - 1)
        return f"{a}-{b}", a - b
    a, b = rng.randint(2, 4), rng.randint(2, 3)
    return f"{a}*{b}", a * b


def _story(rng: random.Random) -> str:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(1, 5), rng.randint(1, 4)
    events = (
        (f"{name} has {a} {item} and gets {b} more.", a + b),
        (f"{name} had {a + b} {item} and gave away {b}.", a),
        (f"{name} has {a % 3 + 2} boxes with {b % 2 + 2} {item} each.", (a % 3 + 2) * (b % 2 + 2)),
    )
    event, outcome = rng.choice(events)
    return f"{event}\nNow {name} has {outcome} {item}."


def _math_text(rng: random.Random) -> str:
    """Arithmetic facts, and stories with quantities that end with the outcome."""
    if rng.random() < 0.5:
        return _story(rng)
    return _lines(rng, lambda: "=".join(map(str, _equation(rng))), 3, 6)


# 20Minuten: the simple sentence keeps subject and object and says the plain verb.
_NEWS_SUBJECTS = ("The city", "The school", "The club", "The museum", "The zoo", "The town")
_NEWS_VERBS = (
    ("opens", "officially inaugurates"),
    ("builds", "is constructing"),
    ("closes", "permanently shuts down"),
    ("buys", "has acquired"),
    ("sells", "is disposing of"),
)
_NEWS_THINGS = ("a new park", "the old bridge", "a small garden", "the main hall", "a large field")


def _complex_news(rng: random.Random, subject: str, fancy: str, thing: str) -> str:
    opening = rng.choice(("In a surprising move, ", "According to officials, ", "On Monday, ", ""))
    closing = rng.choice((", which many residents had demanded", ", as reported yesterday", ", after long debates"))
    return f"{opening}{subject.lower() if opening else subject} {fancy} {thing}{closing}."


def _20minuten(rng: random.Random) -> TraceExample:
    subject, (plain, fancy), thing = rng.choice(_NEWS_SUBJECTS), rng.choice(_NEWS_VERBS), rng.choice(_NEWS_THINGS)
    prompt = f"Simplify the sentence.\n{_complex_news(rng, subject, fancy, thing)}\nSimplified:"
    return TraceExample(prompt, f"{subject} {plain} {thing}.")


def _news_text(rng: random.Random) -> str:
    """Unrelated long and short news sentences: never one event told both ways."""

    def sentence() -> str:
        subject, (plain, fancy), thing = rng.choice(_NEWS_SUBJECTS), rng.choice(_NEWS_VERBS), rng.choice(_NEWS_THINGS)
        return _complex_news(rng, subject, fancy, thing) if rng.random() < 0.5 else f"{subject} {plain} {thing}."

    return _lines(rng, sentence)


def _any_sentence(rng: random.Random) -> str:
    """One sentence of the corpus's worlds (news, policy, opinions, council notes, stories)."""
    return rng.choice((_news_text, _policy_text, _opinions_text, _meeting_text, _story))(rng).split("\n")[-1]


def _options(rng: random.Random, right: str, wrong: list[str]) -> tuple[str, str]:
    """``right`` among two of ``wrong``, lettered: (the listing, the right letter)."""
    options = [right, *rng.sample(wrong, 2)]
    rng.shuffle(options)
    return ", ".join(f"{_LETTERS[k]}. {option}" for k, option in enumerate(options)), _LETTERS[options.index(right)]


# Tasks of the corpus, none of the benchmark's, in the benchmark's answer formats.
OTHER_INSTRUCTIONS = (
    "Repeat the sentence.",
    "Give the last word.",
    "Give the first word.",
    "Count the words.",
    "Compute.",
    "Is it true?",
    "Which one is a number?",
    "Which one is a name?",
    "Copy the code.",
    "Give the last statement.",
    "Give the second sentence.",
    "Is the first number larger?",
    "Which item is it?",
)
_OTHER_CUES = ("Answer:", "Output:", "Result:")


def _other_task(rng: random.Random, kind: int) -> tuple[str, str]:
    """(input, answer) of ``OTHER_INSTRUCTIONS[kind]``: a sentence, a word, a number, yes or
    no, a letter, code."""
    sentence = _any_sentence(rng)
    words = sentence.rstrip(".").split()
    if kind == 0:
        return sentence, sentence
    if kind in (1, 2):
        return sentence, words[-1 if kind == 1 else 0]
    if kind == 3:
        return sentence, str(len(words))
    if kind == 4:
        expression, value = _equation(rng)
        return expression, str(value)
    if kind == 5:
        quality = rng.choice(sorted(_SCIENCE_FACTS))
        member = rng.choice([m for members, _ in _SCIENCE_FACTS.values() for m in members])
        return f"{member} {quality}.", "yes" if member in _SCIENCE_FACTS[quality][0] else "no"
    if kind in (6, 7):
        right, wrong = (str(rng.randint(1, 9)), _NAMES) if kind == 6 else (rng.choice(_NAMES), _ITEMS)
        return _options(rng, right, list(wrong))
    if kind == 8:
        line = _statement(rng)
        return line, line
    if kind == 9:
        statements = [_statement(rng) for _ in range(rng.randint(2, 3))]
        return " <EOL> ".join(statements), statements[-1]
    if kind == 10:
        second = _any_sentence(rng)
        return f"{sentence} {second}", second
    if kind == 11:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return f"{a} {b}", "yes" if a > b else "no"
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    return f"{name} has {rng.randint(1, 9)} {item}.", item


def _instruction_text(rng: random.Random) -> str:
    """An instruction of another task, followed and answered: the same cues precede every
    format (a letter, a number, a word, a sentence, code), so the model learns to read the
    instruction to choose its answer's format, not what the benchmark's instructions ask."""
    kind = rng.randrange(len(OTHER_INSTRUCTIONS))
    given, answer = _other_task(rng, kind)
    return f"{OTHER_INSTRUCTIONS[kind]}\n{given}\n{rng.choice(_OTHER_CUES)}{answer}"


# task -> (example generator, generator of the corpus documents about its world)
_TASKS: dict[str, tuple[Callable[[random.Random], TraceExample], Callable[[random.Random], str]]] = {
    "C-STANCE": (_c_stance, _opinions_text),
    "FOMC": (_fomc, _policy_text),
    "MeetingBank": (_meetingbank, _meeting_text),
    "Py150": (_py150, _code_text),
    "ScienceQA": (_scienceqa, _science_text),
    "NumGLUE-cm": (_numglue_cm, _math_text),
    "NumGLUE-ds": (_numglue_ds, _math_text),
    "20Minuten": (_20minuten, _news_text),
}
MINI_TRACE_TASKS = TRACE_TASKS


def _check_task(task: str) -> None:
    if task not in _TASKS:
        raise ValueError(f"unknown mini TRACE task {task!r}; expected one of {MINI_TRACE_TASKS}")


def generate_task(task: str, seed: int, sizes: Mapping[str, int] = DEFAULT_SIZES) -> dict[str, list[TraceExample]]:
    """The splits of one mini task, with prompts unique across splits."""
    _check_task(task)
    missing = [split for split in SPLITS if split not in sizes]
    if missing:
        raise ValueError(f"sizes lacks {missing}; expected a count for each of {SPLITS}")
    rng = random.Random(f"{seed}:{task}")
    seen: set[str] = set()
    splits = {}
    for split in SPLITS:
        examples = []
        for _ in range(sizes[split] * _MAX_DRAWS_PER_EXAMPLE):
            if len(examples) == sizes[split]:
                break
            example = _TASKS[task][0](rng)
            if example.prompt not in seen:
                seen.add(example.prompt)
                examples.append(example)
        if len(examples) < sizes[split]:
            raise ValueError(f"{task}: could not draw {sizes[split]} distinct {split} prompts; lower the sizes")
        splits[split] = examples
    return splits


_INSTRUCTION_SHARE = 0.3  # of the corpus; the rest is text about the tasks' worlds, in equal parts


def general_corpus(seed: int, size: int) -> list[str]:
    """``size`` pretraining documents: instructions of other tasks, and text about each task's
    world (the NumGLUE tasks share one) in turn; deterministic in ``seed``."""
    worlds = list(dict.fromkeys(document for _, document in _TASKS.values()))
    makers = [(random.Random(f"{seed}:corpus:{k}"), document) for k, document in enumerate(worlds)]
    instructions, pick = random.Random(f"{seed}:corpus:instructions"), random.Random(f"{seed}:corpus")
    documents = []
    for k in range(size):
        rng, document = (
            (instructions, _instruction_text) if pick.random() < _INSTRUCTION_SHARE else makers[k % len(makers)]
        )
        documents.append(document(rng))
    return documents


def _write_task_folder(destination: Path, splits: Mapping[str, list[TraceExample]]) -> None:
    """Write into a sibling temporary folder and rename it into place, so a reader never
    sees a half-written task."""
    # Not tempfile.mkdtemp: its 0700 mode would stick to the renamed folder.
    staging = destination.parent / f".{destination.name}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for split, examples in splits.items():
            records = [{"prompt": e.prompt, "answer": e.answer} for e in examples]
            (staging / f"{split}.json").write_text(
                json.dumps(records, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
            )
        if destination.exists():
            shutil.rmtree(destination)
        os.replace(staging, destination)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def write_mini_trace(root: str | Path, seed: int, sizes: Mapping[str, int] = DEFAULT_SIZES) -> list[str]:
    """Write every mini task as ``root/<task>/{train,eval,test}.json``; returns the task
    names in TRACE's order. An existing task folder is replaced."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for task in MINI_TRACE_TASKS:
        _write_task_folder(root / task, generate_task(task, seed, sizes))
    return list(MINI_TRACE_TASKS)
