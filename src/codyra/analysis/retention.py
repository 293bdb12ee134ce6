"""Zero-shot retention on held-out data (paper tables "supp_zs_tracking" and "unseen_transfer").

Reads the held-out files H_{i}_{name}.json of every run (``snakemake all_heldout``): the
accuracy of theta_i on each held-out task after each task i (tracking table) and after the
last task (general-capability table), with the average over held-out tasks.
"""

from __future__ import annotations

import math
import statistics

from codyra.evaluation.table_formats import Table
from codyra.store.io import ResultError, read_json
from codyra.store.paths import heldout_path

TRACKING_TABLE, CAPABILITY_TABLE, AVERAGE = "heldout_tracking", "general_capability", "Average"


def read_heldout(cfg: dict, method: str, seed: int, i: int, name: str) -> float:
    """The accuracy of a held-out file, checked to be the record it claims to be."""
    path = heldout_path(cfg, method, seed, i, name)
    if not path.is_file():
        raise FileNotFoundError(f"held-out result {path} missing: run snakemake {path} (or snakemake all_heldout)")
    record = read_json(path)
    acc = record.get("accuracy") if isinstance(record, dict) else None
    expected = {"method": method, "seed": seed, "i": i, "task": name, "benchmark": cfg["benchmark"]}
    problems = [
        f"{k} is {record.get(k)!r}, expected {v!r}"
        for k, v in expected.items()
        if isinstance(record, dict) and record.get(k) != v
    ]
    if isinstance(acc, bool) or not isinstance(acc, (int, float)) or not (math.isfinite(acc) and 0 <= acc <= 100):
        problems.append(f"accuracy {acc!r} is not a finite number in 0..100")
    if problems:
        raise ResultError(
            f"held-out file {path} is invalid: {'; '.join(problems)}; delete it and rerun its job (snakemake -f {path})"
        )
    return float(acc)


def heldout_curve(cfg: dict, method: str, seed: int) -> dict[str, list[float]]:
    """Held-out task (and "Average") -> accuracy after each i = 0..N."""
    n, names = len(cfg["tasks"]), cfg["heldout_tasks"]
    curves = {name: [read_heldout(cfg, method, seed, i, name) for i in range(n + 1)] for name in names}
    curves[AVERAGE] = [statistics.fmean(curves[name][i] for name in names) for i in range(n + 1)]
    return curves


def _curves(cfg: dict) -> dict[str, list[dict[str, list[float]]]]:
    """method -> per seed ``heldout_curve``."""
    if not cfg["heldout_tasks"]:
        raise ValueError("config key heldout_tasks is empty: the retention tables need held-out tasks")
    return {m: [heldout_curve(cfg, m, s) for s in cfg["seeds"]] for m in cfg["methods"]}


def step_column(i: int) -> str:
    """The tracking table's column of theta_i."""
    return "theta_0" if i == 0 else f"after {i}"


def tracking_table(cfg: dict) -> Table:
    curves, n = _curves(cfg), len(cfg["tasks"])
    table = Table(
        TRACKING_TABLE,
        f"{cfg['benchmark']}: held-out (zero-shot) accuracy (%) of theta_i after each task i "
        "(paper: supp_zs_tracking), mean ± std over seeds",
        [step_column(i) for i in range(n + 1)],
        mark_best=False,
    )
    for block in [*cfg["heldout_tasks"], AVERAGE]:
        for method, per_seed in curves.items():
            table.rows.append((block, method, [[c[block][i] for c in per_seed] for i in range(n + 1)]))
    return table


def general_capability_table(cfg: dict) -> Table:
    curves, n = _curves(cfg), len(cfg["tasks"])
    table = Table(
        CAPABILITY_TABLE,
        f"{cfg['benchmark']}: held-out accuracy (%) after the last task (paper: unseen_transfer), "
        "mean ± std over seeds",
        [*cfg["heldout_tasks"], AVERAGE],
    )
    for method, per_seed in curves.items():
        table.rows.append(("", method, [[c[col][n] for c in per_seed] for col in table.columns]))
    return table
