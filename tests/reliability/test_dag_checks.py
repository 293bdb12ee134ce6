"""The DAG build refuses what would fail (or silently mislead) later."""

from __future__ import annotations

import copy
import json
import re

import pytest

from codyra.data.presence import require_benchmark_data
from tests.conftest import TINY
from tests.workflow.conftest import snakemake


def mtil_config(tmp_path, **data) -> dict:
    return {
        "benchmark": "mtil-check",
        "results": str(tmp_path / "results"),
        "seeds": [0],
        "methods": ["zeroshot"],
        "model": {"name": "ViT-B-16", "pretrained": "openai"},
        "data": {"kind": "mtil", "fewshot": 5, **data},
        "tasks": ["DTD", "EuroSAT"],
        "method_configs": {"zeroshot": {"kind": "zeroshot"}},
        "tracking": {"enabled": False},
    }


@pytest.mark.slow
def test_missing_data_fails_the_dag_build_unless_the_dry_run_opts_out(tmp_path):
    unset = snakemake(tmp_path, mtil_config(tmp_path), "-n", "all_tables", check=False)
    assert unset.returncode != 0 and "config key data.root is not set" in unset.stderr + unset.stdout
    assert "Job stats" not in unset.stdout  # no job was planned

    (tmp_path / "data").mkdir()
    empty = snakemake(tmp_path, mtil_config(tmp_path, root=str(tmp_path / "data")), "-n", "all_tables", check=False)
    output = empty.stderr + empty.stdout
    assert empty.returncode != 0 and "2 of the 2 datasets of benchmark mtil-check are missing under data.root" in output
    assert "DTD, EuroSAT" in output and "--config check_data=False" in output

    opted_out = snakemake(tmp_path, mtil_config(tmp_path), "-n", "all_tables", "--config", "check_data=False")
    assert "eval_row0" in opted_out.stdout  # the grid is planned


def test_trace_presence_check_names_the_missing_task_files(tmp_path):
    from codyra.experiment.config import load_config

    root = tmp_path / "TRACE"
    for split in ("train", "eval", "test"):
        (root / "FOMC").mkdir(parents=True, exist_ok=True)
        (root / "FOMC" / f"{split}.json").write_text(json.dumps([{"prompt": "p", "answer": "a"}]))
    (root / "C-STANCE").mkdir()
    cfg = load_config(
        {
            "benchmark": "trace-check",
            "results": str(tmp_path / "results"),
            "seeds": [0],
            "methods": ["zeroshot"],
            "model": {"family": "causal_lm", "name": "org/model"},
            "data": {"kind": "trace", "root": str(root)},
            "tasks": ["C-STANCE", "FOMC"],
            "method_configs": {"zeroshot": {"kind": "zeroshot"}},
        }
    )
    with pytest.raises(
        FileNotFoundError, match=r"1 of the 2 datasets .*: C-STANCE \(e\.g\. .*C-STANCE/train\.json is absent\)"
    ):
        require_benchmark_data(cfg)
    cfg["tasks"] = cfg["tasks"][1:]
    require_benchmark_data(cfg)


def test_dag_build_validates_per_task_method_options_with_the_exact_key_path(tmp_path):
    cfg = copy.deepcopy(TINY) | {"results": str(tmp_path / "results")}
    cfg["task_settings"] = {cfg["tasks"][1]: {"methods": {"codyra": {"kappa_max": -0.5}}}}
    result = snakemake(tmp_path, cfg, "-n", "all_tables", check=False)
    assert result.returncode != 0
    assert (
        f"config key task_settings.{cfg['tasks'][1]}.methods.codyra.kappa_max: must be >= 0, got -0.5"
        in result.stderr + result.stdout
    )


def test_a_job_reading_updates_lists_the_last_and_each_training_its_predecessor(tmp_path):
    # theta_2 is built from the updates of tasks 1 and 2: the row lists task 2's, whose training
    # lists task 1's, so a change to either reaches the row (tests/workflow/test_dag.py)
    cfg = copy.deepcopy(TINY) | {"results": str(tmp_path / "results"), "methods": ["lora-r4"]}
    run = f"{tmp_path}/results/tiny/lora-r4/seed0"
    result = snakemake(tmp_path, cfg, "-n", f"{run}/cells/A_2_1.json")
    inputs = {}
    for block in re.split(r"\n\s*rule ", result.stdout)[1:]:  # grouped jobs are indented
        lines = dict(line.strip().split(": ", 1) for line in block.splitlines()[1:] if ": " in line)
        inputs[lines.get("output", "").split(", ")[0]] = lines.get("input", "").split(", ")
    assert {f"{run}/task2/summary.json", f"{run}/task2/update.safetensors"} <= set(inputs[f"{run}/cells/A_2_1.json"])
    assert f"{run}/task1/update.safetensors" in inputs[f"{run}/task2/update.safetensors"]
