"""What a run on a cluster relies on, with Snakemake's own job modes: a job submitted to a node
(``--mode remote``, as the SLURM executor starts it) never writes the local MLflow store and says
when tracking fails; its retry stops at once when its failure repeats; a run that would submit
jobs with an untested Snakemake is refused before its first job."""

from __future__ import annotations

import json

import pytest

from codyra.experiment.config import load_config
from codyra.store.paths import row0_cell_path
from codyra.tracking.mirror import tracking_uri

from .conftest import REPO, grid_config, snakemake


def submitted(workdir, cfg, job: str, attempt: int = 1):
    """``job`` (rule:wildcards) run as a SLURM job's Snakemake runs it: remote mode, attempt ``attempt``."""
    return snakemake(
        workdir, cfg, "--mode", "remote", "--target-jobs", job, "--attempt", str(attempt), "--cores", "1", check=False
    )


def row0_config(workdir, pretrained, **tracking) -> dict:
    cfg = grid_config(workdir, methods=["codyra"], tracking={"enabled": True, **tracking})
    cfg["model"]["pretrained"] = str(pretrained)
    loaded = load_config(cfg)
    marker = workdir / "results" / cfg["benchmark"] / "mlflow.ready.json"  # the controller's mlflow_init made it
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"uri": tracking_uri(loaded), "available": True}))
    return cfg


@pytest.mark.slow
def test_a_job_on_a_node_leaves_the_local_store_to_the_workflow(tmp_path, tiny_pretrained):
    cfg = row0_config(tmp_path, tiny_pretrained)
    result = submitted(tmp_path, cfg, "eval_row0:")
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = load_config(cfg)
    assert all(row0_cell_path(loaded, j).is_file() for j in (1, 2, 3))
    assert not (tmp_path / "results" / "mlflow.db").exists()  # no SQLite file written from a node
    log = (tmp_path / "results" / "logs" / "tiny" / "cells" / "pretrained" / "row0.log").read_text()
    assert f"does not write the local store {tracking_uri(loaded)}" in log


@pytest.mark.slow
def test_a_tracking_failure_is_in_the_job_s_log_and_on_its_terminal(tmp_path, tiny_pretrained):
    cfg = row0_config(tmp_path, tiny_pretrained, uri="http://127.0.0.1:9")  # a server nobody runs
    result = submitted(tmp_path, cfg, "eval_row0:")
    assert result.returncode == 0, result.stderr[-3000:]  # the results do not depend on tracking
    assert all(row0_cell_path(load_config(cfg), j).is_file() for j in (1, 2, 3))
    log = (tmp_path / "results" / "logs" / "tiny" / "cells" / "pretrained" / "row0.log").read_text()
    for text in (log, result.stderr):
        assert "MLflow store http://127.0.0.1:9: the store does not answer" in text
        assert "codyra sync-mlflow" in text


@pytest.mark.slow
def test_the_retry_of_a_job_that_failed_on_its_own_input_stops_at_its_start(tmp_path):
    broken = tmp_path / "theta0.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")  # a truncated safetensors header
    cfg = row0_config(tmp_path, broken, enabled=False)
    first = submitted(tmp_path, cfg, "eval_row0:")
    assert first.returncode != 0
    log = tmp_path / "results" / "logs" / "tiny" / "cells" / "pretrained" / "row0.log"
    assert "is corrupted or truncated" in log.read_text()
    (record,) = (tmp_path / "results" / "logs" / "tiny" / "failed-jobs").iterdir()
    assert json.loads(record.read_text())["log"] == str(log)

    retry = submitted(tmp_path, cfg, "eval_row0:", attempt=2)
    assert retry.returncode != 0
    stopped = log.read_text().rstrip().splitlines()[-1]  # the retry's own line, after the first attempt's traceback
    assert stopped.startswith("codyra: not run again: attempt 1 of this job failed")
    assert "is corrupted or truncated" in stopped and f"its log: {log}" in stopped
    assert "not run again" in retry.stdout + retry.stderr


def cluster_run(workdir, cfg, sitecustomize=None):
    """The local rule mlflow_init in a run of the local cluster's profile whose executor submits jobs to
    a cluster (SLURM's job-step executor stands in for SLURM's: it needs no cluster, and a local rule
    runs in the Snakemake process anyway)."""
    env = {"PYTHONPATH": str(sitecustomize)} if sitecustomize else None
    profile = ("--profile", str(REPO / "profiles" / "slurm-local"), "--executor", "slurm-jobstep")
    return snakemake(workdir, cfg, *profile, "mlflow_init", check=False, env=env)


@pytest.mark.slow
def test_a_cluster_run_with_an_untested_snakemake_is_refused_before_its_first_job(tmp_path):
    later = tmp_path / "later-snakemake"
    later.mkdir()
    (later / "sitecustomize.py").write_text("import snakemake\nsnakemake.__version__ = '10.0.0'\n")
    cfg = grid_config(tmp_path, methods=["codyra"], tracking={"enabled": True})
    marker = tmp_path / "results" / "tiny" / "mlflow.ready.json"

    refused = cluster_run(tmp_path, cfg, sitecustomize=later)
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert "snakemake 10.0.0 is outside the versions" in output and "Nothing was submitted" in output
    assert not marker.exists()

    accepted = cluster_run(tmp_path, cfg)  # the tested Snakemake: the run starts
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert marker.is_file()
    assert "MLflow: jobs on the cluster do not write the local store" in accepted.stdout + accepted.stderr
