"""Tables and figures of the single-task studies (config key ``single_task``; paper Figs.
"lora_forgetting" and "prune_motivation", Tables supp_dtd / supp_eurosat / supp_flowers and
supp_norm_matched).

Every run trained its study's one task from theta_0 (:mod:`codyra.experiment.single_task`). Per
run, as the paper measures it: Delta-plasticity = accuracy on the task after training minus
its zero-shot accuracy (A[1,1] - A[0,1], higher is better); Forgetting = zero-shot accuracy on
the reference set minus the accuracy after training (H_0 - H_1, lower is better; the mean over
the reference tasks when there are several). Per study (mean ± std over seeds):

- ``<study>``: a row per run (its label) with Delta-plasticity, Forgetting, the update's
  effective rank, ||dW||_F, trainable parameters (and the norm target, for norm-matched runs); a
  study with ``pivot`` is laid out as the paper's tables instead (a row per value of
  ``pivot.rows``, Delta-plasticity and Forgetting per value of ``pivot.columns``), the rows per
  run then in ``<study>_runs``;
- ``<study>_removal`` (``remove_modules``): each run with and without each removed module type,
  its accuracy on the task and on the reference set, Delta-plasticity and Forgetting (Fig.
  prune_motivation);
- figures: Forgetting against Delta-plasticity per run (Fig. lora_forgetting), and the removal
  probe's accuracies.

Studies naming one ``summary`` table make a table over tasks (paper table "peft": single-task
16-shot accuracy and the final parameter count): a column per study (its task); block Accuracy:
the zero-shot accuracy and per method its accuracy after training; block Parameters (M): the
parameters its stored update keeps (a LoRA update's surviving A and B factors: CoDyRA's pruned
components are gone).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from codyra.analysis.common import new_figure, save_figure
from codyra.analysis.norm_matched import caption_notes, missed, stalled
from codyra.evaluation.table_formats import Table
from codyra.experiment.single_task import studies, study_runs
from codyra.experiment.sweeps import value_label
from codyra.experiment.validation import single_task_config
from codyra.store.paths import figures_dir

COLUMNS = ["Delta-plasticity", "Forgetting", "eff. rank", "Frobenius dW (task)", "trainable params"]
TARGET = "target"
LOWER_IS_BETTER = {"Forgetting": False}


def delta_plasticity(zero_shot: float, after: float) -> float:
    """What training gained on the task: its accuracy after minus its zero-shot accuracy."""
    return after - zero_shot


def forgetting(zero_shot: dict[str, float], after: dict[str, float]) -> float:
    """What training lost on the reference set: zero-shot accuracy minus the accuracy after,
    averaged over the reference tasks."""
    return statistics.fmean(zero_shot[name] - after[name] for name in zero_shot)


def read_run(cfg_task: dict, method: str, seed: int) -> dict:
    """A single-task run's accuracies (task and reference tasks, before and after) and its summary."""
    from codyra.analysis.retention import read_heldout
    from codyra.store.cells import read_cell
    from codyra.store.paths import cell_path
    from codyra.store.updates import task_summary

    task = [
        read_cell(cfg_task, cell_path(cfg_task, method, seed, i, 1), method, seed, i, 1, classifies=True)["accuracy"]
        for i in (0, 1)
    ]
    reference = [{h: read_heldout(cfg_task, method, seed, i, h) for h in cfg_task["heldout_tasks"]} for i in (0, 1)]
    return {"task": task, "reference": reference, "summary": task_summary(cfg_task, method, seed, 1)}


def run_cells(record: dict) -> dict[str, float | None]:
    """One run's values of the COLUMNS (and the norm target), from :func:`read_run`'s record."""
    summary = record["summary"]
    return {
        "Delta-plasticity": delta_plasticity(*record["task"]),
        "Forgetting": forgetting(*record["reference"]),
        "eff. rank": summary.get("active_rank_mean"),
        "Frobenius dW (task)": summary.get("dW_fro_total"),
        "trainable params": summary.get("trainable_params"),
        TARGET: summary.get("norm_target"),
    }


def _cell(values: list) -> list[float] | None:
    return None if any(v is None for v in values) else [float(v) for v in values]


@dataclass
class Run:
    """A study's run: its method, row label, method options and one :func:`read_run` record per seed."""

    method: str
    label: str
    options: dict
    records: list[dict]


def study_records(cfg: dict, name: str) -> tuple[dict, list[Run]]:
    """(the task's derived config, the runs of study ``name`` with their records)."""
    cfg_task = single_task_config(cfg, studies(cfg)[name]["task"])
    runs = study_runs({**cfg_task, "single_task": cfg["single_task"]}, name)
    return cfg_task, [
        Run(m, label, cfg_task["method_configs"][m], [read_run(cfg_task, m, s) for s in cfg["seeds"]])
        for m, label in runs
    ]


def _caption(cfg: dict, name: str, what: str) -> str:
    study = studies(cfg)[name]
    references = ", ".join(cfg["single_task"]["reference_tasks"])
    return (
        f"{cfg['benchmark']}: {what}; one task ({study['task']}) trained from theta_0: Delta-plasticity = "
        f"accuracy on {study['task']} after minus zero-shot (higher is better), Forgetting = zero-shot minus after "
        f"on the reference set ({references}; lower is better); mean ± std over seeds {cfg['seeds']}"
    )


def runs_table(cfg: dict, name: str, runs: list[Run], table_name: str) -> Table:
    norm = any(run.options.get("norm_target") is not None for run in runs)
    columns = COLUMNS + ([TARGET] if norm else [])
    table = Table(
        table_name,
        _caption(cfg, name, f"single-task study {name}"),
        columns,
        mark_best=False,  # descriptive: the pivot (the paper's layout) marks the best placement per rank
        decimals=2,
    )
    misses, stalls = [], []
    cells = {run.label: [run_cells(r) for r in run.records] for run in runs}
    # per seed, the Delta-plasticity of the study's runs at their natural norm
    natural = list(zip(*(cells[r.label] for r in runs if r.options.get("norm_target") is None), strict=True))
    for run in runs:
        table.rows.append(("", run.label, [_cell([c[col] for c in cells[run.label]]) for col in columns]))
        if run.options.get("norm_target") is not None:
            for k, (seed, r) in enumerate(zip(cfg["seeds"], run.records, strict=True)):
                if missed([r["summary"]]):
                    misses.append(f"{run.label} seed {seed}")
                reference = [c["Delta-plasticity"] for c in natural[k]] if natural else []
                if stalled(cells[run.label][k]["Delta-plasticity"], reference):
                    stalls.append(f"{run.label} seed {seed}")
    table.caption += caption_notes(misses, stalls)
    return table


def pivot_table(cfg: dict, name: str, runs: list[Run]) -> Table:
    """The paper's layout (supp_dtd): a row per value of pivot.rows; per value of pivot.columns,
    Delta-plasticity, then per value Forgetting."""
    pivot = studies(cfg)[name]["pivot"]
    rows, cols = {}, {}
    for run in runs:
        row, col = value_label(run.options[pivot["rows"]]), value_label(run.options[pivot["columns"]])
        rows.setdefault(row, {})[col] = [run_cells(r) for r in run.records]
        cols[col] = None
    metrics = ("Delta-plasticity", "Forgetting")
    columns = [f"{metric} {pivot['columns']}={col}" for metric in metrics for col in cols]
    table = Table(
        name,
        _caption(cfg, name, f"single-task study {name} by {pivot['rows']} and {pivot['columns']}"),
        columns,
        higher_is_better={c: not c.startswith("Forgetting") for c in columns},
        decimals=2,
    )
    for row, by_col in rows.items():
        table.rows.append(
            (
                "",
                row,
                [
                    _cell([c[metric] for c in by_col[col]]) if col in by_col else None
                    for metric in metrics
                    for col in cols
                ],
            )
        )
    return table


def removal_table(cfg: dict, name: str, cfg_task: dict, runs: list[Run]) -> Table:
    """Each run with all its trained modules and without each removed module type (probe files)."""
    from codyra.analysis.probe_files import module_label, without_name
    from codyra.analysis.probes import read_probe

    task = studies(cfg)[name]["task"]
    columns = [f"{task} (%)", "reference (%)", "Delta-plasticity", "Forgetting"]
    table = Table(
        f"{name}_removal",
        _caption(cfg, name, "accuracy with and without the trained modules of one type (paper Fig. prune_motivation)"),
        columns,
        higher_is_better=LOWER_IS_BETTER,
        mark_best=False,
        decimals=2,
    )
    for run in runs:
        per_seed = run.records
        variants = {"all modules": [(r["task"][1], r["reference"][1]) for r in per_seed]}
        for modules in studies(cfg)[name]["remove_modules"]:
            probes = [read_probe(cfg_task, run.method, s, without_name(modules)) for s in cfg["seeds"]]
            variants[f"without {module_label(modules)}"] = [(p["tasks"][task], p["heldout"]) for p in probes]
        for variant, values in variants.items():
            cells = [
                [acc for acc, _ in values],
                [statistics.fmean(ref.values()) for _, ref in values],
                [delta_plasticity(r["task"][0], acc) for r, (acc, _) in zip(per_seed, values, strict=True)],
                [forgetting(r["reference"][0], ref) for r, (_, ref) in zip(per_seed, values, strict=True)],
            ]
            table.rows.append((run.label, variant, cells))
    return table


def _encoder_module(placement) -> tuple[str, str]:
    """(encoder, module types) a placement trains: vision / text / both; attn / mlp / all (or its kinds, e.g. v)."""
    from codyra.clip.targets import CLIP_VOCABULARY

    tokens = [placement] if isinstance(placement, str) else list(placement)
    towers = [t for t in tokens if t in CLIP_VOCABULARY.towers]
    modules = [t for t in tokens if t not in CLIP_VOCABULARY.towers and t != "all"]
    return "+".join(towers) or "both", "+".join(modules) or "all"


MARKERS = {"vision": "o", "text": "s", "both": "^"}


def write_study_figure(cfg: dict, name: str, table: Table, runs: list[Run]) -> None:
    """Forgetting against Delta-plasticity per run (paper Fig. lora_forgetting: shapes are the
    encoders, colours the module types, sizes the ranks)."""
    fig, ax = new_figure(figsize=(5.5, 4))
    colours: dict[str, str] = {}
    for run, (_, label, stats) in zip(runs, table.stats(), strict=True):
        if stats[0] is None or stats[1] is None:
            continue
        encoder, module = _encoder_module(run.options.get("placement", "all"))
        colour = colours.setdefault(module, f"C{len(colours)}")
        size = 12 * (1 + run.options.get("rank", 4)) ** 0.75
        ax.scatter(stats[0][0], stats[1][0], marker=MARKERS.get(encoder, "D"), s=size, color=colour, alpha=0.7)
        ax.annotate(label, (stats[0][0], stats[1][0]), fontsize=5)
    for module, colour in colours.items():
        ax.scatter([], [], color=colour, label=module)
    ax.legend(fontsize=6, title="modules (shape: encoder, size: rank)", title_fontsize=6)
    ax.set_xlabel("Delta-plasticity (%): task accuracy after - zero-shot")
    ax.set_ylabel("Forgetting (%): reference zero-shot - after")
    ax.set_title(f"{cfg['benchmark']}: {name} ({studies(cfg)[name]['task']})")
    save_figure(fig, figures_dir(cfg) / name)


def write_removal_figure(cfg: dict, name: str, table: Table) -> None:
    """Task and reference accuracy per removed module type (paper Fig. prune_motivation)."""
    fig, ax = new_figure(figsize=(7, 3.5))
    stats = list(table.stats())
    labels = [f"{block}: {label}" if len({b for b, _, _ in stats}) > 1 else label for block, label, _ in stats]
    x = range(len(stats))
    ax.plot(x, [s[0][0] for _, _, s in stats], marker="o", color="C0", label=table.columns[0])
    ax.set_ylabel(table.columns[0], color="C0")
    right = ax.twinx()
    right.plot(x, [s[1][0] for _, _, s in stats], marker="s", color="C1", label="reference")
    right.set_ylabel("reference (%)", color="C1")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=6)
    ax.set_title(f"{cfg['benchmark']}: {name}, trained modules removed")
    save_figure(fig, figures_dir(cfg) / f"{name}_removal")


def write_single_task(cfg: dict) -> None:
    from codyra.analysis.common import write_any_table

    for name, study in studies(cfg).items():
        cfg_task, runs = study_records(cfg, name)
        table = runs_table(cfg, name, runs, f"{name}_runs" if study.get("pivot") else name)
        write_any_table(cfg, table)
        if study.get("pivot"):
            write_any_table(cfg, pivot_table(cfg, name, runs))
        write_study_figure(cfg, name, table, runs)
        if study.get("remove_modules"):
            table = removal_table(cfg, name, cfg_task, runs)
            write_any_table(cfg, table)
            write_removal_figure(cfg, name, table)
    for table_name, names in summaries(cfg).items():
        write_any_table(cfg, summary_table(cfg, table_name, names))


def summaries(cfg: dict) -> dict[str, list[str]]:
    """Summary table name -> the studies naming it, in config order."""
    found: dict[str, list[str]] = {}
    for name, study in studies(cfg).items():
        if study.get("summary"):
            found.setdefault(study["summary"], []).append(name)
    return found


def kept_params(update) -> int:
    """Parameters a stored update keeps: a LoRA update's A and B factors (its surviving components;
    the gates fold into them at merge), every entry of a dense one."""
    if update.kind == "lora":
        return sum(t.numel() for name, t in update.tensors.items() if name.endswith((".A", ".B")))
    return update.num_stored()


ACCURACY, PARAMETERS = "Accuracy", "Parameters (M)"  # the blocks of a summary table


def summary_table(cfg: dict, table_name: str, names: list[str]) -> Table:
    """A column per study (its task); block Accuracy: the zero-shot accuracy on it and each
    method's after training, block Parameters (M): the parameters each method's stored update
    keeps, in millions; mean ± std over seeds."""
    from codyra.store.updates import stored_update

    tasks = [studies(cfg)[n]["task"] for n in names]
    table = Table(
        table_name,
        f"{cfg['benchmark']}: one task trained from theta_0 per column: accuracy (%) on it and the parameters "
        f"(millions) the stored update keeps, mean ± std over seeds {cfg['seeds']} (paper: peft)",
        tasks,
        mark_best=False,
        decimals=2,
    )
    accuracy: dict[str, list] = {"Zero-shot": [None] * len(tasks)}
    params: dict[str, list] = {}
    for k, name in enumerate(names):
        cfg_task, runs = study_records(cfg, name)
        accuracy["Zero-shot"][k] = [r["task"][0] for r in runs[0].records]
        for run in runs:
            accuracy.setdefault(run.label, [None] * len(tasks))[k] = [r["task"][1] for r in run.records]
            kept = [kept_params(stored_update(cfg_task, run.method, s, 1)) / 1e6 for s in cfg["seeds"]]
            params.setdefault(run.label, [None] * len(tasks))[k] = kept
    table.rows += [(ACCURACY, label, cells) for label, cells in accuracy.items()]
    table.rows += [(PARAMETERS, label, cells) for label, cells in params.items()]
    return table


def single_task_outputs(cfg: dict) -> tuple[list[str], list[str]]:
    """(table names, figure stems) ``write_single_task`` produces (the workflow declares them)."""
    tables, figures = [], []
    for name, study in studies(cfg).items():
        tables += [name, f"{name}_runs"] if study.get("pivot") else [name]
        figures.append(name)
        if study.get("remove_modules"):
            tables.append(f"{name}_removal")
            figures.append(f"{name}_removal")
    return tables + list(summaries(cfg)), figures
