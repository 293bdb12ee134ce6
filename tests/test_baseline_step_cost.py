"""benchmarks/baseline_step_cost.py steps every baseline it lists, each in a process of its own, as
the training loop steps it (the methods read the job's settings from their context)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, load_benchmark

pytestmark = pytest.mark.slow


def test_every_listed_baseline_takes_its_steps_on_the_mini_clip(tmp_path):
    out = tmp_path / "cost.json"
    command = [sys.executable, f"{ROOT}/benchmarks/baseline_step_cost.py", "--models", "codyra-mini"]
    command += ["--clip-batch", "4", "--steps", "3", "--warmup", "0", "--reference-texts", "16", "--out", str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (model,) = json.loads(out.read_text())["models"]
    rows = {row["method"]: row for row in model["rows"]}
    assert set(rows) == set(load_benchmark("baseline_step_cost").METHODS)
    assert all(row["step_cpu_s_median"] > 0 and row["trainable_params"] > 0 for row in rows.values())
