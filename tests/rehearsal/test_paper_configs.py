"""Every shipped paper config rehearsed at its smallest meaningful size: every method, the first
seed, the first two tasks, one value per sweep, a few steps (codyra.rehearsal.plan), on stand-ins of
its architecture and fixture copies of every dataset it names, through its ``paper`` target.

A few methods of one CLIP config and of one TRACE backbone go through the local one-node SLURM with
profiles/slurm as a site sets it (the real sbatch lines: partitions, GPUs, CPUs, memory, time, one
node); then every method of every config runs its jobs in this machine's Snakemake process, which the
SLURM path does not change (a SLURM job runs the same rule in the same way), reusing what ran before.
The tests run in file order: the configs of a family share a rehearsal folder, as one site's grids
share a results folder (mtil_5shot_ablations adds its sweep to mtil_5shot's runs).
"""

from __future__ import annotations

import json

from codyra.evaluation.tables import table_names
from codyra.experiment.config import load_config
from codyra.methods import method_of
from codyra.rehearsal.plan import ITERATIONS
from codyra.store.paths import tables_dir

from .conftest import run, slurm_job, submitted


def rehearsed(folder) -> dict:
    return load_config(folder / "rehearsal.yaml")


def check_tables(folder, record: dict) -> dict:
    """The rehearsal wrote every table of its config; returns its validated config."""
    cfg = rehearsed(folder)
    assert record["exit_code"] == 0 and record["benchmark"] == cfg["benchmark"]
    tables = folder / tables_dir(cfg)
    assert all((tables / f"{name}.md").is_file() for name in table_names(cfg))
    return cfg


def megabytes(memory: str) -> int:
    """scontrol's memory field (``64000M``, ``62.50G``) in MB."""
    return round(float(memory[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[memory[-1]])


def trained(cfg: dict) -> list[str]:
    return [m for m in cfg["methods"] if method_of(cfg, m).trains]


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


def test_blip_xtail_16shot_reads_the_weights_revision_it_names(folders):
    folder = folders["blip"]
    cfg = check_tables(folder, run("blip_xtail_16shot.yaml", folder))
    assert (folder / tables_dir(cfg) / "blip.md").is_file()
    digests = json.loads((folder / "results" / cfg["benchmark"] / "pretrain" / "weights-digest.json").read_text())
    assert any(name.startswith("Salesforce/blip-itm-base-coco@refs/pr/5") for name in digests)


def test_trace_llama_2_7b_submits_its_4_gpu_task_jobs_and_1_gpu_rows_then_leaves_out_what_cannot_fit(folders):
    folder = folders["trace"]
    check_tables(
        folder, run("trace.yaml", folder, "backbone=llama-2-7b-chat", "methods=[zeroshot, codyra]", slurm=True)
    )
    jobs = submitted(folder)
    tasks = sorted(group for group in jobs if group.startswith("group_task-codyra"))
    rows = sorted(group for group in jobs if group.startswith("group_row-codyra"))
    assert len(tasks) == len(rows) == 2  # training i on 4 GPUs; row i, generating on one, a job of its own
    job = slurm_job(jobs[tasks[0]][0])
    assert (job["Partition"], job["NumNodes"], job["TresPerJob"]) == ("gpu", "1", "gres:gpu:h100:4")
    assert job["NumCPUs"] == "3"  # 2 ranks x train.threads 1 and the launcher
    assert megabytes(job["MinMemoryNode"]) == 330000 and job["TimeLimit"] == "00:30:00"
    row = slurm_job(jobs[rows[0]][0])
    assert (row["TresPerJob"], row["TimeLimit"]) == ("gres:gpu:h100:1", "00:30:00")

    cfg = check_tables(folder, run("trace.yaml", folder, "backbone=llama-2-7b-chat"))
    assert set(cfg["left_out"]) == {"ewc", "gem"} and not set(cfg["left_out"]) & set(cfg["methods"])
    table = (folder / tables_dir(cfg) / "table2.md").read_text()
    assert table.count("Left out:") == 2
    check_zero2_bf16(folder, cfg)


def check_zero2_bf16(folder, cfg: dict) -> None:
    """Every trained method's task 2 ran under DeepSpeed ZeRO-2 in bf16 on two ranks that agree."""
    for method in trained(cfg):
        summary = json.loads(
            (folder / "results" / cfg["benchmark"] / method / "seed0" / "task2" / "summary.json").read_text()
        )
        report = summary["distributed"]
        assert (report["backend"], report["precision"], report["world_size"]) == ("deepspeed-zero2", "bf16", 2)
        assert len(set(report["replica_sha256_by_rank"])) == 1, method


def test_trace_gemma_2b(folders):
    cfg = check_tables(folders["trace"], run("trace.yaml", folders["trace"], "backbone=gemma-2b-it"))
    assert {"ewc", "gem"} <= set(cfg["methods"])  # what fits on the smaller backbone runs
    check_zero2_bf16(folders["trace"], cfg)


def test_trace_llama_3_2_1b(folders):
    cfg = check_tables(folders["trace"], run("trace.yaml", folders["trace"], "backbone=llama-3.2-1b-instruct"))
    check_zero2_bf16(folders["trace"], cfg)
