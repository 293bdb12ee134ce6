"""The DAG: job counts per rule, config errors before any job, reruns of exactly the affected jobs."""

from __future__ import annotations

import copy
import os
import re

import pytest
import yaml

from codyra.experiment.config import config_from_files, load_config
from codyra.experiment.resources import job_threads
from codyra.experiment.slurm import profile_resources
from codyra.methods import method_of
from codyra.yaml_loader import load_yaml
from tests.conftest import TINY

from .conftest import REPO, grid_config, job_counts, snakemake


def test_default_config_dag_has_the_grid_job_counts(tmp_path):
    cfg = load_yaml((REPO / "config" / "config.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")
    cores = 2  # make run's
    planned = snakemake(tmp_path, cfg, "-n", "--cores", str(cores), "all_tables").stdout
    counts = job_counts(planned)
    n, seeds = len(cfg["tasks"]), len(cfg["seeds"])
    trained = [m for m in cfg["methods"] if cfg["method_configs"][m]["kind"] != "zeroshot"]
    assert counts == {
        "mlflow_init": 1,
        "pretrain_mini": 1,
        "eval_row0": 1,  # the pretrained row, shared by every method and seed
        "train_task": len(trained) * seeds * n,  # N per trained (method, seed); zero-shot never trains
        "eval_row": len(trained) * seeds * n,  # rows i = 1..N of every trained run, one job per row
        "copy_row0": (len(cfg["methods"]) - len(trained)) * seeds * n,  # a never-training method's rows 1..N
        "share_row0": len(cfg["methods"]) * seeds,  # each run's copy of row 0
        "summarize_run": len(cfg["methods"]) * seeds,
        "tables": 1,
        "all_tables": 1,
    }
    assert not (tmp_path / "results").exists()  # a dry run writes nothing
    # the two jobs that start the grid run at once on its 2 cores: the store is made during the
    # pretraining, not between it and the first training job
    threads = planned_threads(planned)
    assert threads["pretrain_mini"] == cfg["mini"]["pretrain_threads"] == cores
    assert threads["mlflow_init"] + threads["pretrain_mini"] <= cores


def planned_threads(dry_run: str) -> dict[str, int]:
    """Each planned rule's thread count in a dry run's job blocks (1 where the block names none)."""
    threads = {}
    for block in re.split(r"\n(?=\s*(?:local)?rule \w+:)", dry_run)[1:]:
        rule = re.match(r"\s*(?:local)?rule (\w+):", block).group(1)
        found = re.search(r"^\s*threads: (\d+)$", block.split("\n\n")[0], re.MULTILINE)
        threads[rule] = int(found.group(1)) if found else 1
    return threads


@pytest.mark.slow
@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["methods"].append("ewc"), "methods: 'ewc' has no entry in method_configs"),
        (lambda c: c["method_configs"].pop("codyra"), "methods: 'codyra' has no entry in method_configs"),
        (lambda c: c.pop("model"), "'model' is a required property"),
        (
            lambda c: c["train"].update(batch_size="large"),
            "config key train.batch_size: 'large' is not of type 'integer'",
        ),
        (lambda c: c.update(tasks=[]), "config key tasks"),
        (lambda c: c["method_configs"]["codyra"].update(placement="ffn"), "unknown placement token 'ffn'"),
    ],
)
def test_config_errors_stop_the_workflow_before_any_job(tmp_path, mutate, message):
    cfg = grid_config(tmp_path)
    mutate(cfg)
    result = snakemake(tmp_path, cfg, "--cores", "1", "all_tables", check=False)
    assert result.returncode != 0
    assert "configuration error (nothing was run)" in result.stderr + result.stdout
    assert message in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_changed_hyperparameters_rerun_exactly_the_affected_jobs(finished_grid, tmp_path):
    workdir, cfg, _ = finished_grid
    assert job_counts(snakemake(workdir, cfg, "-n", "all_tables").stdout) == {}  # up to date
    changed = copy.deepcopy(cfg)
    changed["task_settings"] = {cfg["tasks"][1]: {"methods": {"codyra": {"kappa_max": 0.2}}}}  # codyra, task 2 only
    counts = job_counts(snakemake(workdir, changed, "-n", "all_tables").stdout)
    n, seeds = len(cfg["tasks"]), len(cfg["seeds"])
    assert counts == {
        "train_task": seeds * (n - 1),  # tasks 2..N of codyra (task 3 starts from task 2's update)
        "eval_row": seeds * (n - 1),  # rows 2..N of codyra
        "summarize_run": seeds,
        "tables": 1,
        "all_tables": 1,
    }


def test_a_changed_update_reruns_the_later_tasks_and_rows_of_its_run(finished_grid):
    # a job lists only theta_i's last update; the chain of tasks carries an earlier one's change
    workdir, cfg, _ = finished_grid
    update = workdir / "results" / cfg["benchmark"] / "codyra" / "seed0" / "task1" / "update.safetensors"
    original, stat = update.read_bytes(), update.stat()
    update.write_bytes(original + b" ")  # new content (Snakemake skips a touched file of the same checksum)
    try:
        counts = job_counts(snakemake(workdir, cfg, "-n", "all_tables").stdout)
    finally:
        update.write_bytes(original)
        os.utime(update, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    n = len(cfg["tasks"])
    assert counts == {"train_task": n - 1, "eval_row": n, "summarize_run": 1, "tables": 1, "all_tables": 1}


def count_submissions(workdir, *args: str) -> dict:
    """scripts/count-submissions.py: what a profile would submit, without submitting."""
    import json
    import subprocess
    import sys

    cmd = [
        sys.executable,
        str(REPO / "scripts" / "count-submissions.py"),
        "-s",
        str(REPO / "workflow" / "Snakefile"),
        "--directory",
        str(workdir),
        *args,
    ]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])


SLURM_PROFILE = REPO / "profiles" / "slurm"


def requested(rule: str) -> dict:
    """What profiles/slurm requests for a job of ``rule`` at its first attempt, as Snakemake evaluates it."""
    return profile_resources(SLURM_PROFILE, rule)


@pytest.mark.slow
def test_slurm_submissions_are_one_job_per_run_with_one_gpu_and_summed_runtime(tmp_path):
    cfg = grid_config(tmp_path)
    cfg["train"]["threads"], cfg["eval"]["threads"] = 3, 2
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    args = ["--configfile", str(tmp_path / "config.yaml"), "--profile", str(REPO / "profiles" / "slurm"), "all_tables"]
    out = count_submissions(tmp_path, *args)
    n, seeds = len(cfg["tasks"]), len(cfg["seeds"])
    trained = [m for m in cfg["methods"] if cfg["method_configs"][m]["kind"] != "zeroshot"]
    # one job per trained run (its N trainings and N rows); the pretrained row; theta_0
    assert out["submissions_by_rule"] == {
        "eval_row+train_task": len(trained) * seeds,
        "eval_row0": 1,
        "pretrain_mini": 1,
    }
    group = out["resources"]["eval_row+train_task"]
    # row i and task i+1 could run side by side: the gpu_slot constraint runs them in series, so the
    # job asks for one member's GPU, CPUs and memory, and for the sum of all members' runtimes
    assert group["gpu"] == 1 and group["gpu_model"] == requested("train_task")["gpu_model"]
    assert group["_cores"] == 3  # max(train.threads, eval.threads)
    assert group["mem_mb"] == max(requested("eval_row")["mem_mb"], requested("train_task")["mem_mb"])
    assert group["runtime"] == n * (requested("train_task")["runtime"] + requested("eval_row")["runtime"])
    assert out["resources"]["pretrain_mini"]["gpu"] == 0
    # members without a gpu_slot: Snakemake adds up those that could run side by side
    unconstrained = count_submissions(
        tmp_path, *args, "--set-resources", "train_task:gpu_slot=0", "eval_row:gpu_slot=0"
    )["resources"]["eval_row+train_task"]
    assert unconstrained["gpu"] == 2 and unconstrained["_cores"] == 3 + 2
    # a site with a shorter time limit: one job per task (training i and row i)
    per_task = count_submissions(tmp_path, *args, "--config", "cluster_job=task")
    assert per_task["submissions_by_rule"]["eval_row+train_task"] == len(trained) * seeds * n
    assert (
        per_task["resources"]["eval_row+train_task"]["runtime"]
        == requested("train_task")["runtime"] + requested("eval_row")["runtime"]
    )
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_mtil_5shot_submits_one_job_per_run_on_one_gpu(tmp_path):
    """The grouping's target: <= 300 SLURM submissions for config/mtil_5shot.yaml (2,000 ungrouped)."""
    out = count_submissions(
        REPO,
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "all_tables",
        "--configfile",
        str(REPO / "config" / "mtil_5shot.yaml"),
        "--config",
        "check_data=False",
        f"results={tmp_path / 'results'}",
    )
    cfg = load_config(config_from_files([str(REPO / "config" / "mtil_5shot.yaml")], {"check_data": False}))
    trained = [m for m in cfg["methods"] if method_of(cfg, m).trains]
    assert len(trained) >= 15  # the paper's Table 1 rows; untrained methods' rows are local copies
    runs, datasets = len(trained) * len(cfg["seeds"]), len(cfg["tasks"])
    assert out["submissions"] == runs + 1 + datasets <= 300
    # one job per run, the pretrained row, and each test set's evaluation cache (a CPU job)
    assert out["submissions_by_rule"] == {"eval_row+train_task": runs, "eval_row0": 1, "eval_cache": datasets}
    assert out["resources"]["eval_cache"]["gpu"] == 0
    group = out["resources"]["eval_row+train_task"]
    # a run's CPUs: its training's threads and data loaders (codyra.experiment.resources.job_threads)
    tasks = range(1, datasets + 1)
    run_cpus = {max(job_threads(cfg, "train_task", m, i, 1, method_of(cfg, m)) for i in tasks) for m in trained}
    assert group["gpu"] == 1 and group["_cores"] in run_cpus and min(run_cpus) == 8 + 8  # threads 8, 8 workers
    assert group["mem_mb"] == max(requested("train_task")["mem_mb"], requested("eval_row")["mem_mb"])
    assert group["runtime"] == 11 * (requested("train_task")["runtime"] + requested("eval_row")["runtime"])


def test_causal_lm_runs_submit_a_job_per_task_on_the_training_gpus_and_one_per_row_on_one(tmp_path):
    """A TRACE task holds 4 GPUs for hours: its training is a job of its own, and so is its row, which
    generates on one GPU (in the training's job it would leave 3 idle)."""
    cfg = load_yaml((REPO / "config" / "mini_trace.yaml").read_text())
    out = count_submissions(
        REPO,
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "all_tables",
        "--configfile",
        str(REPO / "config" / "mini_trace.yaml"),
        "--config",
        "check_data=False",
        f"results={tmp_path / 'results'}",
    )
    trained = [m for m in cfg["methods"] if cfg["method_configs"][m]["kind"] != "zeroshot"]
    tasks = len(trained) * len(cfg["seeds"]) * len(cfg["tasks"])
    by_rule = out["submissions_by_rule"]
    assert by_rule["train_lm_task"] == by_rule["eval_lm_row"] == tasks and "eval_lm_row+train_lm_task" not in by_rule
    training, row = out["resources"]["train_lm_task"], out["resources"]["eval_lm_row"]
    assert training["gpu"] == requested("train_lm_task")["gpu"] == 4 and row["gpu"] == 1
    assert row["runtime"] == requested("eval_lm_row")["runtime"] and row["mem_mb"] == requested("eval_lm_row")["mem_mb"]


def test_a_configfile_that_extends_a_base_drives_the_dag(tmp_path):
    """Snakemake's --configfile loader knows nothing of `extends`: the workflow resolves it, then --config."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(copy.deepcopy(TINY) | {"results": str(tmp_path / "results")}))
    variant = {
        "extends": "base.yaml",
        "benchmark": "variant",
        "tasks": TINY["tasks"][:2],
        "methods": ["zeroshot", "codyra"],
        "seeds": [0, 1],
    }
    result = snakemake(tmp_path, variant, "-n", "all_tables", "--config", "benchmark=override")
    counts = job_counts(result.stdout)
    assert counts["train_task"] == 2 * 2  # codyra x 2 seeds x the variant's 2 tasks
    assert counts["summarize_run"] == 2 * 2  # 2 methods x 2 seeds
    assert "results/override/" in result.stdout and "results/tiny/" not in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("config", ["config.yaml", "mtil_5shot.yaml"])
def test_the_dag_build_imports_no_torch(tmp_path, config):
    """Every Snakemake start parses the workflow: torch (2-4 s of imports) is left to the jobs."""
    import subprocess
    import sys

    cmd = [sys.executable, "-X", "importtime", "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile")]
    cmd += ["-n", "all_tables", "--configfile", str(REPO / "config" / config), "--config", "check_data=False"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "snakemake.workflow" in imported and "codyra.experiment.config" in imported  # the log is read
    assert not {"torch", "torchvision", "open_clip", "transformers"} & imported


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(p.name for p in (REPO / "config").glob("*.yaml")))
def test_paper_builds_its_dag_on_every_shipped_config(tmp_path, config):
    """Every job of `snakemake paper` (the tables and every analysis that applies) is made, with its
    inputs and params, for every shipped config's methods: a dry run evaluates them all."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "-n", "paper"]
    cmd += ["--configfile", str(REPO / "config" / config), "--config", "check_data=False", f"results={tmp_path}"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "analysis_significance" in done.stdout
