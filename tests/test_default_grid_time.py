"""benchmarks/default_grid_time.py: where a grid's time goes, read from the jobs' own records, and
the floor no schedule on the cores beats (core-seconds: a job's seconds x its thread count)."""

from __future__ import annotations

import json

import pytest

from .conftest import load_benchmark


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
