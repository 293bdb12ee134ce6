"""A synthetic mini TRACE: eight small tasks in TRACE's file format, for CPU runs and tests.

Each task borrows the name, answer format and metric of the TRACE task it imitates, so
configs, scoring (:func:`codyra.llm.metrics.score_task`) and tables work unchanged:

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

Answers follow from the prompt by simple rules, and prompts stay short (under 64 tokens of
the mini tokenizer). Trained alone for 150 steps (batch 16, AdamW lr 3e-3), a 2-layer,
64-wide LLaMA nearly solves the FOMC, MeetingBank, Py150 and 20Minuten stand-ins, gets
NumGLUE-cm partly right and stays near chance on ScienceQA: a spread of difficulty, so
forgetting shows. All text is English ASCII (the real 20Minuten is German; the metric
does not care).

Generation is deterministic in the seed: each task draws from its own ``random.Random``
seeded with ``"{seed}:{task}"`` (string seeds are hashed with SHA-512, independent of
``PYTHONHASHSEED``). Prompts are unique across the three splits of a task.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from codyra.llm.data import SPLITS, TraceExample
from codyra.llm.metrics import TRACE_TASKS

DEFAULT_SIZES = {"train": 200, "eval": 50, "test": 50}
_MAX_DRAWS_PER_EXAMPLE = 50  # a template space too small for the sizes fails loudly

_NAMES = ("Anna", "Ben", "Carla", "David", "Emma", "Felix", "Greta", "Hugo")
_ITEMS = ("apples", "books", "coins", "pencils", "stamps", "marbles")
_LETTERS = "ABC"


def _c_stance(rng: random.Random) -> TraceExample:
    target = rng.choice(
        ("the new stadium", "remote work", "electric cars", "the school reform",
         "public transport", "the tax plan", "city parks", "online voting")
    )
    label = rng.randrange(3)  # A support, B oppose, C neutral: cued by the verb or adjective
    verb, adjective = [
        (("love", "welcome", "need", "admire"), ("great", "helpful", "wonderful", "fair")),
        (("hate", "reject", "fear", "oppose"), ("bad", "harmful", "useless", "unfair")),
        (("discussed", "studied", "mentioned", "reviewed"), ("new", "on the agenda", "in the news", "debated")),
    ][label]
    text = rng.choice((f"we {rng.choice(verb)} {target}.", f"{target} is {rng.choice(adjective)}."))
    speaker = rng.choice(("", "Anna says ", "A user wrote: ", "My neighbor thinks "))
    prompt = (
        "Stance? A. support, B. oppose, C. neutral.\n"
        f"Target: {target}\nText: {speaker}{text}\nAnswer:"
    )
    return TraceExample(prompt, _LETTERS[label])


def _fomc(rng: random.Random) -> TraceExample:
    label = rng.randrange(3)  # A dovish, B hawkish, C neutral
    verb, reason = [
        (("will cut", "may lower", "plans to reduce"), ("to support jobs", "to help growth", "to lift demand")),
        (("will raise", "may increase", "plans to lift"), ("to fight inflation", "to cool prices", "to slow lending")),
        (("will keep", "may hold", "plans to leave"), ("steady", "unchanged", "where they are")),
    ][label]
    subject = rng.choice(("The committee", "Officials", "The board", "Members"))
    when = rng.choice(("next month", "this year", "soon", "in March", "after the meeting"))
    sentence = f"{subject} {rng.choice(verb)} rates {rng.choice(reason)} {when}."
    prompt = (
        "Monetary policy stance? A. dovish, B. hawkish, C. neutral.\n"
        f"Text: {sentence}\nAnswer:"
    )
    return TraceExample(prompt, _LETTERS[label])


def _meetingbank(rng: random.Random) -> TraceExample:
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
    prompt = "Summarize the meeting.\n" + " ".join(notes) + "\nSummary:"
    return TraceExample(prompt, f"Council {decision} {item} for {place} and discussed {topic}.")


def _py150(rng: random.Random) -> TraceExample:
    name = rng.choice(("size", "name", "count", "path", "value", "mode", "level", "color"))
    other = rng.choice(("data", "items", "config", "result", "cache", "table"))
    word = rng.choice(("debug", "ready", "error", "start", "done", "skip"))
    pattern = rng.randrange(3)
    if pattern == 0:  # a setter is followed by its getter
        argument = rng.choice(("value", "new", "x", "arg"))
        code = (
            f"def set_{name} ( self , {argument} ) : <EOL> self . {name} = {argument} <EOL> "
            f"def get_{name} ( self ) : <EOL>"
        )
        line = f"return self . {name}"
    elif pattern == 1:  # a counted loop logs the tag and its index
        index = rng.choice(("i", "j", "k", "n"))
        code = f"tag = <STR_LIT:{word}> <EOL> {other} = <NUM_LIT> <EOL> for {index} in range ( {other} ) : <EOL>"
        line = f"print ( <STR_LIT:{word}> , {index} )"
    else:  # what is loaded under a key is saved back
        code = f"import {name} <EOL> {other} = {name} . load ( <STR_LIT:{word}> ) <EOL>"
        line = f"{other} . save ( <STR_LIT> , <NUM_LIT> )"
    # Real Py150 prompts contain a literal "<s>", which tokenizers read as BOS; so do these.
    return TraceExample(f"Continue the code.\n<s> {code} ", line)


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


def _numglue_cm(rng: random.Random) -> TraceExample:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    question = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
    return TraceExample(f"Solve the math problem.\nQuestion: {question}\nAnswer:", str(a + b))


def _numglue_ds(rng: random.Random) -> TraceExample:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    if rng.random() < 0.5:
        a = rng.randint(5, 18)
        b = rng.randint(1, a - 1)
        question, answer = f"{name} had {a} {item} and gave away {b}. How many {item} are left?", a - b
    else:
        a, b = rng.randint(2, 5), rng.randint(2, 5)
        question, answer = f"{name} has {a} boxes with {b} {item} each. How many {item} in total?", a * b
    return TraceExample(f"Solve the math problem.\nQuestion: {question}\nAnswer:", str(answer))


def _20minuten(rng: random.Random) -> TraceExample:
    subject = rng.choice(("The city", "The school", "The club", "The museum", "The zoo", "The town"))
    plain, fancy = rng.choice(
        (("opens", "officially inaugurates"), ("builds", "is constructing"),
         ("closes", "permanently shuts down"), ("buys", "has acquired"), ("sells", "is disposing of"))
    )
    thing = rng.choice(("a new park", "the old bridge", "a small garden", "the main hall", "a large field"))
    opening = rng.choice(("In a surprising move, ", "According to officials, ", "On Monday, ", ""))
    closing = rng.choice((", which many residents had demanded", ", as reported yesterday", ", after long debates"))
    complex_sentence = f"{opening}{subject.lower() if opening else subject} {fancy} {thing}{closing}."
    prompt = f"Simplify the sentence.\n{complex_sentence}\nSimplified:"
    return TraceExample(prompt, f"{subject} {plain} {thing}.")


_GENERATORS: dict[str, Callable[[random.Random], TraceExample]] = {
    "C-STANCE": _c_stance,
    "FOMC": _fomc,
    "MeetingBank": _meetingbank,
    "Py150": _py150,
    "ScienceQA": _scienceqa,
    "NumGLUE-cm": _numglue_cm,
    "NumGLUE-ds": _numglue_ds,
    "20Minuten": _20minuten,
}
MINI_TRACE_TASKS = TRACE_TASKS


def generate_task(task: str, seed: int, sizes: Mapping[str, int] = DEFAULT_SIZES) -> dict[str, list[TraceExample]]:
    """The splits of one mini task, with prompts unique across splits."""
    if task not in _GENERATORS:
        raise ValueError(f"unknown mini TRACE task {task!r}; expected one of {MINI_TRACE_TASKS}")
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
            example = _GENERATORS[task](rng)
            if example.prompt not in seen:
                seen.add(example.prompt)
                examples.append(example)
        if len(examples) < sizes[split]:
            raise ValueError(f"{task}: could not draw {sizes[split]} distinct {split} prompts; lower the sizes")
        splits[split] = examples
    return splits


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


def write_mini_trace(
    root: str | Path, seed: int, sizes: Mapping[str, int] = DEFAULT_SIZES
) -> list[str]:
    """Write every mini task as ``root/<task>/{train,eval,test}.json``; returns the task
    names in TRACE's order. An existing task folder is replaced."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for task in MINI_TRACE_TASKS:
        _write_task_folder(root / task, generate_task(task, seed, sizes))
    return list(MINI_TRACE_TASKS)
