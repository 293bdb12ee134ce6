"""The MLflow mirror for browsing: a results folder that can be copied, the names, tags and
artifacts of a (method, seed) run, a method's summary over its seeds, names that sort in stream
order, the saved views and the link that opens them, a store of the earlier names set aside, and
the docs' Table 1 example run against a store."""

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
from codyra.tracking.findings import ui_base
from codyra.tracking.mirror import LAYOUT, Store, method_color, row_run, run_key, task_labels, train_run
from codyra.tracking.sync import log_parent_results, log_summary, log_tables, metric_rows
from codyra.tracking.views import NOTE, SHARED_VIEW, SUMMARY, saved_views, view_link

from ..conftest import ROOT

# rows: pretrained, after task 1, 2, 3; hand-computed summaries below
A = [[30.0, 20.0, 10.0], [90.0, 25.0, 12.0], [80.0, 85.0, 14.0], [70.0, 80.0, 95.0]]


def write_matrix(cfg: dict, method: str, seed: int, matrix, settings: str = "s") -> None:
    """A run's matrix.json and heatmap, as summarize_run writes them (every cell's settings ``settings``)."""
    tasks = list(cfg["tasks"])
    result = {"benchmark": cfg["benchmark"], "method": method, "seed": seed, "tasks": tasks, "A": matrix}
    result["settings"] = [[settings] * len(tasks) for _ in matrix]
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


@pytest.mark.slow
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
    cfg, tasks = store_in_a, list(store_in_a["tasks"])
    store = Store(cfg)
    run = store.find(run_key(cfg, "codyra", 0))
    metrics = run.data.metrics
    assert tasks == ["colour", "digits", "count"] and run.info.run_name == "codyra s0"
    # by hand, over the trained rows 1..3: Last_j = row 3; Average_j = the column's mean;
    # Transfer_j = the mean of the rows before j; Forgetting = the mean drop of tasks 1..2 by the end
    assert metrics["Last"] == 81.67  # (70 + 80 + 95) / 3, rounded to 0.01
    assert metrics["Average"] == 61.22  # (80 + 63.33 + 40.33) / 3
    assert metrics["Average/02_digits"] == 63.33  # (25 + 85 + 80) / 3
    assert metrics["Transfer"] == 19.0 and metrics["Transfer/03_count"] == 13.0  # (25 + 13) / 2; (12 + 14) / 2
    assert "Transfer/01_colour" not in metrics  # undefined for task 1
    assert metrics["Forgetting"] == 12.5 and metrics["BWT"] == -8.33  # ((90-70) + (85-80)) / 2; (-20 - 5 + 0) / 3
    assert metrics["Last/01_colour"] == 70.0 and metrics["OP"] == 81.67
    assert "Last std" not in metrics  # one seed: the spread is the summary run's
    curve = store.client.get_metric_history(run.info.run_id, "Accuracy/02_digits")
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


@pytest.mark.slow
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
    assert lines[0].split() == ["01_colour", "02_digits", "03_count", "Average"]  # the tasks in stream order
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[2:]}
    # codyra over seeds 0 and 1 (every cell of seed 1 is 1 higher): Last/colour 70.5 ± 0.7 (std of 70, 71)
    assert rows[("Last", "codyra")] == ["70.5", "±", "0.7", "80.5", "±", "0.7", "95.5", "±", "0.7", "82.2", "±", "0.7"]
    assert rows[("Transfer", "codyra")][0] == "-" and rows[("Transfer", "full-ft")][-3:] == ["19.0", "±", "0.0"]
    assert [key for key in rows if key[0] == "Average"] == [("Average", m) for m in cfg["methods"]]


# seed 1 of codyra: seed 0's A with another last row (Transfer, which reads the rows before each task, unchanged)
A_SEED1 = [*A[:3], [60.0, 70.0, 95.0]]


def summary_runs(store: Store) -> list:
    return store.client.search_runs([store.experiment_id], filter_string="tags.kind = 'summary'")


def test_a_method_s_summary_run_is_the_mean_and_std_over_its_seeds(tiny_cfg, tmp_path):
    cfg = with_results({**tiny_cfg, "seeds": [0, 1]}, tmp_path / "results")
    store = Store(cfg)
    write_matrix(cfg, "codyra", 0, A)
    log_parent_results(store, cfg, "codyra", 0)
    assert summary_runs(store) == []  # seed 1 has no matrix yet
    write_matrix(cfg, "codyra", 1, A_SEED1)
    log_parent_results(store, cfg, "codyra", 1)
    (run,) = summary_runs(store)
    metrics = run.data.metrics
    # Last: seed 0 (70 + 80 + 95) / 3 = 81.667, seed 1 (60 + 70 + 95) / 3 = 75; their mean and sample std
    # (ddof 1: |81.667 - 75| / sqrt(2) = 4.714), rounded to 0.01
    assert (metrics["Last"], metrics["Last std"]) == (78.33, 4.71)
    # Forgetting: seed 0 ((90 - 70) + (85 - 80)) / 2 = 12.5, seed 1 ((90 - 60) + (85 - 70)) / 2 = 22.5
    assert (metrics["Forgetting"], metrics["Forgetting std"]) == (17.5, 7.07)
    # BWT: seed 0 (-20 - 5 + 0) / 3 = -8.333, seed 1 (-30 - 15 + 0) / 3 = -15
    assert (metrics["BWT"], metrics["BWT std"]) == (-11.67, 4.71)
    assert (metrics["Transfer"], metrics["Transfer std"]) == (19.0, 0.0)  # the same rows before each task
    assert metrics["Last/01_colour"] == 65.0 and "Transfer/01_colour" not in metrics  # (70 + 60) / 2; undefined
    curve = store.client.get_metric_history(run.info.run_id, "Accuracy/01_colour")
    assert {m.step: m.value for m in curve} == {0: 30.0, 1: 90.0, 2: 80.0, 3: 65.0}  # column 1, mean over seeds
    tags = run.data.tags
    assert run.info.run_name == "codyra (2 seeds)" and "mlflow.parentRunId" not in tags
    assert (tags["method"], tags["seeds"], tags["mlflow.runColor"]) == ("codyra", "0,1", method_color(cfg, "codyra"))
    assert run.data.params["method.kappa_max"] == str(cfg["method_configs"]["codyra"]["kappa_max"])

    log_parent_results(store, cfg, "codyra", 1)  # nothing changed: the same run
    assert [r.info.run_id for r in summary_runs(store)] == [run.info.run_id]
    write_matrix(cfg, "codyra", 1, A)  # seed 1 recomputed: the summary is rebuilt
    log_parent_results(store, cfg, "codyra", 1)
    (rebuilt,) = summary_runs(store)
    assert rebuilt.info.run_id != run.info.run_id and rebuilt.data.metrics["Last std"] == 0.0
    write_matrix(cfg, "codyra", 1, A, settings="other")  # seeds computed with different settings: no summary
    log_parent_results(store, cfg, "codyra", 1)
    assert summary_runs(store) == []
    log_summary(store, {**cfg, "seeds": [0]}, "codyra")  # a config over other seeds: a summary of its own
    assert [r.info.run_name for r in summary_runs(store)] == ["codyra (1 seed)"]


def test_per_task_names_sort_in_stream_order():
    tasks = ["zebra", "apple", "mango", "kiwi", "fig", "date", "cherry", "banana", "lime", "grape", "elder", "quince"]
    labels = task_labels(tasks)
    assert labels[0] == "01_zebra" and labels[-1] == "12_quince"
    n = len(tasks)
    matrix = [[float(10 * i + j) for j in range(n)] for i in range(n + 1)]
    rows = metric_rows([{"tasks": tasks, "A": matrix, "metrics": summarize(matrix)}])
    for name in ("Accuracy", "Last", "Average"):
        names = [key for key in rows[0] if key.startswith(f"{name}/")]
        assert sorted(names) == [f"{name}/{label}" for label in labels]  # alphabetical order is stream order
    assert sorted(key for key in rows[0] if key.startswith("Transfer/")) == [f"Transfer/{x}" for x in labels[1:]]

    cfg = {"benchmark": "b", "tasks": list(tasks), "methods": ["codyra"], "method_configs": {}}
    trainings = [train_run(cfg, "codyra", 2, i)["name"] for i in range(1, n + 1)]
    matrix_rows = [row_run(cfg, "codyra", 2, i)["name"] for i in range(n + 1)]
    assert trainings[0] == "codyra s2 task01-zebra" and matrix_rows[:2] == ["codyra s2 row00", "codyra s2 row01"]
    assert sorted(trainings) == trainings and sorted(matrix_rows) == matrix_rows  # stream order, method and seed
    assert row_run(cfg, "pretrained", None, 0)["name"] == "pretrained row00"


def test_the_link_opens_the_summary_view_the_store_saved(tiny_cfg, tmp_path):
    cfg = with_results({**tiny_cfg, "seeds": [0, 1]}, tmp_path / "results")
    store = Store(cfg)
    for seed, matrix in ((0, A), (1, A_SEED1)):  # Last: codyra 78.33, full-ft 75 (A_SEED1 twice)
        write_matrix(cfg, "codyra", seed, matrix)
        write_matrix(cfg, "full-ft", seed, A_SEED1)
        log_parent_results(store, cfg, "codyra", seed)
        log_parent_results(store, cfg, "full-ft", seed)
    experiment = store.client.get_experiment(store.experiment_id)
    link = view_link(store.experiment_id, SUMMARY, base=ui_base(cfg))
    assert link == (
        f"http://127.0.0.1:5000/#/experiments/{store.experiment_id}/runs?workflowType=machine_learning"
        "&viewStateShareKey=summary"
    )
    envelope = json.loads(experiment.tags[f"{SHARED_VIEW}{SUMMARY}"])  # the tag the link's key names
    assert envelope["name"] == saved_views(cfg)[SUMMARY][0] and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    shown = store.client.search_runs(
        [store.experiment_id], filter_string=state["searchFilter"], order_by=[state["orderByKey"] + " DESC"]
    )
    assert [r.info.run_name for r in shown] == ["codyra (2 seeds)", "full-ft (2 seeds)"]  # summaries, best Last first
    columns = [re.fullmatch(r"metrics\.`(.+)`", c).group(1) for c in state["selectedColumns"]]
    assert columns[:2] == ["Last", "Last std"] and state["columnOrder"] == state["selectedColumns"]
    assert all(set(columns) <= set(r.data.metrics) for r in shown)  # every column is a metric of every summary
    note = experiment.tags[NOTE]
    assert f"(#/experiments/{store.experiment_id}/runs?workflowType=machine_learning&viewStateShareKey=summary)" in note
    trace = {**cfg, "data": {**cfg["data"], "kind": "trace"}}
    assert saved_views(trace)[SUMMARY][1]["orderByKey"] == "metrics.`OP`"  # TRACE leads with OP (its Table 2)


def test_a_store_with_the_earlier_names_is_set_aside_not_mixed(tiny_cfg, tmp_path):
    from mlflow import MlflowClient

    cfg = with_results(tiny_cfg, tmp_path / "results")
    Path(cfg["results"]).mkdir(parents=True)
    client = MlflowClient(f"sqlite:///{Path(cfg['results']) / 'mlflow.db'}")
    empty = client.create_experiment("codyra/tiny")  # made by an earlier mlflow-init, never written
    assert Store(cfg).experiment_id == empty  # adopted as it is
    client.delete_experiment_tag(empty, LAYOUT)  # as the earlier code left it ...
    old = client.create_run(empty, run_name="codyra/seed0").info.run_id  # ... with a run of the earlier names
    client.log_metric(old, "Accuracy/colour", 80.0)

    store = Store(cfg)
    assert store.experiment_id != empty
    assert client.get_experiment(empty).name == "codyra/tiny (layout 1)"  # kept, under another name
    assert client.get_experiment_by_name("codyra/tiny").experiment_id == store.experiment_id
    write_matrix(cfg, "codyra", 0, A)
    log_parent_results(store, cfg, "codyra", 0)
    names = {key for run in store.client.search_runs([store.experiment_id]) for key in run.data.metrics}
    assert "Accuracy/01_colour" in names and "Accuracy/colour" not in names
    assert Store(cfg).experiment_id == store.experiment_id  # set aside once
