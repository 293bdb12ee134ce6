"""The tiny grid end to end through Snakemake: tables, one-cell reruns, MLflow mirror and sync."""

from __future__ import annotations

import csv
import json
import os

import pytest

from codyra.evaluation.metrics import summarize
from codyra.experiment.config import load_config
from codyra.store.paths import cell_path, figures_dir, heldout_path, row0_heldout_path, run_dir, tables_dir
from codyra.tracking.mirror import KEY, Store, config_task_labels
from codyra.tracking.sync import sync_mlflow

from .conftest import grid_config, job_counts, snakemake

pytestmark = pytest.mark.slow


def matrix_from_cells(cfg, method, seed):
    n = len(cfg["tasks"])
    return [
        [json.loads(cell_path(cfg, method, seed, i, j).read_text())["accuracy"] for j in range(1, n + 1)]
        for i in range(n + 1)
    ]


CSV_ROUNDING = 0.5e-4  # the CSVs' values: 4 decimals (codyra.evaluation.table_formats.CSV_EXTRA_DECIMALS)


def test_tables_equal_metrics_of_the_cell_files(finished_grid):
    _, raw, _ = finished_grid
    cfg = load_config(raw)
    folder = tables_dir(cfg)
    names = {p.name for p in folder.iterdir()}
    for table in ("table1", "forgetting", "A_codyra", "A_full-ft", "A_zeroshot"):
        assert {f"{table}.md", f"{table}.csv", f"{table}.tex"} <= names
    rows = list(csv.DictReader((folder / "table1.csv").open()))
    for method in cfg["methods"]:
        per_seed = [summarize(matrix_from_cells(cfg, method, s)) for s in cfg["seeds"]]
        for block, key in (("Transfer", "transfer"), ("Average", "average"), ("Last", "last")):
            got = {r["column"]: r for r in rows if r["block"] == block and r["method"] == method}
            want = sum(s[key] for s in per_seed) / len(per_seed)
            assert float(got["Average"]["mean"]) == pytest.approx(want, abs=CSV_ROUNDING)
            first = cfg["tasks"][0]
            if key == "transfer":
                assert got[first]["mean"] == ""  # task 1 has no transfer
            else:
                assert float(got[first]["mean"]) == pytest.approx(
                    sum(s["per_task"][key][0] for s in per_seed) / len(per_seed), abs=CSV_ROUNDING
                )
    forgetting = {
        r["method"]: r for r in csv.DictReader((folder / "forgetting.csv").open()) if r["column"] == "Forgetting"
    }
    want = [summarize(matrix_from_cells(cfg, "full-ft", s))["forgetting"] for s in cfg["seeds"]]
    assert float(forgetting["full-ft"]["mean"]) == pytest.approx(sum(want) / len(want), abs=CSV_ROUNDING)
    assert forgetting["zeroshot"]["mean"] == "0.0"
    assert sum(r["best"] == "True" for r in forgetting.values()) >= 1
    assert forgetting["zeroshot"]["row"] == "Zero-shot" and forgetting["full-ft"]["row"] == "Full FT"
    assert forgetting["zeroshot"]["best"] == "False"  # no forgetting, yet the reference is never best
    latex = (folder / "table1.tex").read_text()
    assert "\\toprule" in latex and "\\textbf{" in latex and "$\\pm$" in latex
    assert f"\\label{{tab:{cfg['benchmark']}-table1}}" in latex


def test_each_method_has_a_mean_heatmap_and_each_run_a_vector_one(finished_grid):
    _, raw, _ = finished_grid
    cfg = load_config(raw)
    for method in cfg["methods"]:
        for ext in ("png", "pdf"):
            assert (figures_dir(cfg) / f"A_{method}.{ext}").stat().st_size > 0
        for seed in cfg["seeds"]:
            assert (run_dir(cfg, method, seed) / "A_heatmap.pdf").read_bytes().startswith(b"%PDF")


def test_rerunning_one_cell_recomputes_only_its_row(finished_grid):
    workdir, raw, _ = finished_grid
    cfg = load_config(raw)
    results = workdir / "results"
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*") if p.is_file() and "logs" not in p.parts}
    target = cell_path(cfg, "codyra", 1, 2, 3)
    row = {cell_path(cfg, "codyra", 1, 2, j) for j in range(1, len(cfg["tasks"]) + 1)}
    old = {p: json.loads(p.read_text()) for p in row}
    snakemake(workdir, raw, "--cores", "1", "-f", str(target))
    after = {p: p.stat().st_mtime_ns for p in results.rglob("*") if p.is_file() and "logs" not in p.parts}
    changed = {p for p in after if after[p] != before.get(p)}
    # the cell's row (one job builds theta_2 once), plus MLflow's own store (the cells' runs are logged again)
    assert {p for p in changed if "mlflow.db" not in p.name and "mlartifacts" not in p.parts} == row
    for p in row:  # deterministic: the same cells, only their timing differs
        assert {k: v for k, v in json.loads(p.read_text()).items() if k != "seconds"} == {
            k: v for k, v in old[p].items() if k != "seconds"
        }


def test_mlflow_mirrors_the_grid(finished_grid):
    _, raw, _ = finished_grid
    cfg = load_config(raw)
    store = Store(cfg)
    runs = store.runs_by_key()
    n, seeds, methods = len(cfg["tasks"]), cfg["seeds"], cfg["methods"]
    trained = [m for m in methods if m != "zeroshot"]
    expected = (
        1
        + len(methods)
        + (1 + len(methods) * len(seeds))
        + 1
        + len(trained) * len(seeds) * n
        + len(methods) * len(seeds) * (n + 1)
    )
    assert len(runs) == expected  # tables, summaries, parents, shared row 0, training tasks, rows; no duplicates
    assert all(
        r.data.tags.get("codyra.complete") == "true" for k, r in runs.items() if k.startswith(("train/", "row/"))
    )
    assert all(r.info.status == "FINISHED" for r in runs.values())  # the pretrained parent included
    assert all(
        r.data.tags["codyra.version"] and r.data.tags["version.torch"] and r.data.tags["codyra.git_commit"]
        for r in runs.values()
    )
    train = runs[f"train/{cfg['benchmark']}/codyra/seed1/task2"]
    assert train.data.tags["task"] == cfg["tasks"][1] and train.data.tags["kind"] == "train"
    assert train.data.params["method.kappa_max"] == str(cfg["method_configs"]["codyra"]["kappa_max"])
    history = store.client.get_metric_history(train.info.run_id, "loss")
    assert len(history) == cfg["train"]["iterations"]
    assert len({m.timestamp for m in history}) > 1  # each point stamped when it was measured
    assert {"kappa", "active_rank_total", "lr"} <= set(train.data.metrics)
    ranks = store.client.get_metric_history(train.info.run_id, "active_rank_total")
    assert (
        min(m.step for m in ranks) >= 1 and max(m.step for m in ranks) == cfg["train"]["iterations"]
    )  # no final value at step 0
    labels = config_task_labels(cfg)
    row = runs[f"row/{cfg['benchmark']}/full-ft/seed0/A_3"]  # one run per row, its cells as metrics
    assert row.data.metrics == {
        f"Accuracy/{labels[j - 1]}": round(json.loads(cell_path(cfg, "full-ft", 0, 3, j).read_text())["accuracy"], 2)
        for j in range(1, n + 1)
    } | {"seconds": row.data.metrics["seconds"]}
    assert row.info.run_name == "full-ft s0 row03"  # names that stand alone
    assert train.info.run_name == f"codyra s1 task02-{cfg['tasks'][1]}"
    assert row.data.tags["mlflow.parentRunId"] == runs[f"run/{cfg['benchmark']}/full-ft/seed0"].info.run_id
    parent = runs[f"run/{cfg['benchmark']}/codyra/seed0"]
    artifacts = {a.path for a in store.client.list_artifacts(parent.info.run_id)}
    assert {"matrix.json", "A_heatmap.png", "A.json"} <= artifacts and "tables" not in artifacts  # tables attach once:
    assert "tables" in {a.path for a in store.client.list_artifacts(runs[f"tables/{cfg['benchmark']}"].info.run_id)}
    assert "Forgetting" in parent.data.metrics
    assert parent.data.params["method.kappa_max"] == str(cfg["method_configs"]["codyra"]["kappa_max"])
    assert parent.data.params["train.lr"] == str(cfg["train"]["lr"])
    matrix = json.loads((cell_path(cfg, "codyra", 0, 1, 1).parent.parent / "matrix.json").read_text())
    for j, label in enumerate(labels):  # the accuracy on task j after each task i
        points = {m.step: m.value for m in store.client.get_metric_history(parent.info.run_id, f"Accuracy/{label}")}
        assert points == {i: round(row[j], 2) for i, row in enumerate(matrix["A"])}
    for name in ("transfer", "average", "last"):
        assert parent.data.metrics[f"{name.title()}/{labels[-1]}"] == round(matrix["metrics"]["per_task"][name][-1], 2)
    children = [r for r in runs.values() if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.end_time == max(r.info.end_time for r in children)  # the parent ends with its own work
    for key, run in runs.items():  # ... and every parent starts with it (made by its first job, not by mlflow-init)
        if key.startswith("run/"):
            first = min(
                r.info.start_time for r in runs.values() if r.data.tags.get("mlflow.parentRunId") == run.info.run_id
            )
            assert 0 <= first - run.info.start_time < 5000, key
    assert sync_mlflow(cfg)["created"] == 0  # live logging left nothing to fill in


def test_the_run_ends_saying_what_it_found(finished_grid):
    _, raw, result = finished_grid
    cfg = load_config(raw)
    said = result.stdout
    headline = (tables_dir(cfg) / "forgetting.md").read_text().strip()
    assert f"== What the grid of {cfg['benchmark']} found" in said and headline in said
    assert f"Tables: {tables_dir(cfg)}/" in said
    experiment = Store(cfg).experiment_id
    assert f"/#/experiments/{experiment}/runs?workflowType=machine_learning&viewStateShareKey=summary" in said


def test_unreachable_tracking_keeps_results_and_sync_fills_mlflow_once(tmp_path):
    cfg = grid_config(tmp_path, methods=["zeroshot", "codyra"], seeds=[0])
    cfg["tracking"] = {"uri": "http://127.0.0.1:9"}  # nothing listens there
    snakemake(tmp_path, cfg, "--cores", "2", "all_tables")  # succeeds without MLflow
    loaded = load_config(cfg)
    assert (tables_dir(loaded) / "table1.md").is_file()
    assert all(cell_path(loaded, "codyra", 0, i, j).is_file() for i in range(4) for j in range(1, 4))
    assert (
        "does not answer"
        in (tmp_path / "results" / "logs" / "tiny" / "train" / "codyra" / "seed0" / "task1.log").read_text()
    )

    loaded["tracking"]["uri"] = f"sqlite:///{tmp_path / 'later.db'}"
    first = sync_mlflow(loaded)
    second = sync_mlflow(loaded)
    runs = Store(loaded).runs_by_key()
    assert first["created"] == len([k for k in runs if k.startswith(("train/", "row/"))]) > 0
    assert second == {"created": 0, "replaced": 0, "kept": first["created"]}
    assert len({r.data.tags[KEY] for r in runs.values()}) == len(runs)
    paths = [cell_path(loaded, "codyra", 0, 2, j) for j in range(1, 4)]  # a rebuilt run is dated when its job did
    written = max(int(p.stat().st_mtime * 1000) for p in paths)  # the work (its cells), not at sync time
    began = min(int((p.stat().st_mtime - json.loads(p.read_text())["seconds"]) * 1000) for p in paths)
    run = runs[f"row/{loaded['benchmark']}/codyra/seed0/A_2"]
    assert run.info.end_time == written and run.info.start_time == began
    cell = f"Accuracy/{config_task_labels(loaded)[0]}"
    assert {m.timestamp for m in Store(loaded).client.get_metric_history(run.info.run_id, cell)} == {written}
    parent = runs[f"run/{loaded['benchmark']}/codyra/seed0"]
    assert parent.info.start_time == min(
        r.info.start_time for r in runs.values() if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    )
    assert os.path.getsize(tmp_path / "later.db") > 0


def test_a_failed_job_shows_its_log_tail_and_leaves_no_result(tmp_path):
    broken = tmp_path / "theta0.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")  # a truncated safetensors header
    cfg = grid_config(tmp_path, methods=["codyra"], seeds=[0])
    cfg["model"]["pretrained"] = str(broken)
    result = snakemake(tmp_path, cfg, "--cores", "1", "all_tables", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "results/logs/tiny/" in output  # the failed job's log path ...
    assert "is corrupted or truncated" in output and "Traceback" in output  # ... and its last lines
    loaded = load_config(cfg)
    assert not any(cell_path(loaded, "codyra", 0, i, j).exists() for i in range(4) for j in range(1, 4))


def test_a_grid_with_one_more_seed_schedules_that_seed_in_one_run(finished_grid):
    workdir, raw, _ = finished_grid
    cfg = {**raw, "seeds": [*raw["seeds"], 7]}
    result = snakemake(workdir, cfg, "-n", "all_tables")
    counts = job_counts(result.stdout + result.stderr)
    trained = len(cfg["methods"]) - 1  # zeroshot trains nothing
    assert counts["train_task"] == trained * len(cfg["tasks"]) and "mlflow_init" not in counts
    assert counts["tables"] == 1


def test_adding_zscl_and_its_reference_data_reruns_no_other_run(finished_grid):
    workdir, raw, _ = finished_grid
    cfg = {
        **raw,
        "methods": [*raw["methods"], "zscl"],
        "method_configs": {**raw["method_configs"], "zscl": {"kind": "zscl"}},
        "data": {**raw["data"], "reference": {"kind": "mini-corpus", "size": 50}},
    }
    result = snakemake(workdir, cfg, "-n", "all_tables")
    counts = job_counts(result.stdout + result.stderr)
    assert counts["train_task"] == len(cfg["tasks"]) * len(cfg["seeds"])  # zscl's tasks, nothing else
    assert "eval_row0" not in counts and "zscl/seed0/task1" in result.stdout


def test_heldout_target_adds_only_heldout_jobs(finished_grid):
    workdir, raw, _ = finished_grid
    cfg = {**raw, "heldout_tasks": ["shape", "texture"]}  # held-out tasks change no cell or update
    result = snakemake(workdir, cfg, "--cores", "2", "all_heldout")
    counts = job_counts(result.stdout + result.stderr)
    n, runs, seeds = len(cfg["tasks"]), len(cfg["methods"]) * len(cfg["seeds"]), len(cfg["seeds"])
    trained_runs = runs - seeds  # zeroshot's rows, and row 0 of every run, copy theta_0's files
    assert counts == {
        "heldout_row0": 1,
        "heldout": trained_runs * n,
        "share_heldout_row0": runs,  # row 0 of every run
        "copy_heldout_row0": (runs - trained_runs) * n,  # zeroshot's rows 1..N
        "all_heldout": 1,
    }
    loaded = load_config(cfg)
    for name in cfg["heldout_tasks"]:
        theta0 = json.loads(row0_heldout_path(loaded, name).read_text())["accuracy"]
        for method in cfg["methods"]:
            rows = [json.loads(heldout_path(loaded, method, 1, i, name).read_text()) for i in range(n + 1)]
            assert [r["i"] for r in rows] == list(range(n + 1)) and rows[0]["accuracy"] == theta0
            if method == "zeroshot":
                assert {r["accuracy"] for r in rows} == {theta0}


def test_report_of_the_paper_target_shows_every_analysis_with_its_caption(finished_grid, tmp_path):
    # Last in this file: it adds the analyses' files to the shared grid.
    from .test_targets import embedded_results

    workdir, raw, _ = finished_grid
    cfg = {
        **raw,
        "heldout_tasks": ["shape"],
        "analysis": {"cost_reference": "full-ft"},
    }  # captions show a value the config sets ...
    snakemake(workdir, cfg, "--cores", "2", "paper")
    report = tmp_path / "report.html"
    snakemake(workdir, cfg, "--report", str(report), "paper")
    html = report.read_text()
    files = {name for _, name, _ in embedded_results(html)}
    assert {
        "drift.html",
        "drift.png",
        "cost.html",
        "cka.html",
        "interpolation.html",
        "remove_modules.html",
        "significance.html",
    } <= files
    assert {"heldout_tracking.html", "general_capability.html", "paper_vs_reproduced.html", "rank_codyra.html"} <= files
    assert {"amplification.html", "amplification_codyra_seed1.png"} <= files
    # one heatmap per method (the mean over seeds; zero-shot's once), each table with its own caption
    assert {f"A_{m}.png" for m in cfg["methods"]} <= files and "A_heatmap.png" not in files
    assert "The paper's Table 1 layout" in html and "BWT (TreeLoRA's, higher is better)" in html
    assert "cost_reference</tt> (full-ft)" in html
    alphas = load_config(cfg)["analysis"]["interpolation_alphas"]  # ... and one only its default gives
    assert ", ".join(map(str, alphas)) in html
