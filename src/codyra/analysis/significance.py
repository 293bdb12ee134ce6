"""Statistical significance over seeds (paper table "supp_training_stability").

Per metric and method: mean, sample std (ddof 1), the 95 % confidence interval of the mean
(Student t with n - 1 degrees of freedom) and a paired t-test over seeds (same seed = same
pair) against the best other method of the config on that metric (highest mean; lowest for
Forgetting). Undefined with one seed, or when the paired differences are constant.
"""

from __future__ import annotations

import math

import numpy as np

from codyra.analysis.common import PlainTable, fmt
from codyra.evaluation.metrics import summarize

METRICS = {
    "Transfer": "transfer",
    "Average": "average",
    "Last": "last",
    "Forgetting": "forgetting",
    "BWT": "bwt",
    "OP": "op",
}
LOWER_IS_BETTER = {"Forgetting"}


def mean_ci(values) -> tuple[float, float, tuple[float, float] | None]:
    """(mean, sample std, 95 % t-interval of the mean or None for one value)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, 0.0, None
    std = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, len(x) - 1)) * std / math.sqrt(len(x))
    return mean, std, (mean - half, mean + half)


def paired_p(a, b) -> float | None:
    """Two-sided paired t-test p-value of a vs b (None: fewer than 2 pairs or constant differences)."""
    from scipy import stats

    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(d) < 2 or np.allclose(d, d[0]):
        return None
    return float(stats.ttest_rel(a, b).pvalue)


def significance_table(cfg: dict, runs: dict[str, list[dict]]) -> PlainTable:
    """``runs``: method -> per-seed matrix.json (codyra.evaluation.tables.load_runs), seeds in config order."""
    table = PlainTable(
        "significance",
        f"{cfg['benchmark']}: mean, std, 95 % CI over seeds {cfg['seeds']} "
        "and paired t-test against the best other method (paper: supp_training_stability)",
        ["Metric", "Method", "Mean", "Std", "95% CI", "Best other", "Difference", "p (paired t)"],
    )
    summaries = {m: [summarize(x["A"]) for x in matrices] for m, matrices in runs.items()}
    for label, key in METRICS.items():
        values = {m: [s[key] for s in per_seed] for m, per_seed in summaries.items()}
        if any(v is None for vs in values.values() for v in vs):
            continue  # undefined for this benchmark (Forgetting with one task)
        means = {m: float(np.mean(v)) for m, v in values.items()}
        pick = min if label in LOWER_IS_BETTER else max
        for method, vs in values.items():
            mean, std, ci = mean_ci(vs)
            others = [m for m in values if m != method]
            best = pick(others, key=means.get) if others else None
            diff = mean - means[best] if best else None
            p = paired_p(vs, values[best]) if best else None
            interval = "n/a" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"
            table.rows.append(
                [
                    label,
                    method,
                    fmt(mean),
                    fmt(std),
                    interval,
                    best or "n/a",
                    fmt(diff),
                    "n/a" if p is None else f"{p:.3g}",
                ]
            )
    if len(cfg["seeds"]) < 2:
        table.notes.append("one seed: no confidence interval or test (list more seeds in config key seeds)")
    return table
