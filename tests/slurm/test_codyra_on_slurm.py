"""codyra on the live local cluster: submitit launches, a requeued training job, the Snakemake grid."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors.torch import load_file

from codyra.cli import main
from codyra.experiment.config import load_config
from codyra.experiment.train_job import task_checkpoint_dir, train_task
from codyra.store.paths import cell_path, row0_cell_path, task_dir
from tests.conftest import TINY, write_yaml
from tests.workflow.conftest import grid_config, job_counts, snakemake

from .conftest import REPO, _run, job_state, wait_for

pytestmark = pytest.mark.slurm
LOCAL_PROFILE = str(REPO / "profiles" / "slurm-local")


@pytest.fixture
def tiny_yaml(tmp_path, tiny_cfg_dict, tiny_pretrained):
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    return write_yaml(tmp_path / "tiny.yaml", tiny_cfg_dict), tiny_cfg_dict


def submitted_ids(out: str) -> list[str]:
    return re.findall(r"submitted job (\d+)", out)


@pytest.mark.slow
def test_cell_on_slurm_with_the_profile_resources(tiny_yaml, capsys, jobs):
    path, cfg = tiny_yaml
    argv = [
        "cell",
        "--config",
        path,
        "--method",
        "pretrained",
        "--i",
        "0",
        "--j",
        "1",
        "--slurm",
        "--slurm-profile",
        LOCAL_PROFILE,
        "--wait",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    jobs.extend(submitted_ids(out))
    assert json.loads(row0_cell_path(cfg, 1).read_text())["j"] == 1
    info = _run(["scontrol", "show", "job", jobs[0]], check=False).stdout
    assert "Partition=debug" in info


@pytest.mark.slow
def test_requeued_training_resumes_and_equals_an_uninterrupted_run(
    tmp_path, tiny_cfg_dict, tiny_pretrained, capsys, jobs
):
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    # submitit lets the requeue's SIGTERM pass, so the first run ends at the SIGKILL that follows it after the
    # cluster's KillWait (10 s, scripts/local-slurm.sh): the steps after the checkpoint must outlast that (about
    # 30 s of the tiny model's steps on 2 cores), or the run ends trained and the rerun finds nothing to resume
    tiny_cfg_dict["train"].update(iterations=1200, batch_size=64, checkpoint_every=20)
    tiny_cfg_dict["tracking"] = {"enabled": False}
    path = write_yaml(tmp_path / "long.yaml", tiny_cfg_dict)
    log = tmp_path / "train.log"
    argv = [
        "--log",
        str(log),
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
        LOCAL_PROFILE,
    ]
    assert main(argv) == 0
    job_id = submitted_ids(capsys.readouterr().out)[0]
    jobs.append(job_id)
    state_file = task_checkpoint_dir(load_config(tiny_cfg_dict), "codyra", 0, 1) / "state.json"
    wait_for(
        lambda: state_file.is_file() and json.loads(state_file.read_text())["step"] >= 40,
        300,
        "a checkpoint at step >= 40",
    )
    _run(["scontrol", "requeue", job_id])
    wait_for(
        lambda: job_state(job_id) in ("COMPLETED", "FAILED", "CANCELLED"),
        600,
        f"requeued job {job_id} to finish",
        interval=1,
    )
    assert job_state(job_id) == "COMPLETED"
    assert re.search(r"resumed .*checkpoint.* from step \d+/1200", log.read_text())

    fresh = {**tiny_cfg_dict, "results": str(tmp_path / "uninterrupted")}
    train_task(load_config(fresh), "codyra", 0, 1)
    requeued = load_file(str(task_dir(tiny_cfg_dict, "codyra", 0, 1) / "update.safetensors"))
    reference = load_file(str(task_dir(fresh, "codyra", 0, 1) / "update.safetensors"))
    assert requeued.keys() == reference.keys()
    assert all(torch.equal(requeued[k], reference[k]) for k in reference)


@pytest.mark.slow
def test_grid_through_slurm_equals_the_local_grid(tmp_path):
    cfg = grid_config(tmp_path / "slurm", methods=["zeroshot", "codyra"], seeds=[0])
    (tmp_path / "slurm").mkdir()
    result = snakemake(tmp_path / "slurm", cfg, "--profile", LOCAL_PROFILE, "all_tables")
    assert job_counts(result.stdout + result.stderr).get("train_task") == len(TINY["tasks"])
    local = grid_config(tmp_path / "local", methods=["zeroshot", "codyra"], seeds=[0])
    (tmp_path / "local").mkdir()
    snakemake(tmp_path / "local", local, "--cores", "2", "all_tables")
    n = len(cfg["tasks"])
    for method in cfg["methods"]:
        for i in range(n + 1):
            for j in range(1, n + 1):
                a = json.loads(cell_path(cfg, method, 0, i, j).read_text())["accuracy"]
                b = json.loads(cell_path(local, method, 0, i, j).read_text())["accuracy"]
                assert a == b, (method, i, j)
