# The paper's analyses (codyra.analysis): tables under results/tables/<benchmark>/, figures
# (PNG + PDF) under results/figures/<benchmark>/, every one a report() result. `paper` builds
# all that apply to the config (docs/analyses.md). Analyses read stored files only; the
# forward probes (interpolation, module removal, gradient conflict) are their own jobs.
from codyra.analysis.common import adapter_methods, trained_methods
from codyra.analysis.registry import ANALYSES as REGISTRY, available, skipped
from codyra.analysis.named_tables import named_tables
from codyra.analysis.probe_files import probe_names
from codyra.experiment.jobs import method_kinds
from codyra.store.paths import GRAD_CONFLICT, PROBE

ANALYSES = available(CFG)
TRAINED_METHODS = trained_methods(CFG)
PROBE_PATTERN = PROBE.format(**_fixed, method="{method}", seed="{seed}", probe="{probe}")
# alpha = 0 and 1 are the held-out files H_0 and H_N: only the alphas between are probed
PROBES = probe_names(CFG)
CONFLICT_FILE = GRAD_CONFLICT.format(**_fixed)


MATRICES = [run_path(m, s, "matrix.json") for m in CFG["methods"] for s in CFG["seeds"]]
HELDOUT_FILES = [HELDOUT_PATTERN.format(method=m, seed=s, i=i, name=h) for m in CFG["methods"] for s in CFG["seeds"] for i in range(N + 1) for h in HELDOUT_TASKS]
# the comparison reads our tables' CSVs: the paper's headline tables and the analyses it compares
COMPARED = [f"{TABLES}/{t}.csv" for t in ("table1", "forgetting", "table2") if t in table_names(CFG, CLASSES)]
COMPARED += [f"{TABLES}/{t}.csv" for a in ("drift", "magnitude", "cka", "retention") if a in ANALYSES for t in outputs(CFG, a)[0]]
COMPARED += [f"{TABLES}/{t}.csv" for t in named_tables(CFG)]  # single-task studies and ablation tables named as the paper's
# the files of each input set an analysis may read (codyra.analysis.registry.INPUT_SETS)
INPUT_FILES = {
    "trained updates": update_files(TRAINED_METHODS),
    "adapter updates": update_files(adapter_methods(CFG)),
    "theta_0": [PRETRAINED_WEIGHTS] if PRETRAINED_WEIGHTS else [],
    "held-out files": HELDOUT_FILES,
    "probe files": [PROBE_PATTERN.format(method=m, seed=s, probe=p) for m in TRAINED_METHODS for s in CFG["seeds"] for p in PROBES],
    "final cells": [run_path(m, s, "cells", f"A_{N}_{j}.json") for m in TRAINED_METHODS for s in CFG["seeds"] for j in TASKS],
    "gradient conflict": [CONFLICT_FILE],
    "matrices": MATRICES,
    "summaries": [run_path(m, s, f"task{i}", "summary.json") for m in TRAINED_METHODS for s in CFG["seeds"] for i in TASKS],
    "single-task files": SINGLE_TASK_FILES,  # single_task.smk: every study's runs' cells, held-out files, probes
    "compared tables": COMPARED,
}
ANALYSIS_INPUTS = {a: [f for name in REGISTRY[a].reads for f in INPUT_FILES[name]] for a in ANALYSES}
# analyses of small files (tables, summaries, JSON) run in the Snakemake process; the others are CPU jobs
LOCAL = [a for a in ANALYSES if not REGISTRY[a].cpu_job]



# One rule per analysis (a rule per name: its own log, resources and report entries).
for _name in ANALYSES:
    if REGISTRY[_name].per_method:
        continue

    rule:
        name:
            f"analysis_{_name}"
        input:
            ANALYSIS_INPUTS[_name],
        output:
            analysis_files(_name),
        params:
            name=_name,
            version=REGISTRY[_name].version(method_kinds(CFG, CFG["methods"])),
        log:
            f"{LOGS}/analysis/{_name}.log",
        run:
            codyra_cli(log[0], "analysis", params.name)


if "rank" in ANALYSES:

    rule analysis_rank:
        input:
            lambda w: update_files([w.method]),
        output:
            analysis_files("rank", "{method}"),
        wildcard_constraints:
            method="|".join(adapter_methods(CFG)),
        params:
            version=lambda w: REGISTRY["rank"].version(method_kinds(CFG, [w.method])),
        log:
            f"{LOGS}/analysis/rank_{{method}}.log",
        run:
            codyra_cli(log[0], "analysis", "rank", "--method", wildcards.method)


if "probes" in ANALYSES and PROBES:

    rule probe:
        input:
            unpack(lambda w: {**common_inputs(), "updates": theta_inputs(w.method, w.seed)}),
        output:
            [PROBE_PATTERN.replace("{probe}", p) for p in PROBES],
        params:
            settings=lambda w: fingerprint([heldout_fingerprint(CFG), eval_settings(), CFG["analysis"]]),
            version=lambda w: job_version("probe", method_kinds(CFG, [w.method])),
        threads: job_threads(CFG, "probe")
        group:
            RUN_GROUP  # on a cluster, in the job of its run, like the run's rows
        log:
            f"{LOGS}/probes/{{method}}/seed{{seed}}.log",
        run:
            codyra_cli(log[0], "probe", "--method", wildcards.method, "--seed", wildcards.seed)


if "conflict" in ANALYSES:

    rule grad_conflict:
        input:
            unpack(lambda w: common_inputs()),
        output:
            CONFLICT_FILE,
        params:
            settings=fingerprint([CFG["analysis"]["conflict_ranks"], CFG["analysis"]["probe_batch"], list(CFG["tasks"])]),
            version=job_version("grad_conflict"),
        threads: job_threads(CFG, "grad_conflict")
        log:
            f"{LOGS}/grad_conflict.log",
        run:
            codyra_cli(log[0], "grad-conflict")


# The paper's analyses that do not apply to this config (e.g. gradient conflict on TRACE): their
# target says why and writes nothing, rather than "no rule"; `paper` leaves them out.
for _name, _why in skipped(CFG).items():

    rule:
        name:
            f"analysis_{_name}"
        params:
            why=_why,
        log:
            f"{LOGS}/analysis/{_name}.log",
        run:
            say_skipped(log[0], rule.removeprefix("analysis_"), params.why)


# table-only analyses run in the Snakemake process (localrules takes names; these are computed)
workflow.localrules("paper", *(f"analysis_{a}" for a in LOCAL + list(skipped(CFG))))


rule paper:
    input:
        rules.tables.output,
        [f for a in ANALYSES if a != "rank" for f in analysis_files(a)],
        [f for m in (adapter_methods(CFG) if "rank" in ANALYSES else []) for f in analysis_files("rank", m)],
