"""scripts/estimate-cost.py multiplies the DAG's jobs by per-unit costs; scripts/render-gpu-figures.py
renders a GPU record. Units and seconds are checked against hand counts on a small MTIL grid."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from codyra.data.catalog import EXPECTED

from .conftest import ROOT, TINY, load_benchmark, load_script, write_yaml

pytestmark = pytest.mark.slow


# a GPU record with round unit costs: 0.1 s per LoRA step of 64 images (0.2 for CoDyRA), 1,000 images/s a
# cell, 5 s of imports, 6.4e12 FLOPs per step, 1e10 per evaluated image, a 1e15 FLOP/s peak
RECORD = {
    "device": {"name": "NVIDIA H200", "datasheet_peak_flops": {"bf16": 1e15, "fp32": 6e13}},
    "measured": "2026-01-01T00:00:00+00:00",
    "startup": {"median_s": 5.0},
    "clip_train": {
        "model": "codyra-mini",
        "batch": 64,
        "bf16": {
            "lora_step_flops": 6.4e12,
            "phases": {"sparse": {"step_s_median": {"lora": 0.1, "codyra": 0.2}}},
        },
    },
    "clip_eval": {
        "images_per_s": {"cell_cache": 1000.0},
        "encode_image_flops": 1e10,
        "cache_build_images_per_s": 100.0,
    },
}


def test_the_estimate_counts_the_units_of_every_job(tmp_path):
    script = load_script("estimate-cost")
    cfg = copy.deepcopy(TINY)
    cfg.update(
        benchmark="cost-fixture",
        results=str(tmp_path / "results"),
        seeds=[0, 1],
        methods=["zeroshot", "lora", "codyra"],
        data={"kind": "mtil", "root": str(tmp_path / "absent"), "fewshot": 5},
        tasks=[{"name": "DTD"}, {"name": "EuroSAT", "train": {"iterations": 30}}],
        train={"iterations": 10, "batch_size": 8, "lr": 0.001},
        heldout_tasks=[],
    )
    cfg["method_configs"] = {
        "zeroshot": {"kind": "zeroshot"},
        "lora": {"kind": "lora", "rank": 2, "alpha": 2, "placement": "all"},
        "codyra": copy.deepcopy(TINY["method_configs"]["codyra"]),
    }
    path = Path(write_yaml(tmp_path / "cost.yaml", cfg))
    costs = script.UnitCosts(RECORD, Path("record.json"))
    est = script.estimate(path, "all_tables", costs)

    runs = 2 * 2  # the trained methods x seeds
    images = 2 * (10 * 8 + 30 * 8)  # per trained method: both seeds, task 1 and task 2
    assert est.units["images trained"] == images * 2
    lora_s, codyra_s = images * 0.1 / 64, images * 0.2 / 64
    assert est.seconds["train"] == pytest.approx(lora_s + codyra_s)
    tests = EXPECTED["mtil"]["DTD"].test + EXPECTED["mtil"]["EuroSAT"].test
    rows = runs * 2 + 1  # rows 1..2 of every trained run, and row 0 once
    assert est.units["images classified"] == rows * tests
    assert est.seconds["eval"] == pytest.approx(rows * tests / 1000.0)
    assert est.units["cache images"] == tests  # each test set decoded once
    assert est.cpu_seconds == pytest.approx(tests / 100.0 + 2 * 5.0)  # two CPU jobs, no GPU
    assert est.units["processes"] == runs + 1  # a group job per run, and row 0
    assert est.seconds["start-up"] == pytest.approx(5.0 * (runs + 1))
    assert est.floor["train"] == pytest.approx(images * 2 * 1e11 / 1e15)
    assert est.chains[(None, "codyra", "0")] == pytest.approx(codyra_s / 2 + 2 * tests / 1000.0)
    assert est.wall(1) == pytest.approx(est.total)
    assert est.wall(1000) == pytest.approx(max(est.chains.values()))
    assert costs.notes == []  # the measured model: nothing scaled


def test_the_gpu_page_names_the_device_the_date_and_the_code(tmp_path):
    script = load_script("render-gpu-figures")
    record = json.loads(next((Path(ROOT) / "docs" / "results" / "gpu").glob("gpu_costs-*.json")).read_text())
    page = "\n".join(script.render(record, "record.json", "a commit of yesterday"))
    assert record["device"]["name"] in page and record["measured"] in page
    assert "**Code measured:** a commit of yesterday" in page
    ratio = record["clip_train"]["bf16"]["phases"]["sparse"]["paired_ratio"]["median"]
    assert f"{ratio:.3f}" in page
    del record["llm_train"]
    assert "ZeRO-2" not in "\n".join(script.render(record, "record.json", None))  # a missing section is left out


def test_the_data_path_section_says_how_many_workers_feed_the_gpu():
    script = load_script("render-gpu-figures")
    record = {
        "measured": "2026-01-01T00:00:00+00:00",
        "cpu_count": 2,
        "machine": "x86_64",
        "loadavg_1min": [0.1, 0.2],
        "images": 64,
        "size": 224,
        "batch_size": 16,
        "target": 10.0,
        "eval_images_per_s": {"jpeg": 100.0, "cache": 5000.0},
        "eval_speedup": 50.0,
        "train_images_per_s": {"jpeg": 80.0, "decoded": 160.0},
        "train_speedup": 2.0,
        "gpu": {"name": "NVIDIA H200", "record": "r.json", "images_per_s": {"train": 480.0, "eval": 6000.0}},
        "workers_to_feed_gpu": {"eval_jpeg": 60.0, "eval_cache": 1.2, "train_jpeg": 6.0, "train_decoded": 3.0},
    }
    page = "\n".join(script.render_data_path(record, "dp.json"))
    assert "| reading the evaluation cache | 5,000 (50x; target >= 10x) |" in page
    assert "about 60 such workers to evaluate from JPEGs, 1.2 from the cache, 6.0 to train" in page


def dag_record(client: bool, controller: bool | None, seconds: dict[tuple[str, str], float]) -> dict:
    runs = [
        {"config": c, "target": t, "jobs": 100, "seconds": s, "meets_target": s <= 10.0}
        for (c, t), s in seconds.items()
    ]
    return {
        "runs": runs,
        "target_s": 10.0,
        "slurm_client_installed": client,
        "slurm_controller_answers": controller,
        "repeats": 1,
        "snakemake": "9.0",
        "loadavg_1min": [0.1, 0.2],
        "cpu_count": 2,
        "machine": "x86_64",
        "measured": "2026-01-01T00:00:00+00:00",
    }


def test_the_dag_build_page_sets_records_side_by_side_and_marks_slow_runs():
    script = load_script("render-dag-build-time")
    up = dag_record(True, True, {("a.yaml", "paper"): 4.0, ("b.yaml", "paper"): 12.5})
    down = dag_record(True, False, {("a.yaml", "paper"): 13.0})
    bare = dag_record(False, None, {("a.yaml", "paper"): 3.5, ("b.yaml", "paper"): 11.0})
    page = "\n".join(script.render([("up.json", up), ("down.json", down), ("bare.json", bare)]))
    columns = ["SLURM client, controller up (s)", "SLURM client, controller down (s)", "no SLURM client (s)"]
    assert "| config | target | jobs | " + " | ".join(columns) + " |" in page
    assert "| `a.yaml` | `paper` | 100 | 4.0 | 13.0 * | 3.5 |" in page
    assert "| `b.yaml` | `paper` | 100 | 12.5 * | - | 11.0 * |" in page  # a config a record did not time: "-"


def test_a_floor_record_adds_its_snakemake_alone_column():
    script = load_script("render-dag-build-time")
    up = dag_record(True, True, {("a.yaml", "paper"): 12.0})
    up["floor"], up["runs"][0]["floor_seconds"] = True, 7.25
    bare = dag_record(False, None, {("a.yaml", "paper"): 11.0})
    page = "\n".join(script.render([("up.json", up), ("bare.json", bare)]))
    columns = ["SLURM client, controller up (s)", "no SLURM client (s)"]
    columns.append("SLURM client, controller up, Snakemake alone (s)")
    assert "| config | target | jobs | " + " | ".join(columns) + " |" in page
    assert "| `a.yaml` | `paper` | 100 | 12.0 * | 11.0 * | 7.2 |" in page


def test_two_records_of_one_setting_are_told_apart_by_their_time_of_measurement():
    script = load_script("render-dag-build-time")
    before = dag_record(True, True, {("a.yaml", "paper"): 12.0})
    after = dag_record(True, True, {("a.yaml", "paper"): 9.0})
    after["measured"] = "2026-01-02T10:30:00+00:00"
    page = "\n".join(script.render([("before.json", before), ("after.json", after)]))
    columns = ["SLURM client, controller up, 2026-01-01 00:00 (s)", "SLURM client, controller up, 2026-01-02 10:30 (s)"]
    assert "| config | target | jobs | " + " | ".join(columns) + " |" in page
    assert "| `a.yaml` | `paper` | 100 | 12.0 * | 9.0 |" in page


DRY_RUN = """Building DAG of jobs...
[Sat Nov 28 09:13:25 2026]
localrule mlflow_init:
    output: results/mini/mlflow.ready.json
    jobid: 3
[Sat Nov 28 09:13:25 2026] Group job run-lora-seed1 (jobs in lexicogr. order):

    [Sat Nov 28 09:13:25 2026]
    rule eval_row:
        input: results/a.json, results/lora/seed1/task2/update.safetensors
        output: results/lora/seed1/cells/A_2_1.json
        wildcards: method=lora, seed=1, i=2
    [Sat Nov 28 09:13:25 2026]
    rule eval_row:
        input: results/a.json
        output: results/lora/seed1/cells/A_1_1.json
        wildcards: seed=1, method=lora, i=1
"""


def test_the_floor_reads_each_jobs_inputs_by_its_wildcards_from_the_dry_run():
    benchmark = load_benchmark("dag_build_time")
    assert benchmark.printed_jobs(DRY_RUN) == {
        "mlflow_init": {"": []},
        "eval_row": {
            "i=2,method=lora,seed=1": ["results/a.json", "results/lora/seed1/task2/update.safetensors"],
            "i=1,method=lora,seed=1": ["results/a.json"],
        },
    }
