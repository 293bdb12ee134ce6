"""scripts/mini-properties.py checks a mini grid's matrices against the benchmark's stated properties."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT, load_script

SCRIPT = Path(ROOT) / "scripts" / "mini-properties.py"


def write_grid(root, matrices: dict, cells=({"num_classes": 10}, {"num_classes": 5}, {"num_classes": 4})):
    for j, content in enumerate(cells, start=1):
        cell = root / "pretrained" / "cells" / f"A_0_{j}.json"
        cell.parent.mkdir(parents=True, exist_ok=True)
        cell.write_text(json.dumps(content))
    for method, runs in matrices.items():
        for seed, A in enumerate(runs):
            path = root / method / f"seed{seed}" / "matrix.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({"A": A}))


# zero-shot 25 (2.5x chance of 10), 50 (2.5x of 5), 40 (1.6x of 4)
ZERO_SHOT = [25.0, 50.0, 40.0]
LEARNT = [ZERO_SHOT, [60.0, 50.0, 40.0], [30.0, 80.0, 40.0], [30.0, 50.0, 90.0]]


def test_a_grid_with_the_properties_passes_with_hand_computed_values(tmp_path):
    # Last - zero-shot: (30 + 50 + 90)/3 - (25 + 50 + 40)/3 = 55/3 = 18.3;
    # Forgetting: ((60 - 30) + (80 - 50))/2 = 30; gains +35, +30, +50.
    write_grid(tmp_path, {"full-ft": [LEARNT, LEARNT]})
    rows = {name: (value, holds) for name, value, holds in load_script("mini-properties").check(tmp_path, ["full-ft"])}
    assert rows[">= 2x chance on >= 3 tasks"] == ("2.50x 2.50x 1.60x", False)  # two tasks, not three
    assert rows["full-ft: A[j,j] - A[0,j] >= 15 on >= 4 tasks"] == ("+35.0 +30.0 +50.0", False)  # 3 tasks
    assert rows["full-ft: Last - zero-shot Last >= 10"] == ("+18.3", True)
    assert rows["full-ft Forgetting (paper) >= 5"] == ("30.0", True)


def test_seed_means_decide_and_a_saturated_task_fails(tmp_path):
    saturated = [[90.0, 50.0, 40.0], [95.0, 50.0, 40.0], [90.0, 51.0, 40.0], [90.0, 50.0, 41.0]]
    write_grid(tmp_path, {"lora-r16": [saturated, LEARNT]})
    rows = {name: (value, holds) for name, value, holds in load_script("mini-properties").check(tmp_path, ["lora-r16"])}
    assert rows["zero-shot A[0,j] <= 85 on every task"] == ("90.0 50.0 40.0", False)
    # gains on the seed-mean matrix: A[1,0] - A[0,0] = 77.5 - 57.5, A[2,1] - A[0,1] = 65.5 - 50, ...
    assert rows["lora-r16: A[j,j] - A[0,j] >= 15 on >= 4 tasks"][0] == "+20.0 +15.5 +25.5"
    assert rows["lora-r16: Last - zero-shot Last >= 10"][0] == f"{((1 / 3) + (55 / 3)) / 2:+.1f}"


def test_the_command_exits_1_on_a_failed_property_and_names_a_missing_grid(tmp_path):
    write_grid(tmp_path, {"full-ft": [LEARNT], "lora-r16": [LEARNT]})
    done = subprocess.run([sys.executable, SCRIPT, tmp_path], check=False, capture_output=True, text=True)
    assert done.returncode == 1 and "FAIL >= 2x chance on >= 3 tasks" in done.stdout
    with pytest.raises(SystemExit, match="snakemake --cores 2 all_tables"):
        load_script("mini-properties").check(tmp_path, ["codyra"])


def test_a_mini_trace_grid_is_checked_against_its_own_properties(tmp_path):
    # 8 tasks; zero-shot 0 on four, 40 on four: OP 20, so the bar is 30.
    zero = [0.0] * 4 + [40.0] * 4
    diagonal = [30.0] * 4 + [70.0, 50.0, 50.0, 51.0]  # gains +30 x 5, +10, +10, +11: 5 of 8 >= 20
    lora = [zero] + [diagonal[:i] + zero[i:] for i in range(1, 8)] + [[20.0] * 4 + [60.0, 50.0, 50.0, 51.0]]
    write_grid(tmp_path, {"lora-r8-qv": [lora], "seqlora-r8-qv": [[zero] * 9]}, cells=[{"metric": "accuracy"}] * 8)
    script = load_script("mini-properties")
    assert script.is_trace(tmp_path)
    rows = {
        name: (value, holds) for name, value, holds in script.check_trace(tmp_path, ["lora-r8-qv", "seqlora-r8-qv"])
    }
    assert rows["lora-r8-qv: A[j,j] - A[0,j] >= 20 on >= 6 of 8 tasks"] == ("+30.0 " * 5 + "+10.0 +10.0 +11.0", False)
    # Forgetting: (10 x 5 + 0 + 0) / 7; OP: (4 x 20 + 60 + 2 x 50 + 51) / 8 = 36.375
    assert rows["lora-r8-qv: Forgetting (paper) >= 5"] == ("7.1", True)
    assert rows["lora-r8-qv: OP > zero-shot OP + 10"] == ("36.4 vs 30.0", True)
    assert rows["seqlora-r8-qv: OP > zero-shot OP + 10"] == ("20.0 vs 30.0", False)
    done = subprocess.run(
        [sys.executable, SCRIPT, tmp_path, "--methods", "lora-r8-qv"], check=False, capture_output=True, text=True
    )
    assert done.returncode == 1 and "FAIL lora-r8-qv: A[j,j] - A[0,j] >= 20 on >= 6 of 8 tasks" in done.stdout
