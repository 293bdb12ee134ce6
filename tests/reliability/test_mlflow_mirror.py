"""The MLflow mirror shows what the result files say: no stale run, no gap, artifacts where the server says."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from codyra.experiment.train_job import train_task
from codyra.store.io import read_json
from codyra.store.paths import SUMMARY_FILE, task_dir
from codyra.tracking.mirror import COMPLETE, SETTINGS, JobRun, Store, train_key
from codyra.tracking.sync import sync_mlflow


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory):
    """One SQLite store for the module (its schema migrations are the slow part); each test has its own experiment."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def tracked(tiny_run, store_uri, request):
    return {
        **tiny_run,
        "benchmark": f"tiny-{request.node.name[5:40]}".rstrip("_"),
        "tracking": {"enabled": True, "uri": store_uri},
    }


def runs_for(cfg: dict, key: str) -> list:
    store = Store(cfg)
    return store.client.search_runs([store.experiment_id], filter_string=f"tags.`codyra.key` = '{key}'")


def with_lr(cfg: dict, lr: float, tracking: bool = True) -> dict:
    return {**cfg, "train": {**cfg["train"], "lr": lr}, "tracking": {**cfg["tracking"], "enabled": tracking}}


def test_rerun_after_a_config_change_replaces_the_run_live(tracked):
    tiny_run = tracked
    key = train_key(tiny_run, "lora-r4", 0, 1)
    train_task(with_lr(tiny_run, 0.003), "lora-r4", 0, 1)
    train_task(with_lr(tiny_run, 0.03), "lora-r4", 0, 1)  # the rerun after a change of train.lr
    (run,) = runs_for(tiny_run, key)
    assert run.data.params["train.lr"] == "0.03" and run.info.status == "FINISHED" and run.data.tags[COMPLETE] == "true"
    assert run.data.tags[SETTINGS] == read_json(task_dir(tiny_run, "lora-r4", 0, 1) / SUMMARY_FILE)["settings"]


def test_sync_replaces_a_complete_run_whose_file_was_rewritten_with_other_settings(tracked):
    tiny_run = tracked
    key = train_key(tiny_run, "lora-r4", 0, 1)
    train_task(with_lr(tiny_run, 0.003), "lora-r4", 0, 1)  # logged live
    changed = with_lr(tiny_run, 0.03, tracking=False)
    train_task(changed, "lora-r4", 0, 1)  # rerun while the store was down: files only
    (stale,) = runs_for(tiny_run, key)
    assert stale.data.params["train.lr"] == "0.003"

    synced = with_lr(tiny_run, 0.03)
    counts = sync_mlflow(synced)
    assert counts["replaced"] == 1
    (run,) = runs_for(tiny_run, key)
    assert run.data.params["train.lr"] == "0.03" and run.data.tags[COMPLETE] == "true"
    assert sync_mlflow(synced)["created"] == 0  # idempotent


KILLED_TRAINING = """
import json, os, sys
from codyra.experiment.train_job import train_task
def hard_kill(step):
    if step == 5:  # after the checkpoint of step 4, before any metric was flushed: no cleanup runs
        os._exit(9)
train_task(json.loads(sys.argv[1]), "lora-r4", 0, 1, on_step=hard_kill)
"""


@pytest.mark.slow
def test_resumed_training_run_has_the_whole_curve(tracked):
    tiny_run = tracked
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_TRAINING, json.dumps(tiny_run)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == 9, killed.stderr[-2000:]
    train_task(tiny_run, "lora-r4", 0, 1)  # resumes from step 4
    (run,) = runs_for(tiny_run, train_key(tiny_run, "lora-r4", 0, 1))
    history = Store(tiny_run).client.get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == [1, 2, 3, 4, 5, 6]
    logged = {m.step: m.value for m in history}
    recorded = [
        json.loads(line) for line in (task_dir(tiny_run, "lora-r4", 0, 1) / "history.jsonl").read_text().splitlines()
    ]
    assert logged == pytest.approx({r["step"]: r["loss"] for r in recorded})


@pytest.fixture
def tracking_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    destination = tmp_path / "server-artifacts"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--artifacts-destination",
            str(destination),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("mlflow server did not start") from None
                time.sleep(0.5)
        yield uri, destination
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # its workers outlived the signal (a loaded machine)
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


@pytest.mark.slow
def test_artifacts_go_to_the_server_s_artifacts_destination(tiny_cfg, tracking_server, tmp_path):
    uri, destination = tracking_server
    cfg = {**tiny_cfg, "tracking": {"enabled": True, "uri": uri}}
    artifact = tmp_path / "matrix.json"
    artifact.write_text('{"A": [[1.0]]}')
    run = JobRun(cfg, key="cell/tiny/codyra/seed0/A_1_1", parent=("codyra", 0), name="A[1,1]", tags={})
    assert run.active
    run.finish({"accuracy": 1.0}, artifacts=[artifact])
    stored = list(destination.rglob("matrix.json"))
    assert len(stored) == 1 and stored[0].read_text() == artifact.read_text()
    assert not (tmp_path / "results" / "mlartifacts").exists()
