"""Per-task TRACE metrics, each the mean over samples on a 0-100 scale.

Every metric takes ``(predictions, references)`` (SARI also ``sources``, the full prompts).
Empty predictions, as TRACE (BeyonderXX/TRACE, ``metrics.py``) scores them:

- accuracies and ROUGE-L score an empty or whitespace-only prediction 0 (TRACE skips exactly
  empty ones; a whitespace-only one never equals a TRACE reference either);
- edit similarity scores 0 only an exactly empty prediction or reference after restoring the
  literals; a whitespace-only prediction is scored like any other, as in TRACE;
- SARI has no special case: TRACE passes every prediction to HF's ``sari``, which gives an
  empty prediction up to 66.7 (it keeps nothing and deletes everything).

Two conventions for the accuracies:

- ``accuracy_mode="exact"`` is TRACE's: the raw prediction must equal the reference, and
  ScienceQA compares the raw first characters.
- ``accuracy_mode="prefix"`` is TreeLoRA's: the prediction, stripped of surrounding
  whitespace, must start with the reference (the reference used as given); ScienceQA
  compares the first characters after stripping both.

Overall Performance and the forgetting measures live in :mod:`codyra.evaluation.metrics`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

from codyra.trace.rouge import ROUGE_MODES, rouge_l_sentence
from codyra.trace.sari import sari_sentence

ACCURACY_MODES = ("exact", "prefix")
SIMILARITY_BACKENDS = ("difflib", "levenshtein")

# Metric of each TRACE task, in TRACE's task order.
TRACE_TASK_METRICS = {
    "C-STANCE": "accuracy",
    "FOMC": "accuracy",
    "MeetingBank": "rouge_l",
    "Py150": "edit_similarity",
    "ScienceQA": "first_char_accuracy",
    "NumGLUE-cm": "accuracy",
    "NumGLUE-ds": "accuracy",
    "20Minuten": "sari",
}
TRACE_TASKS = tuple(TRACE_TASK_METRICS)
METRICS = ("accuracy", "first_char_accuracy", "rouge_l", "edit_similarity", "sari")


def _is_empty(text: str) -> bool:
    return not text.strip()


def _mean_percent(scores: Sequence[float]) -> float:
    return 100.0 * sum(scores) / len(scores)


def _check_lengths(predictions: Sequence[str], references: Sequence, sources=None) -> None:
    if not predictions:
        raise ValueError("no predictions to score")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if sources is not None and len(sources) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions but {len(sources)} sources")


def _match_rate(predictions, references, is_match: Callable[[str, str], bool]) -> float:
    _check_lengths(predictions, references)
    return _mean_percent(
        [float(not _is_empty(p) and bool(r) and is_match(p, r)) for p, r in zip(predictions, references, strict=True)]
    )


def exact_match_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """TRACE: correct when the prediction equals the reference, character for character."""
    return _match_rate(predictions, references, lambda p, r: p == r)


def prefix_match_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """TreeLoRA: correct when the stripped prediction starts with the reference."""
    return _match_rate(predictions, references, lambda p, r: p.strip().startswith(r))


def first_char_accuracy(predictions: Sequence[str], references: Sequence[str], strip: bool = False) -> float:
    """ScienceQA: the answer letter is the first character (the reasoning follows it).
    ``strip=False`` is TRACE's raw comparison, ``strip=True`` TreeLoRA's."""

    def same_first_char(prediction: str, reference: str) -> bool:
        if strip:
            prediction, reference = prediction.strip(), reference.strip()
        return bool(reference) and prediction[:1] == reference[:1]

    return _match_rate(predictions, references, same_first_char)


def _check_choice(kind: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {kind} {value!r}; expected one of {tuple(choices)}")


def accuracy(predictions: Sequence[str], references: Sequence[str], mode: str = "exact") -> float:
    """Exact-match (TRACE) or prefix-match (TreeLoRA) accuracy."""
    _check_choice("accuracy mode", mode, ACCURACY_MODES)
    if mode == "exact":
        return exact_match_accuracy(predictions, references)
    return prefix_match_accuracy(predictions, references)


def rouge_l(predictions: Sequence[str], references: Sequence[str], mode: str = "rouge_score") -> float:
    """Mean ROUGE-L F x 100; ``mode`` is ``"rouge_score"`` or ``"trace"`` (see
    :mod:`codyra.trace.rouge`)."""
    _check_lengths(predictions, references)
    return _mean_percent(
        [0.0 if _is_empty(p) else rouge_l_sentence(p, r, mode) for p, r in zip(predictions, references, strict=True)]
    )


def sari(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    sources: Sequence[str],
) -> float:
    """Mean SARI x 100. A reference is one string (TRACE) or a list of alternatives."""
    _check_lengths(predictions, references, sources)
    scores = []
    for prediction, reference, source in zip(predictions, references, sources, strict=True):
        alternatives = [reference] if isinstance(reference, str) else list(reference)
        scores.append(sari_sentence(source, prediction, alternatives))  # empty too, as TRACE
    return _mean_percent(scores)


# Py150 abstracts literals: bare placeholders get a neutral value, and placeholders that
# carry their literal (<STR_LIT:abc>) are replaced by it, in predictions and references.
_BARE_LITERALS = (("<NUM_LIT>", "0"), ("<STR_LIT>", ""), ("<CHAR_LIT>", ""))
_LITERAL_WITH_VALUE = re.compile(r"<(?:STR|NUM|CHAR)_LIT:(.*?)>", re.DOTALL)


def restore_code_literals(code: str) -> str:
    """TRACE's Py150 post-processing of placeholder literals."""
    for placeholder, value in _BARE_LITERALS:
        code = code.replace(placeholder, value)
    return _LITERAL_WITH_VALUE.sub(r"\1", code)


def fuzz_ratio(a: str, b: str, backend: str = "difflib") -> int:
    """fuzzywuzzy's ``fuzz.ratio`` (TRACE's similarity), an integer 0-100: 100 for equal strings,
    0 when one is empty, else ``int(round(100 * ratio))``. Its ratio comes from
    python-Levenshtein when that is installed (``levenshtein``: 2 * LCS / total length, i.e.
    normalised indel similarity) and from difflib's ``SequenceMatcher`` otherwise (``difflib``:
    greedy longest blocks, autojunk on). TRACE's requirements do not install python-Levenshtein,
    so its numbers are difflib's; e.g. ("cbc", "bac") scores 33 with difflib and 67 with Levenshtein.
    """
    _check_choice("similarity backend", backend, SIMILARITY_BACKENDS)
    if a == b:
        return 100
    if not a or not b:
        return 0
    if backend == "difflib":
        ratio = difflib.SequenceMatcher(None, a, b).ratio()
    else:
        from rapidfuzz.distance import Indel

        total = len(a) + len(b)
        ratio = (total - Indel.distance(a, b)) / total  # python-Levenshtein's ratio, same formula
    return round(100 * ratio)  # fuzzywuzzy: int(round(.)), Python rounds half to even


def edit_similarity(predictions: Sequence[str], references: Sequence[str], backend: str = "difflib") -> float:
    """TRACE's Py150 score: the mean of :func:`fuzz_ratio` after restoring literals; an exactly
    empty prediction or reference (after restoration) scores 0."""
    _check_lengths(predictions, references)
    total = 0
    for prediction, reference in zip(predictions, references, strict=True):
        prediction, reference = restore_code_literals(prediction), restore_code_literals(reference)
        if prediction and reference:
            total += fuzz_ratio(prediction, reference, backend)
    return total / len(predictions)


def score(
    metric: str,
    predictions: Sequence[str],
    references: Sequence[str],
    sources: Sequence[str] | None = None,
    accuracy_mode: str = "exact",
    rouge_mode: str = "rouge_score",
    similarity: str = "difflib",
) -> float:
    """Score with a metric named as in :data:`TRACE_TASK_METRICS`."""
    # Checked up front so that a misspelt option fails on every task, not only on its own.
    _check_choice("accuracy mode", accuracy_mode, ACCURACY_MODES)
    _check_choice("ROUGE-L mode", rouge_mode, ROUGE_MODES)
    _check_choice("similarity backend", similarity, SIMILARITY_BACKENDS)
    if metric == "accuracy":
        return accuracy(predictions, references, accuracy_mode)
    if metric == "first_char_accuracy":
        return first_char_accuracy(predictions, references, strip=accuracy_mode == "prefix")
    if metric == "rouge_l":
        return rouge_l(predictions, references, rouge_mode)
    if metric == "edit_similarity":
        return edit_similarity(predictions, references, similarity)
    if metric == "sari":
        if sources is None:
            raise ValueError("SARI needs the sources (the full prompts)")
        return sari(predictions, references, sources)
    raise ValueError(f"unknown metric {metric!r}; expected one of {METRICS}")


def score_task(
    task_name: str,
    predictions: Sequence[str],
    references: Sequence[str],
    sources: Sequence[str] | None = None,
    accuracy_mode: str = "exact",
    rouge_mode: str = "rouge_score",
    similarity: str = "difflib",
) -> float:
    """Score a TRACE (or mini TRACE, which reuses the names) task with its metric, 0-100."""
    _check_choice("TRACE task", task_name, TRACE_TASKS)
    return score(TRACE_TASK_METRICS[task_name], predictions, references, sources, accuracy_mode, rouge_mode, similarity)
