"""submitit launches: resources from the Snakemake profile, debug/local executors, sweeps."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import submitit
import yaml

from codyra.cli import main, run
from codyra.experiment import slurm as launch
from codyra.experiment.jobs import JOBS, rule_for
from codyra.experiment.slurm import (
    CodyraJob,
    profile_resources,
    strip_launch_flags,
    submitit_parameters,
)
from codyra.store.paths import cell_path, run_dir

from ..conftest import write_yaml
from ..llm.conftest import TINY_TRACE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "command, method, family, rule",
    [
        ("train", "codyra", "clip", "train_task"),
        ("train", "codyra", "causal_lm", "train_lm_task"),
        ("cell", "codyra", "clip", "eval_row"),
        ("cell", "codyra", "causal_lm", "eval_lm_row"),
        ("cell", "pretrained", "causal_lm", "eval_row0"),
        ("heldout", "codyra", "clip", "heldout"),
        ("heldout", "pretrained", "clip", "heldout_row0"),
        ("run", "codyra", "clip", "train_task"),
        ("sweep", "codyra", "causal_lm", "train_lm_task"),
    ],
)
def test_a_launch_takes_the_resources_of_the_rule_that_runs_its_command(command, method, family, rule):
    assert rule_for(command, method, {"model": {"family": family}}) == rule
    assert JOBS[rule].command == (command if command in ("train", "cell", "heldout") else "train")


def test_a_command_no_rule_runs_is_not_launchable():
    with pytest.raises(ValueError, match="codyra tables is not a job the workflow submits"):
        rule_for("tables", None, {"model": {"family": "clip"}})


class RecordingExecutor:
    """submitit's executor interface, recording instead of submitting."""

    def __init__(self):
        self.parameters, self.jobs = {}, []

    def update_parameters(self, **params):
        self.parameters.update(params)

    def submit(self, job):
        self.jobs.append(job)
        return SimpleNamespace(job_id="1", paths=SimpleNamespace(stdout="out.log"))


def test_trace_train_on_slurm_requests_the_lm_training_resources(tmp_path, monkeypatch):
    """A TRACE `codyra train --slurm` is sized like the workflow's train_lm_task (4 GPUs on one node, each
    DeepSpeed rank's threads and the launcher), not train_task."""
    executor = RecordingExecutor()
    monkeypatch.setattr(launch, "executor_for", lambda cfg, kind: executor)
    llm = {**TINY_TRACE.get("llm", {}), "deepspeed": {"enabled": True}}
    path = write_yaml(
        tmp_path / "trace.yaml",
        {**TINY_TRACE, "results": str(tmp_path), "train": {**TINY_TRACE["train"], "threads": 6}, "llm": llm},
    )
    assert (
        main(
            [
                "train",
                "--config",
                path,
                "--method",
                "codyra",
                "--seed",
                "0",
                "--task",
                "1",
                "--slurm",
                "--slurm-profile",
                f"{ROOT}/profiles/slurm",
            ]
        )
        == 0
    )
    # profiles/slurm: train_lm_task gpu 4, mem_mb 330000, runtime 30 (first attempt) over the defaults (partition
    # gpu, gpu_model h100, nodes 1); CPUs: 4 ranks x 6 threads and the launcher
    assert executor.parameters == {
        "name": "codyra-train",
        "cpus_per_task": 4 * 6 + 1,
        "nodes": 1,
        "timeout_min": 30,
        "mem_gb": 323,
        "slurm_partition": "gpu",
        "slurm_gres": "gpu:h100:4",
    }
    (job,) = executor.jobs
    assert job.argv == ["train", "--config", path, "--method", "codyra", "--seed", "0", "--task", "1"]
    assert job.entry is run


def test_a_whole_stream_on_slurm_is_timed_as_the_workflow_run_job(tmp_path, tiny_cfg_dict, monkeypatch):
    """`codyra run --slurm` trains and evaluates N tasks in one job: N x (train_task + eval_row) runtimes."""
    executor = RecordingExecutor()
    monkeypatch.setattr(launch, "executor_for", lambda cfg, kind: executor)
    path = write_yaml(tmp_path / "tiny.yaml", {**tiny_cfg_dict, "results": str(tmp_path)})
    assert (
        main(
            [
                "run",
                "--config",
                path,
                "--method",
                "codyra",
                "--seed",
                "0",
                "--slurm",
                "--slurm-profile",
                f"{ROOT}/profiles/slurm",
            ]
        )
        == 0
    )
    n = len(tiny_cfg_dict["tasks"])
    assert executor.parameters["timeout_min"] == n * (45 + 30)  # profiles/slurm: train_task 45, eval_row 30
    assert executor.parameters["slurm_gres"] == "gpu:h100:1"


def test_profile_resources_overlay_the_rule_on_the_defaults():
    train = profile_resources(f"{ROOT}/profiles/slurm", "train_task")
    cell = profile_resources(f"{ROOT}/profiles/slurm", "eval_row")
    assert train["gpu"] == 1 and train["gpu_model"] == "h100" and train["runtime"] == 45 and train["nodes"] == 1
    assert cell["runtime"] == 30 and cell["mem_mb"] == 32000 and cell["slurm_partition"] == train["slurm_partition"]
    row = profile_resources(f"{ROOT}/profiles/slurm", "eval_lm_row")
    assert row["runtime"] == 30 and row["gpu"] == 1  # generation on one GPU, in a job of its own
    lm = profile_resources(f"{ROOT}/profiles/slurm", "train_lm_task")
    assert lm["gpu"] == 4 and "tasks" not in lm


def test_submitit_parameters_mapping():
    params = submitit_parameters(
        {
            "slurm_partition": "gpu",
            "slurm_account": "",
            "constraint": "h100",
            "gpu": 2,
            "gpu_model": "h100",
            "mem_mb": 64000,
            "runtime": 90,
        },
        cpus=8,
        name="codyra-train",
    )
    assert params == {
        "name": "codyra-train",
        "cpus_per_task": 8,
        "timeout_min": 90,
        "mem_gb": 63,  # ceil(64000 / 1024)
        "slurm_partition": "gpu",
        "slurm_constraint": "h100",
        "slurm_gres": "gpu:h100:2",
    }
    assert submitit_parameters({"gpu": 1}, cpus=2, name="x")["gpus_per_node"] == 1
    assert "gpus_per_node" not in submitit_parameters({"gpu": 0, "gpu_model": ""}, cpus=2, name="x")


def test_launch_flags_are_stripped_from_the_job_command():
    argv = [
        "--log",
        "a.log",
        "cell",
        "--slurm",
        "--slurm-profile",
        "profiles/slurm-local",
        "--wait",
        "--executor=local",
        "--method",
        "codyra",
        "--seed",
        "0",
        "--i",
        "1",
        "--j",
        "1",
    ]
    assert strip_launch_flags(argv) == [
        "--log",
        "a.log",
        "cell",
        "--method",
        "codyra",
        "--seed",
        "0",
        "--i",
        "1",
        "--j",
        "1",
    ]


def test_checkpoint_resubmits_the_same_command():
    job = CodyraJob(["train", "--method", "codyra", "--seed", "0", "--task", "1"], {"benchmark": "x"}, run)
    delayed = job.checkpoint()
    assert isinstance(delayed, submitit.helpers.DelayedSubmission)
    assert delayed.function == job


def test_cell_through_submitit_debug_executor(tmp_path, tiny_cfg_dict, tiny_pretrained, capsys):
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    path = write_yaml(tmp_path / "tiny.yaml", tiny_cfg_dict)
    argv = [
        "cell",
        "--config",
        path,
        "--method",
        "pretrained",
        "--i",
        "0",
        "--j",
        "2",
        "--slurm",
        "--executor",
        "debug",
        "--slurm-profile",
        f"{ROOT}/profiles/slurm-local",
        "--wait",
    ]
    assert main(argv) == 0
    assert "submitted job" in capsys.readouterr().out
    cell = json.loads((tmp_path / "results" / "tiny" / "pretrained" / "cells" / "A_0_2.json").read_text())
    assert cell["task"] == "digits"


@pytest.mark.slow
def test_train_through_submitit_local_executor(tmp_path, tiny_cfg_dict, tiny_pretrained):
    """A separate process (submitit's LocalExecutor) trains and stores the update."""
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    path = write_yaml(tmp_path / "tiny.yaml", tiny_cfg_dict)
    argv = [
        "train",
        "--config",
        path,
        "--method",
        "lora-r4",
        "--seed",
        "0",
        "--task",
        "1",
        "--slurm",
        "--executor",
        "local",
        "--slurm-profile",
        f"{ROOT}/profiles/slurm-local",
        "--wait",
    ]
    assert main(argv) == 0
    assert (run_dir(tiny_cfg_dict, "lora-r4", 0) / "task1" / "summary.json").is_file()


def test_sweep_runs_one_stream_per_grid_point(tmp_path, tiny_cfg_dict, tiny_pretrained):
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    tiny_cfg_dict["tasks"] = tiny_cfg_dict["tasks"][:2]
    tiny_cfg_dict["tracking"] = {"enabled": False}
    path = write_yaml(tmp_path / "tiny.yaml", tiny_cfg_dict)
    assert main(["sweep", "--config", path, "--method", "codyra", "--grid", "kappa_max=0.0,10.0"]) == 0
    low = json.loads((run_dir(tiny_cfg_dict, "codyra-kappa_max0.0", 0) / "task1" / "summary.json").read_text())
    high = json.loads((run_dir(tiny_cfg_dict, "codyra-kappa_max10.0", 0) / "task1" / "summary.json").read_text())
    assert low["job"]["method"]["kappa_max"] == 0.0 and low["active_rank_total"] == 18 * 4  # nothing pruned
    assert high["active_rank_total"] == 0  # everything pruned
    assert cell_path(tiny_cfg_dict, "codyra-kappa_max10.0", 0, 2, 2).is_file()


@pytest.mark.parametrize("profile", ["slurm", "slurm-local"])
def test_profile_requests_gpus_one_way_and_no_empty_constraint(profile):
    """What the SLURM plugin turns each rule's resources into: --gpus=<model>:N for GPU rules, nothing for CPU rules."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    class Job:  # the plugin reads job.resources.get(...) and attributes
        def __init__(self, resources):
            self.resources = type("Resources", (dict,), {"__getattr__": dict.__getitem__})(resources)

    config = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
    for rule in [None, *config["set-resources"]]:
        resources = profile_resources(ROOT / "profiles" / profile, rule or "default")
        assert resources.get("constraint", "x") != "", f"{profile} {rule}: -C ''"
        gres = set_gres_string(Job(resources)).strip()
        gpus = int(resources.get("gpu") or 0)
        assert gres == (f"--gpus={resources['gpu_model']}:{gpus}" if gpus else ""), (profile, rule, gres)


def test_a_submitted_command_reads_the_weights_cache_only_unless_the_user_chose(monkeypatch):
    """On the compute node the job runs with HF_HUB_OFFLINE=1 (no wait on a network it lacks), unless set."""
    seen = []

    def entry(argv, config):
        seen.append(os.environ.get("HF_HUB_OFFLINE"))
        return 0

    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # restored after the test
    assert launch.CodyraJob(["cell"], {}, entry)() == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a site whose nodes have internet keeps it
    assert launch.CodyraJob(["cell"], {}, entry)() == 0
    assert seen == ["1", "0"]
