"""The analyses in the DAG: `paper` on the default config, and what SLURM would get."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from codyra.yaml_loader import load_yaml

from .conftest import REPO, job_counts, snakemake


def test_paper_target_of_the_default_config(tmp_path):
    cfg = load_yaml((REPO / "config" / "config.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")
    counts = job_counts(snakemake(tmp_path, cfg, "-n", "paper").stdout)
    n, seeds, methods = len(cfg["tasks"]), len(cfg["seeds"]), len(cfg["methods"])
    trained = [m for m in cfg["methods"] if cfg["method_configs"][m]["kind"] != "zeroshot"]
    adapters = [m for m in trained if cfg["method_configs"][m]["kind"] in ("lora", "codyra")]
    analyses = [
        "drift",
        "magnitude",
        "cka",
        "orth",
        "cost",
        "retention",
        "probes",
        "conflict",
        "significance",
        "compare",
    ]
    assert {k: v for k, v in counts.items() if k.startswith("analysis_")} == {
        **{f"analysis_{a}": 1 for a in analyses},
        "analysis_rank": len(adapters),
        "analysis_amplification": 1,
    }
    assert counts["probe"] == len(trained) * seeds  # one forward job per run: every alpha and removed encoder
    assert counts["grad_conflict"] == 1  # at theta_0, shared by the methods
    # held-out rows: forward jobs for trained runs after task i >= 1, local copies of theta_0's files otherwise
    assert counts["heldout"] == len(trained) * seeds * n and counts["paper"] == 1
    assert counts["share_heldout_row0"] == methods * seeds  # row 0 of every run
    assert counts.get("copy_heldout_row0", 0) == (methods - len(trained)) * seeds * n  # rows 1..N of untrained runs
    assert counts["train_task"] == len(trained) * seeds * n  # the grid itself, as all_tables builds it


def test_analysis_jobs_on_slurm(tmp_path):
    from .conftest import grid_config

    cfg = grid_config(tmp_path, heldout_tasks=["shape"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable,
        str(REPO / "scripts" / "count-submissions.py"),
        "-s",
        str(REPO / "workflow" / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "paper",
    ]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    submitted = out["submissions_by_rule"]
    # a run's forward jobs (training, rows, held-out rows, probe) are one job of one GPU; (codyra, full-ft) x 2 seeds
    assert submitted["eval_row+heldout+probe+train_task"] == 2 * 2 and submitted["grad_conflict"] == 1
    assert not {"heldout", "probe", "copy_heldout_row0"} & set(
        submitted
    )  # nothing of a run queued alone; copies are local
    assert {
        r: submitted[r] for r in ("analysis_drift", "analysis_magnitude", "analysis_cka", "analysis_rank")
    } == dict.fromkeys(("analysis_drift", "analysis_magnitude", "analysis_cka", "analysis_rank"), 1)
    assert (
        out["resources"]["analysis_drift"]["gpu"] == 0
        and out["resources"]["eval_row+heldout+probe+train_task"]["gpu"] == 1
    )
    assert not {"analysis_cost", "analysis_significance", "analysis_compare", "paper"} & set(submitted)  # run locally
