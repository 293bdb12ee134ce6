"""The CLIP paper configs rehearsed at their smallest meaningful size: every method, the first seed,
the first two tasks, one value per sweep, a few steps (codyra.rehearsal.plan), on stand-ins of their
architecture and fixture copies of every dataset they name, through their ``paper`` target.

A few methods of mtil_5shot go through the local one-node SLURM with profiles/slurm as a site sets it
(the real sbatch lines: partitions, GPUs, CPUs, memory, time, one node); then every method of every
config runs its jobs in this machine's Snakemake process, which the SLURM path does not change (a
SLURM job runs the same rule in the same way), reusing what ran before. The tests run in file order:
the configs share a rehearsal folder, as one site's grids share a results folder (mtil_5shot_ablations
adds its sweep to mtil_5shot's runs).
"""

from __future__ import annotations

import json

import pytest

from codyra.rehearsal.plan import ITERATIONS
from codyra.store.paths import tables_dir

from .conftest import check_tables, megabytes, run, slurm_job, submitted


@pytest.mark.slurm  # through the local cluster
def test_mtil_5shot_submits_the_profiles_jobs_to_slurm_then_runs_every_method(folders):
    folder = folders["clip"]
    check_tables(folder, run("mtil_5shot.yaml", folder, "methods=[zeroshot, codyra, zscl]", slurm=True))
    jobs = submitted(folder)
    runs = {group.split("-seed")[0].removeprefix("group_run-"): ids for group, ids in jobs.items() if "run-" in group}
    assert set(runs) == {"codyra", "zscl"}  # a run's 2 trainings and 2 rows: one SLURM job
    codyra, zscl = slurm_job(runs["codyra"][0]), slurm_job(runs["zscl"][0])
    assert (codyra["Partition"], codyra["NumNodes"], codyra["TresPerJob"]) == ("gpu", "1", "gres:gpu:h100:1")
    assert codyra["TimeLimit"] == "02:30:00"  # profiles/slurm: 2 x (train_task 45 + eval_row 30) minutes
    assert megabytes(codyra["MinMemoryNode"]) == 64000
    # CPUs: train.threads 1 and a data loader process; ZSCL draws a second image stream (its reference images)
    assert (codyra["NumCPUs"], zscl["NumCPUs"]) == ("2", "3")
    cache = slurm_job(jobs["rule_eval_cache"][0])  # a CPU job: the CPU partition, no GPU
    assert cache["Partition"] == "cpu" and "gres" not in cache.get("TresPerJob", "")

    cfg = check_tables(folder, run("mtil_5shot.yaml", folder))
    # the rows read the evaluation cache; the few-shot subsets were pinned once per dataset
    row = (folder / "results" / "logs" / cfg["benchmark"] / "cells" / "codyra" / "seed0" / "row2.log").read_text()
    assert "evaluation cache" in row
    pinned = sorted(p.name for p in (folder / "results" / cfg["benchmark"] / "fewshot").iterdir())
    assert pinned == [f"{t}.json" for t in sorted(cfg["tasks"])]
    cell = json.loads((folder / "results" / cfg["benchmark"] / "lwf" / "seed0" / "cells" / "A_2_1.json").read_text())
    assert cell["num_classes"] == 3  # MTIL: a task over its own classes (the Aircraft fixture's 3)
    summary = json.loads(
        (folder / "results" / cfg["benchmark"] / "codyra" / "seed0" / "task2" / "summary.json").read_text()
    )
    assert (summary["task"], summary["steps"]) == (cfg["tasks"][1], ITERATIONS)


def test_mtil_5shot_ablations_adds_only_its_sweep_to_the_shared_runs(folders):
    record = run("mtil_5shot_ablations.yaml", folders["clip"])
    cfg = check_tables(folders["clip"], record)
    variants = [m for m in cfg["methods"] if m.startswith("codyra-dense_ratio")]
    assert len(variants) == 1  # one value of the sweep at this size
    assert record["jobs"].get("train_task") == len(cfg["tasks"])  # only the variant's tasks trained


def test_mtil_5shot_order2(folders):
    check_tables(folders["clip"], run("mtil_5shot_order2.yaml", folders["clip"]))


def test_mtil_5shot_uniform(folders):
    check_tables(folders["clip"], run("mtil_5shot_uniform.yaml", folders["clip"]))


def test_mtil_full(folders):
    check_tables(folders["clip"], run("mtil_full.yaml", folders["clip"]))


def test_xtail_16shot_with_its_heldout_rows_ablations_and_single_task_studies(folders):
    folder = folders["clip"]
    cfg = check_tables(folder, run("xtail_16shot.yaml", folder))
    results = folder / "results" / cfg["benchmark"]
    heldout = results / "codyra" / "seed0" / "heldout"
    assert {f"H_2_{name}.json" for name in cfg["heldout_tasks"]} <= {p.name for p in heldout.iterdir()}
    cells = [json.loads((results / "codyra-dagger" / "seed0" / "cells" / f"A_2_{j}.json").read_text()) for j in (1, 2)]
    assert cells[0]["num_classes"] == cells[1]["num_classes"] > 3  # every task over the union of the classes
    assert "routing" in cells[0]  # routed inference
    for study in cfg["single_task"]["studies"]:
        assert (folder / tables_dir(cfg) / f"{study}.md").is_file()
