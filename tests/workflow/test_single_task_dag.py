"""The single-task studies in the DAG (dry run): their jobs, and the analysis that tabulates them."""

from __future__ import annotations

import pytest

from .conftest import grid_config, job_counts, snakemake


def test_single_task_jobs_of_a_tiny_study(tmp_path):
    cfg = grid_config(tmp_path, methods=["zeroshot", "lora-r4"], heldout_tasks=["shape"])
    cfg["single_task"] = {
        "reference_tasks": ["shape"],
        "studies": {
            "supp_dtd": {  # 2 placements x 2 ranks on hue
                "task": "hue",
                "sweeps": [{"method": "lora-r4", "vary": {"placement": ["attn", "mlp"]}, "zip": {"rank": [1, 2]}}],
                "pivot": {"rows": "placement", "columns": "rank"},
            },
            "prune_motivation": {
                "task": "hue",
                "methods": ["lora-r4"],
                "remove_modules": [["vision", "v"], ["text", "mlp"]],
            },
            "other": {"task": "position", "methods": ["lora-r4"]},
        },
    }
    out = snakemake(tmp_path, cfg, "-n", "paper").stdout
    counts, seeds = job_counts(out), len(cfg["seeds"])
    runs = 4 + 1 + 1  # hue: the sweep's 4 variants and lora-r4 (shared by both hue studies); position: lora-r4
    assert counts["single_task_train"] == counts["single_task_eval"] == runs * seeds
    assert counts["single_task_row0"] == 2  # theta_0 on each trained task and the reference, once per task
    assert counts["single_task_probe"] == 1 * seeds  # the removal study's one run
    assert counts["analysis_single_task"] == 1
    results = cfg["results"]
    for path in (
        f"{results}/tiny-single-hue/lora-r4-placement-attn-rank-2/seed0/task1/update.safetensors",
        f"{results}/tiny-single-hue/lora-r4/seed0/cells/A_1_1.json",
        f"{results}/tiny-single-hue/lora-r4/seed0/heldout/H_0_shape.json",
        f"{results}/tiny-single-hue/lora-r4/seed0/probes/without-vision_v.json",
        f"{results}/tiny-single-position/pretrained/cells/A_0_1.json",
        f"{results}/tables/tiny/supp_dtd.csv",
        f"{results}/tables/tiny/supp_dtd_runs.csv",
        f"{results}/tables/tiny/prune_motivation_removal.csv",
        f"{results}/figures/tiny/prune_motivation_removal.png",
    ):
        assert path in out, path
    # the stream's own grid is unchanged: lora-r4 trains the 3 stream tasks
    assert counts["train_task"] == 3 * seeds


def test_a_bad_study_stops_the_dag_before_any_job(tmp_path):
    cfg = grid_config(tmp_path)
    cfg["single_task"] = {"reference_tasks": ["shape"], "studies": {"s": {"task": "hue", "methods": ["nope"]}}}
    result = snakemake(tmp_path, cfg, "-n", "paper", check=False)
    assert result.returncode != 0 and "single_task.studies.s.methods: 'nope'" in result.stdout + result.stderr


@pytest.mark.slow
def test_a_tiny_study_end_to_end(tmp_path):
    """Train one task from theta_0 per run, evaluate, probe, tabulate: the table's numbers are the files'."""
    import csv
    import json
    from pathlib import Path

    def read(path):
        return json.loads(Path(path).read_text())

    cfg = grid_config(tmp_path, methods=["zeroshot", "lora-r4"], seeds=[0], tracking={"enabled": False})
    cfg["single_task"] = {
        "reference_tasks": ["shape"],
        "studies": {
            "supp_dtd": {
                "task": "hue",
                "sweeps": [{"method": "lora-r4", "vary": {"placement": ["attn", "all"]}, "zip": {"rank": [2]}}],
                "pivot": {"rows": "placement", "columns": "rank"},
            },
            "prune_motivation": {"task": "hue", "methods": ["lora-r4"], "remove_modules": [["vision", "v"]]},
        },
    }
    results = cfg["results"]
    snakemake(tmp_path, cfg, "--cores", "1", f"{results}/tables/tiny/supp_dtd.csv")
    run = f"{results}/tiny-single-hue/lora-r4-placement-attn-rank-2/seed0"
    summary = read(f"{run}/task1/summary.json")
    assert summary["benchmark"] == "tiny-single-hue" and summary["previous_updates"] == []  # trained from theta_0
    cell = [read(f"{run}/cells/A_{i}_1.json")["accuracy"] for i in (0, 1)]
    held = [read(f"{run}/heldout/H_{i}_shape.json")["accuracy"] for i in (0, 1)]
    with open(f"{results}/tables/tiny/supp_dtd.csv") as f:
        rows = {(r["row"], r["column"]): float(r["mean"]) for r in csv.DictReader(f)}
    assert rows[("attn", "Delta-plasticity rank=2")] == pytest.approx(cell[1] - cell[0])
    assert rows[("attn", "Forgetting rank=2")] == pytest.approx(held[0] - held[1])
    probe = read(f"{results}/tiny-single-hue/lora-r4/seed0/probes/without-vision_v.json")
    assert set(probe["tasks"]) == {"hue"} and set(probe["heldout"]) == {"shape"}
