"""The MLflow mirror for browsing: a results folder that can be copied, the names, tags and
artifacts of a (method, seed) run, and the docs' Table 1 example run against a store."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from codyra.evaluation.metrics import summarize
from codyra.evaluation.results import save_heatmap
from codyra.store.paths import HEATMAP_FILE, MATRIX_FILE, run_dir
from codyra.tracking.mirror import Store, method_color, run_key
from codyra.tracking.sync import log_parent_results, log_tables

from ..conftest import ROOT

# rows: pretrained, after task 1, 2, 3; hand-computed summaries below
A = [[30.0, 20.0, 10.0], [90.0, 25.0, 12.0], [80.0, 85.0, 14.0], [70.0, 80.0, 95.0]]


def write_matrix(cfg: dict, method: str, seed: int, matrix) -> None:
    """A run's matrix.json and heatmap, as summarize_run writes them."""
    tasks = [t["name"] for t in cfg["tasks"]]
    result = {"benchmark": cfg["benchmark"], "method": method, "seed": seed, "tasks": tasks, "A": matrix}
    result["metrics"] = summarize(matrix)
    folder = run_dir(cfg, method, seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MATRIX_FILE).write_text(json.dumps(result))
    save_heatmap(matrix, tasks, f"{method} / seed {seed}", folder / HEATMAP_FILE)


def with_results(cfg: dict, results: Path) -> dict:
    return {**cfg, "results": str(results), "tracking": {**cfg["tracking"], "enabled": True, "uri": None}}


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@contextlib.contextmanager
def mlflow_ui(results: Path):
    """``mlflow ui`` on a results folder as docs/mlflow.md opens it, bound to 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{results / 'mlflow.db'}"]
    command += ["--artifacts-destination", str(results / "mlartifacts"), "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("mlflow ui did not start") from None
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # its workers outlived the signal
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


@pytest.fixture
def store_in_a(tiny_cfg, tmp_path):
    """A results folder A with a store: a (method, seed) run with its matrix, and the tables run."""
    cfg = with_results(tiny_cfg, tmp_path / "A" / "results")
    write_matrix(cfg, "codyra", 0, A)
    store = Store(cfg)
    log_parent_results(store, cfg, "codyra", 0)
    tables = tmp_path / "tables-a"
    tables.mkdir()
    (tables / "table1.md").write_text("table of A\n")
    log_tables(store, tables)
    return cfg


def test_a_copied_results_folder_writes_and_shows_only_its_own_files(store_in_a, tmp_path):
    shutil.copytree(tmp_path / "A", tmp_path / "B")
    before = snapshot(tmp_path / "A")
    cfg = with_results(store_in_a, tmp_path / "B" / "results")
    changed = [row[:2] + [99.0] for row in A]
    write_matrix(cfg, "codyra", 0, changed)
    store = Store(cfg)
    log_parent_results(store, cfg, "codyra", 0)  # the copy's matrix changed: logged again
    write_matrix(cfg, "full-ft", 0, A)
    log_parent_results(store, cfg, "full-ft", 0)  # a new run in the copy
    tables = tmp_path / "tables-b"
    tables.mkdir()
    (tables / "table1.md").write_text("table of B\n")
    log_tables(store, tables)

    assert snapshot(tmp_path / "A") == before  # the original is untouched, byte for byte
    artifacts = tmp_path / "B" / "results" / "mlartifacts"
    parent = store.find(run_key(cfg, "codyra", 0)).info.run_id
    new = store.find(run_key(cfg, "full-ft", 0)).info.run_id
    for run_id in (parent, new):
        listed = {f.path for f in store.client.list_artifacts(run_id)}
        assert {"A.json", "matrix.json", "A_heatmap.png", "images"} <= listed
        assert list(artifacts.rglob(f"{run_id}/artifacts/A.json"))  # in B's folder
    assert [row[-1] for row in json.loads(next(artifacts.rglob(f"{parent}/artifacts/A.json")).read_text())["data"]] == [
        99.0
    ] * 4  # the table of B's matrix, replacing the earlier one (not appended to it)

    tables_run = store.benchmark_run()
    with mlflow_ui(tmp_path / "B" / "results") as url:  # the UI of the copy shows the copy's files
        listed = json.loads(get(f"{url}/ajax-api/2.0/mlflow/artifacts/list?run_uuid={new}"))
        assert {f["path"] for f in listed["files"]} >= {"A.json", "matrix.json", "A_heatmap.png"}
        assert get(f"{url}/get-artifact?path=tables/table1.md&run_uuid={tables_run}") == b"table of B\n"
    assert snapshot(tmp_path / "A") == before


def test_a_run_s_metrics_tags_table_and_image(store_in_a):
    cfg, tasks = store_in_a, [t["name"] for t in store_in_a["tasks"]]
    store = Store(cfg)
    run = store.find(run_key(cfg, "codyra", 0))
    metrics = run.data.metrics
    # by hand, over the trained rows 1..3: Last_j = row 3; Average_j = the column's mean;
    # Transfer_j = the mean of the rows before j; Forgetting = the mean drop of tasks 1..2 by the end
    assert metrics["Last"] == 81.67  # (70 + 80 + 95) / 3, rounded to 0.01
    assert metrics["Average"] == 61.22  # (80 + 63.33 + 40.33) / 3
    assert metrics[f"Average/{tasks[1]}"] == 63.33  # (25 + 85 + 80) / 3
    assert metrics["Transfer"] == 19.0 and metrics[f"Transfer/{tasks[2]}"] == 13.0  # (25 + 13) / 2; (12 + 14) / 2
    assert f"Transfer/{tasks[0]}" not in metrics  # undefined for task 1
    assert metrics["Forgetting"] == 12.5 and metrics["BWT"] == -8.33  # ((90-70) + (85-80)) / 2; (-20 - 5 + 0) / 3
    assert metrics[f"Last/{tasks[0]}"] == 70.0 and metrics["OP"] == 81.67
    curve = store.client.get_metric_history(run.info.run_id, f"Accuracy/{tasks[1]}")
    assert {m.step: m.value for m in curve} == {0: 20.0, 1: 25.0, 2: 85.0, 3: 80.0}  # column 2 after each task i

    tags = run.data.tags
    assert (tags["kind"], tags["method"], tags["seed"], tags["benchmark"]) == ("run", "codyra", "0", "tiny")
    assert tags["mlflow.runColor"] == method_color(cfg, "codyra") == "#2ca02c"  # the grid's third method
    assert method_color(cfg, "zeroshot") != method_color(cfg, "lora-r4")
    experiment = store.client.get_experiment(store.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert json.loads(experiment.tags["codyra.tasks"]) == tasks

    assert json.loads(tags["mlflow.loggedArtifacts"]) == [{"path": "A.json", "type": "table"}]
    table = pd.read_json(
        io.StringIO(Path(store.client.download_artifacts(run.info.run_id, "A.json")).read_text()), orient="split"
    )
    assert table.columns.tolist() == ["model", *tasks] and table[tasks].values.tolist() == A
    assert tags["mlflow.loggedImages"] == "True"
    images = {f.path for f in store.client.list_artifacts(run.info.run_id, "images")}
    assert any(re.match(r"images/A_heatmap\+step\+3\+", path) for path in images)


def test_the_docs_table1_example_prints_table1(store_in_a, monkeypatch, capsys):
    cfg = store_in_a
    write_matrix(cfg, "codyra", 1, [[v + 1.0 for v in row] for row in A])
    write_matrix(cfg, "full-ft", 0, A)
    store = Store(cfg)
    for method, seed in (("codyra", 1), ("full-ft", 0)):
        log_parent_results(store, cfg, method, seed)
    (example,) = re.findall(r"```python\n(.*?)```", (Path(ROOT) / "docs" / "mlflow.md").read_text(), re.DOTALL)
    monkeypatch.chdir(Path(cfg["results"]).parent)  # the example opens results/mlflow.db
    exec(example.replace('benchmark = "mini"', f'benchmark = "{cfg["benchmark"]}"'), {})  # noqa: S102
    lines = capsys.readouterr().out.splitlines()
    tasks = [t["name"] for t in cfg["tasks"]]
    assert lines[0].split() == [*tasks, "Average"]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[2:]}
    # codyra over seeds 0 and 1 (every cell of seed 1 is 1 higher): Last/colour 70.5 ± 0.7 (std of 70, 71)
    assert rows[("Last", "codyra")] == ["70.5", "±", "0.7", "80.5", "±", "0.7", "95.5", "±", "0.7", "82.2", "±", "0.7"]
    assert rows[("Transfer", "codyra")][0] == "-" and rows[("Transfer", "full-ft")][-3:] == ["19.0", "±", "0.0"]
    assert [key for key in rows if key[0] == "Average"] == [("Average", m) for m in cfg["methods"]]
