"""ROUGE-L F-measure of one prediction, in two conventions.

``"rouge_score"`` (the default) is Google's ``rouge_score`` package's ``rougeL`` with its
default tokenizer: lowercase, every run of characters outside [a-z0-9] becomes a
separator, no stemming; F1 of LCS precision and recall over the whole text.

``"trace"`` reproduces what TRACE's evaluation computes: the ``rouge`` package (pltrdy,
version 1.0.1) called as ``Rouge(metrics=["rouge-l"]).get_scores(reference, prediction)``.
That is a summary-level union-LCS over sentences split on ``"."``, whitespace tokens, case
kept, and (its default ``exclusive=True``) distinct words only: lengths are numbers of
distinct words and the union LCS is a set of words. F = 2PR / (P + R + 1e-8).
"""

from __future__ import annotations

import re

ROUGE_MODES = ("rouge_score", "trace")

_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


def _lcs_table(x: list[str], y: list[str]) -> list[list[int]]:
    table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i, x_token in enumerate(x, start=1):
        row, previous = table[i], table[i - 1]
        for j, y_token in enumerate(y, start=1):
            row[j] = previous[j - 1] + 1 if x_token == y_token else max(previous[j], row[j - 1])
    return table


def _lcs_tokens(x: list[str], y: list[str]) -> list[str]:
    """One longest common subsequence, backtracking as pltrdy's ``rouge`` does: on a tie
    it steps back in ``y``, which decides which words the LCS contains."""
    table = _lcs_table(x, y)
    i, j, tokens = len(x), len(y), []
    while i > 0 and j > 0:
        if x[i - 1] == y[j - 1]:
            tokens.append(x[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return tokens[::-1]


def _rouge_score_tokens(text: str) -> list[str]:
    return _NON_ALPHANUMERIC.sub(" ", text.lower()).split()


def rouge_l_rouge_score(prediction: str, reference: str) -> float:
    """``rouge_score``'s rougeL F-measure in [0, 1]."""
    predicted, expected = _rouge_score_tokens(prediction), _rouge_score_tokens(reference)
    if not predicted or not expected:
        return 0.0
    lcs = _lcs_table(predicted, expected)[-1][-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(predicted), lcs / len(expected)
    return 2 * precision * recall / (precision + recall)


def _trace_sentences(text: str) -> list[list[str]]:
    # A whitespace-only piece becomes one empty word, as in the original package.
    return [" ".join(piece.split()).split(" ") for piece in text.split(".") if piece]


def rouge_l_trace(prediction: str, reference: str) -> float:
    """TRACE's ROUGE-L F in [0, 1] (see the module docstring); texts with no sentence
    (TRACE would crash on them) score 0."""
    # TRACE passes the reference as the package's hypothesis, so the prediction's
    # sentences drive the union (which matters for the LCS tie-breaking).
    predicted, expected = _trace_sentences(prediction), _trace_sentences(reference)
    if not predicted or not expected:
        return 0.0
    union: set[str] = set()
    for predicted_sentence in predicted:
        for expected_sentence in expected:
            union.update(_lcs_tokens(predicted_sentence, expected_sentence))
    distinct_predicted = len({w for sentence in predicted for w in sentence})
    distinct_expected = len({w for sentence in expected for w in sentence})
    recall, precision = len(union) / distinct_predicted, len(union) / distinct_expected
    return 2 * precision * recall / (precision + recall + 1e-8)


def rouge_l_sentence(prediction: str, reference: str, mode: str = "rouge_score") -> float:
    """ROUGE-L F of one prediction in [0, 1] under ``mode`` (see the module docstring)."""
    if mode == "rouge_score":
        return rouge_l_rouge_score(prediction, reference)
    if mode == "trace":
        return rouge_l_trace(prediction, reference)
    raise ValueError(f"unknown ROUGE-L mode {mode!r}; expected one of {ROUGE_MODES}")
