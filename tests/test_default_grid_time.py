"""benchmarks/default_grid_time.py: where a grid's time goes, read from the jobs' own records, and
the floor no schedule on the cores beats (core-seconds: a job's seconds x its thread count)."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

import pytest

from .conftest import ROOT, load_benchmark


def write_json(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_the_floor_counts_each_part_at_its_thread_count(tmp_path):
    benchmark = load_benchmark("default_grid_time")
    runs = tmp_path / "mini"
    for task, threads in ((1, 1), (2, 2)):
        summary = {"steps": 200, "step_seconds": 0.1, "seconds": 25.0, "torch_threads": threads}
        write_json(runs / "lora" / "seed0" / f"task{task}" / "summary.json", summary)
    write_json(runs / "pretrained" / "cells" / "A_0_1.json", {"i": 0, "seconds": 3.0})
    write_json(runs / "lora" / "seed0" / "cells" / "A_1_1.json", {"i": 1, "seconds": 5.0})
    write_json(runs / "lora" / "seed0" / "cells" / "A_2_1.json", {"i": 2, "seconds": 4.0})
    write_json(runs / "zeroshot" / "seed0" / "cells" / "A_1_1.json", {"i": 1, "seconds": 9.0, "copied_from": "x"})
    log = tmp_path / "logs" / "mini" / "pretrain_mini.log"
    log.parent.mkdir(parents=True)
    log.write_text("pretrain mini: 8/8\npretrained mini CLIP in 100.0s\n")
    cfg = {"benchmark": "mini", "eval": {"threads": 1}, "mini": {"pretrain_threads": 2}}

    figures = benchmark.split(tmp_path, cfg)

    # steps: 2 x 200 x 0.1 = 40 s, 20 + 40 core-seconds; the rest of the jobs 2 x (25 - 20) = 10 s;
    # eval: rows 0, 1, 2 (the copied cell is no evaluation) 3 + 5 + 4 = 12 s; pretraining 100 s on 2 threads
    assert figures["seconds"] == pytest.approx(
        {"train_steps": 40.0, "train_other": 10.0, "eval": 12.0, "pretrain": 100.0}
    )
    assert figures["core_seconds"] == pytest.approx({"train_steps": 60.0, "eval": 12.0, "pretrain": 200.0})
    assert figures["jobs"] == {"train": 2, "eval_rows": 3}
    assert benchmark.compute_floor(figures["core_seconds"], 2) == pytest.approx(136.0)


def runs(*matrices):
    """method -> its seeds' matrix.json, as the tables read them."""
    return {"lora": [{"seed": seed, "A": A} for seed, A in enumerate(matrices)]}


def test_native_matrices_are_compared_cell_by_cell():
    benchmark = load_benchmark("default_grid_time")
    pinned = runs([[50.0, 20.0], [40.0, 60.0]], [[10.0, None]])
    native = runs([[50.0, 20.2], [39.5, 60.0]], [[10.0, None]])

    compared = benchmark.compare_matrices(pinned, native)

    # 5 filled cells, two differ: by 0.2 and by 0.5 (the largest, in seed 0)
    assert compared == {
        "max_abs_diff": pytest.approx(0.5),
        "max_abs_diff_run": "lora/seed0",
        "cells_differing": 2,
        "cells": 5,
    }
    with pytest.raises(ValueError, match="lora/seed1: one grid has a cell the other lacks"):
        benchmark.compare_matrices(pinned, runs([[50.0, 20.2], [39.5, 60.0]], [[10.0, 3.0]]))


def test_native_summaries_are_compared_per_method_over_seeds():
    benchmark = load_benchmark("default_grid_time")
    # row 0 zero-shot, rows 1-2 after each task; Last = mean of the last row
    pinned = runs([[10.0, 20.0], [50.0, 30.0], [40.0, 60.0]], [[10.0, 20.0], [50.0, 30.0], [44.0, 60.0]])
    native = runs([[10.0, 20.0], [50.0, 30.0], [40.0, 70.0]], [[10.0, 20.0], [50.0, 30.0], [44.0, 70.0]])

    compared = benchmark.compare_summaries(pinned, native)["lora"]

    # Last: pinned 50 and 52 (mean 51, sample SD sqrt(2)), native 55 and 57 (mean 56)
    assert compared["last"] == pytest.approx({"pinned": 51.0, "pinned_sd": 2**0.5, "native": 56.0})
    # Forgetting of task 1: max earlier accuracy 50 minus the last row's 40 / 44 -> 10 and 6, on both
    assert compared["forgetting"] == pytest.approx({"pinned": 8.0, "pinned_sd": 8**0.5, "native": 8.0})


@pytest.mark.parametrize(("flags", "tracked"), [([], True), (["--no-tracking"], False)])
def test_the_grid_is_tracked_as_make_run_tracks_it_unless_asked_not_to(tmp_path, flags, tracked):
    benchmark = load_benchmark("default_grid_time")
    args = benchmark.parse_args(flags)
    command = benchmark.grid_command(args, tmp_path / "results")

    # the default config's dry run: MLflow's store is set up before the jobs only when tracked
    planned = subprocess.run([*command, "--dry-run"], cwd=tmp_path, capture_output=True, text=True, check=True)

    assert ("mlflow_init" in planned.stdout) is tracked
    assert "train_task" in planned.stdout
    assert benchmark.tracked(args) is tracked


def test_the_record_says_untracked_when_the_config_turns_mlflow_off(tmp_path):
    benchmark = load_benchmark("default_grid_time")
    configfile = tmp_path / "untracked.yaml"
    configfile.write_text(f"extends: {ROOT}/config/config.yaml\ntracking:\n  enabled: false\n")

    assert benchmark.tracked(benchmark.parse_args(["--configfile", str(configfile)])) is False


# a real run's printout (Snakemake 9 writes it to stderr): the header's date is not a job's start
PRINTOUT = """Building DAG of jobs...
  Date: 2026-12-02 21:24:07
Select jobs to execute...

[Wed Dec  2 21:24:08 2026]
localrule mlflow_init:
    jobid: 6
[Wed Dec  2 21:24:08 2026]
localrule pretrain_mini:
    jobid: 5
[Wed Dec  2 21:24:22 2026]
Finished jobid: 6 (Rule: mlflow_init)
"""


def test_the_start_is_read_up_to_the_first_job_snakemake_starts():
    benchmark = load_benchmark("default_grid_time")
    first_job = datetime(2026, 12, 2, 21, 24, 8).timestamp()  # local time, as Snakemake prints it

    assert benchmark.first_job_s(PRINTOUT, first_job - 13.5) == pytest.approx(13.5)
    # a cluster job's rule line ("rule", not "localrule") starts a job too
    assert benchmark.first_job_s(PRINTOUT.replace("localrule", "rule"), first_job - 2.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="starts no job"):
        benchmark.first_job_s("Building DAG of jobs...\nNothing to be done.\n", first_job)
