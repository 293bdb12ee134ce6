"""MLflow on a cluster: jobs on the nodes never write a local store, the workflow's own process fills
it from the result files, and a tracking failure is said in the job's log and on the terminal."""

from __future__ import annotations

import pytest

from codyra.cli import run_stream
from codyra.evaluation.results import summarize_run
from codyra.progress import job_log
from codyra.tracking import mirror
from codyra.tracking.mirror import SUBMITTED_JOB, JobRun, Store, local_store_refused, row_run, with_store


@pytest.fixture
def tracked(tiny_run):
    """The tiny run with the default store: a SQLite file in its results folder."""
    tiny_run["tracking"] = {"enabled": True, "uri": None}
    return tiny_run


def test_a_job_on_a_node_writes_no_local_store_and_a_server_still_gets_its_runs(monkeypatch):
    monkeypatch.setenv(SUBMITTED_JOB, "1")
    assert local_store_refused("sqlite:////shared/project/results/mlflow.db")
    assert not local_store_refused("http://mlflow.cluster.internal:5000")
    monkeypatch.delenv(SUBMITTED_JOB)
    assert not local_store_refused("sqlite:////shared/project/results/mlflow.db")  # the workflow's own process


@pytest.mark.slow
def test_the_runs_of_jobs_on_the_nodes_come_from_their_files_when_their_run_is_summarized(tracked, monkeypatch):
    cfg = tracked
    store_file = mirror.artifact_root(cfg).parent / "mlflow.db"
    monkeypatch.setenv(SUBMITTED_JOB, "1")  # every job of the run on a node
    run_stream(cfg, "lora-r4", 0)
    assert not store_file.exists()

    monkeypatch.delenv(SUBMITTED_JOB)  # the workflow's summarize_run, a local job of the Snakemake process
    summarize_run(cfg, "lora-r4", 0)
    runs = Store(cfg).runs_by_key()
    bench = cfg["benchmark"]
    assert {key for key in runs if "/lora-r4/" in key} == {
        *(f"train/{bench}/lora-r4/seed0/task{i}" for i in (1, 2, 3)),
        *(f"row/{bench}/lora-r4/seed0/A_{i}" for i in (0, 1, 2, 3)),
        f"run/{bench}/lora-r4/seed0",
        f"summary/{bench}/lora-r4/seeds0",  # over its one seed
    }
    parent = runs[f"run/{bench}/lora-r4/seed0"]
    assert "Average" in parent.data.metrics and parent.info.status == "FINISHED"
    names = [
        runs[f"{kind}/{bench}/lora-r4/seed0/{part}"].info.run_name
        for kind, part in (("train", "task1"), ("row", "A_0"))
    ]
    assert [parent.info.run_name, *names] == ["lora-r4 s0", "lora-r4 s0 task01-colour", "lora-r4 s0 row00"]
    assert all(runs[key].data.tags[mirror.COMPLETE] == "true" for key in runs if key.startswith(("train/", "row/")))
    summarize_run(cfg, "lora-r4", 0)  # summarized again (a rerun of the local job): no duplicate
    assert len(Store(cfg).runs_by_key()) == len(runs)


class Broken(RuntimeError):
    pass


def test_a_tracking_failure_is_in_the_job_s_log_and_on_the_terminal(tracked, tmp_path, monkeypatch, capfd):
    cfg = tracked
    log = tmp_path / "row1.log"

    def refuse(*args, **kwargs):
        raise Broken("database is locked")

    with job_log(log):
        run = JobRun(cfg, **row_run(cfg, "lora-r4", 0, 1))
        assert run.active
        monkeypatch.setattr(Store, "log_metrics", refuse)
        run.metrics({"step": 0, "A_1_1": 50.0})
        run.flush()  # the store fails mid-job: the job goes on without it
        assert not run.active
        assert not with_store(cfg, lambda store: refuse())
    uri = mirror.tracking_uri(cfg)
    terminal = capfd.readouterr().err
    for text in (log.read_text(), terminal):
        assert f"MLflow store {uri}: logging stopped (Broken: database is locked)" in text
        assert "codyra sync-mlflow" in text
