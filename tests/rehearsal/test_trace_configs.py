"""The TRACE paper config rehearsed on each backbone at its smallest meaningful size: every method,
the first seed, the first two tasks, a few steps, under DeepSpeed ZeRO-2 in bf16 on two ranks, on
stand-ins of each backbone's architecture and fixture copies of the TRACE datasets.

LLaMA-2-7B's CoDyRA goes through the local one-node SLURM with profiles/slurm as a site sets it (a
task's 4-GPU job, a row's 1-GPU job); then every method runs in this machine's Snakemake process. The
backbones run in one rehearsal folder, as one site's grids share a results folder, but need nothing
of each other's: CI runs the SLURM one in a pytest process of its own.
"""

from __future__ import annotations

import json

import pytest

from codyra.store.paths import tables_dir

from .conftest import check_tables, megabytes, run, slurm_job, submitted, trained


@pytest.mark.slurm  # through the local cluster
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
