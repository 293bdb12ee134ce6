"""Every shipped paper config rehearsed at its smallest meaningful size: every method, the first
seed, the first two tasks, one value per sweep, a few steps (codyra.rehearsal.plan), on stand-ins of
its architecture and fixture copies of every dataset it names, through its ``paper`` target.

One CLIP config and one TRACE backbone go through the local one-node SLURM with profiles/slurm as a
site sets it (the real sbatch lines: partitions, GPUs, memory, time, one node); the others run their
jobs in this machine's Snakemake process, which the SLURM path does not change. The tests run in
file order: the configs of a family share a rehearsal folder, as one site's grids share a results
folder (mtil_5shot_ablations adds its sweep to mtil_5shot's runs).
"""

from __future__ import annotations

import json

from codyra.evaluation.tables import table_names
from codyra.experiment.config import load_config
from codyra.methods import method_of
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


def trained(cfg: dict) -> list[str]:
    return [m for m in cfg["methods"] if method_of(cfg, m).trains]


def test_mtil_5shot_through_slurm_as_a_site_sets_the_profile(folders):
    folder = folders["clip"]
    cfg = check_tables(folder, run("mtil_5shot.yaml", folder, slurm=True))
    jobs = submitted(folder)
    runs = [group for group in jobs if group.startswith("group_run-")]
    assert len(runs) == len(trained(cfg))  # a run's 2 trainings and 2 rows: one SLURM job
    job = slurm_job(jobs[runs[0]][0])
    assert (job["Partition"], job["NumNodes"], job["TresPerJob"]) == ("gpu", "1", "gres:gpu:h100:1")
    assert job["TimeLimit"] == "02:30:00"  # profiles/slurm: 2 x (train_task 45 + eval_row 30) minutes
    cache = slurm_job(jobs["rule_eval_cache"][0])  # a CPU job: the CPU partition, no GPU
    assert cache["Partition"] == "cpu" and "gres" not in cache.get("TresPerJob", "")
    # the rows read the evaluation cache; the few-shot subsets were pinned once per dataset
    row = (folder / "results" / "logs" / cfg["benchmark"] / "cells" / "codyra" / "seed0" / "row2.log").read_text()
    assert "evaluation cache" in row
    pinned = sorted(p.name for p in (folder / "results" / cfg["benchmark"] / "fewshot").iterdir())
    assert pinned == [f"{t['name']}.json" for t in sorted(cfg["tasks"], key=lambda t: t["name"])]


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
    cell = json.loads((results / "codyra-dagger" / "seed0" / "cells" / "A_2_1.json").read_text())
    assert cell["num_classes"] > 3 and "routing" in cell  # the union label space, routed inference
    for study in cfg["single_task"]["studies"]:
        assert (folder / tables_dir(cfg) / f"{study}.md").is_file()


def test_blip_xtail_16shot_reads_the_weights_revision_it_names(folders):
    folder = folders["blip"]
    cfg = check_tables(folder, run("blip_xtail_16shot.yaml", folder))
    assert (folder / tables_dir(cfg) / "blip.md").is_file()
    digests = json.loads((folder / "results" / cfg["benchmark"] / "pretrain" / "weights-digest.json").read_text())
    assert any(name.startswith("Salesforce/blip-itm-base-coco@refs/pr/5") for name in digests)


def test_trace_llama_2_7b_through_slurm_leaves_out_what_cannot_fit(folders):
    folder = folders["trace"]
    cfg = check_tables(folder, run("trace.yaml", folder, "backbone=llama-2-7b-chat", slurm=True))
    assert set(cfg["left_out"]) == {"ewc", "gem"} and not set(cfg["left_out"]) & set(cfg["methods"])
    table = (folder / tables_dir(cfg) / "table2.md").read_text()
    assert table.count("Left out:") == 2
    jobs = submitted(folder)
    tasks = [group for group in jobs if group.startswith("group_task-")]
    assert len(tasks) == len(trained(cfg)) * len(cfg["tasks"])  # training i and row i: one job
    job = slurm_job(jobs[tasks[0]][0])
    assert (job["NumNodes"], job["TresPerJob"]) == ("1", "gres:gpu:h100:4")
    assert job["NumCPUs"] == "3"  # 2 ranks x train.threads 1 and the launcher
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
