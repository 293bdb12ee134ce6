"""SARI (Xu et al., 2016) for text simplification, as HF ``evaluate``'s ``sari`` computes it.

Per sentence and for each n in 1..4, SARI compares the n-grams the prediction keeps, deletes
and adds relative to the source against what the references keep, delete and add:
keep and add are F1 scores, delete is a precision. The sentence score is the mean of the
three averaged over n. Conventions shared with EASSE / HF ``evaluate`` (and so with TRACE,
which calls HF's metric):

- text is lowercased and tokenised with sacreBLEU's ``13a`` tokenizer first;
- source and prediction n-gram counts are multiplied by the number of references, so that
  multi-reference counts are comparable;
- keep recall is the fraction of keepable n-gram *occurrences* kept (the "fixed" recall of
  tensor2tensor, not the per-type ratio of the original script);
- an empty ratio 0/0 counts as 1, so a prediction equal to the references scores 100;
- add operations are counted on n-gram types (sets), keep and delete on counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

MAX_ORDER = 4

# mteval-v13a's punctuation rules (as in sacreBLEU): ASCII symbols other than
# apostrophe, hyphen, period and comma become separate tokens; a period or comma becomes
# one unless it sits between digits (1,000 and 3.5 stay whole); a dash after a digit splits.
_13A_RULES = (
    (re.compile(r"""([!"#$%&()*+/:;<=>?@\[\\\]^_`{|}~])"""), r" \1 "),
    (re.compile(r"([^0-9])([.,])"), r"\1 \2 "),
    (re.compile(r"([.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
)
_13A_ENTITIES = (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"))


def tokenize_13a(text: str) -> str:
    """sacreBLEU's ``13a`` tokenisation; returns the tokens joined by single spaces."""
    text = text.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    for entity, character in _13A_ENTITIES:
        text = text.replace(entity, character)
    text = f" {text} "
    for pattern, replacement in _13A_RULES:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def normalize_for_sari(text: str) -> list[str]:
    """Lowercase, 13a-tokenise and split on single spaces (an empty text is one empty token,
    as in HF's implementation)."""
    return tokenize_13a(text.lower()).split(" ")


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _operation_scores(source, prediction, references) -> tuple[float, float, float]:
    """(keep F1, delete precision, add F1) for one n-gram order."""
    n_refs = len(references)
    reference_counts = Counter(gram for reference in references for gram in reference)
    source_counts = Counter({g: c * n_refs for g, c in Counter(source).items()})
    prediction_counts = Counter({g: c * n_refs for g, c in Counter(prediction).items()})

    kept = source_counts & prediction_counts
    kept_correctly = kept & reference_counts
    keepable = source_counts & reference_counts
    keep_precision = sum(kept_correctly[g] / kept[g] for g in kept) / len(kept) if kept else 1.0
    keep_recall = sum(kept_correctly.values()) / sum(keepable.values()) if keepable else 1.0

    deleted = source_counts - prediction_counts
    deleted_correctly = deleted - reference_counts
    delete_precision = sum(deleted_correctly[g] / deleted[g] for g in deleted) / len(deleted) if deleted else 1.0

    added = set(prediction_counts) - set(source_counts)
    addable = set(reference_counts) - set(source_counts)
    added_correctly = added & addable
    add_precision = len(added_correctly) / len(added) if added else 1.0
    add_recall = len(added_correctly) / len(addable) if addable else 1.0

    return _f1(keep_precision, keep_recall), delete_precision, _f1(add_precision, add_recall)


def sari_sentence(source: str, prediction: str, references: Sequence[str]) -> float:
    """SARI of one prediction in [0, 1] (not scaled), against one or more references."""
    if not references:
        raise ValueError("SARI needs at least one reference")
    source_tokens = normalize_for_sari(source)
    prediction_tokens = normalize_for_sari(prediction)
    reference_tokens = [normalize_for_sari(reference) for reference in references]
    keep = delete = add = 0.0
    for n in range(1, MAX_ORDER + 1):
        k, d, a = _operation_scores(
            _ngrams(source_tokens, n),
            _ngrams(prediction_tokens, n),
            [_ngrams(tokens, n) for tokens in reference_tokens],
        )
        keep, delete, add = keep + k, delete + d, add + a
    return (keep + delete + add) / (3 * MAX_ORDER)
