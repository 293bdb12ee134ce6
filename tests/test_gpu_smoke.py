"""benchmarks/gpu_smoke.py is ready for a GPU: its sections run end to end here, on the CPU at tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_gpu_smoke_script_runs_every_section_on_the_cpu(tmp_path):
    out = tmp_path / "gpu_smoke.json"
    command = [sys.executable, f"{ROOT}/benchmarks/gpu_smoke.py", "--device", "cpu", "--smoke", "--out", str(out)]
    # its DeepSpeed rank joins a process group: in a process of its own, not the test session's
    done = subprocess.run(
        [*command, "--methods", "zeroshot", "codyra", "olora"], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sections = json.loads(out.read_text())["sections"]
    assert set(sections) == {"trace", "clip_row", "clip_graphs", "gpu_costs"}
    assert not any("error" in s for s in sections.values())
    methods = sections["trace"]["methods"]
    assert set(methods) == {"zeroshot", "codyra", "olora"}
    for name in ("codyra", "olora"):  # both backends trained tasks 1 and 2 and evaluated row 2
        for backend in ("plain", "deepspeed"):
            assert len(methods[name][backend]["tasks"]) == 2 and len(methods[name][backend]["cells"]) == 2
        assert methods[name]["max_relative_loss_difference"] < 0.01  # one rank: the same steps up to rounding
    row = sections["clip_row"]
    assert row["cells_agree"] and len(row["cache"]["cells"]) == 11  # MTIL's 11 test sets, cache = JPEGs
    for record in sections["clip_graphs"]["methods"].values():  # on the CPU the graphed step is the compiled one
        assert record["graphed_vs_compiled"] == 0.0 and record["graphed_vs_eager"] < 1e-3
        assert all(record[way]["median_step_seconds"] > 0 for way in ("eager", "compiled", "graphed"))
        # the graphed way's task 2 trained in the same process; no CUDA allocator to read on the CPU
        assert record["graphed_task2"]["median_step_seconds"] > 0
        assert record["graphed_reserved_gib"] == {"before_task1": None, "after_task1": None, "after_task2": None}
    assert json.loads(Path(sections["gpu_costs"]["record"]).read_text())["device"]


def test_an_updated_record_keeps_the_sections_a_rerun_did_not_measure_with_their_dates_and_config():
    from .conftest import load_benchmark

    script = load_benchmark("gpu_costs")
    earlier = {
        "measured": "2026-01-01T00:00:00+00:00",
        "machine": "CPU A",
        "torch": "2.11.0",
        "cpu_count": 16,
        "config": {"clip_batch": 64},
        "device": {"name": "GPU"},
        "clip_eval": {"images_per_s": 1.0, "measured": "2025-12-31T00:00:00+00:00", "config": {"workers": 8}},
        "generate": {"tokens_per_s": 1.0},
    }
    rerun = {"config": {"clip_batch": 32}, "generate": {"tokens_per_s": 2.0, "measured": "2026-01-02T00:00:00+00:00"}}
    record = script.updated(earlier, rerun)
    assert record["generate"] == rerun["generate"] and record["config"] == {"clip_batch": 32}
    # kept: the earlier run's facts unless a section carries its own; its other top-level keys are not sections
    assert record["device"] == {
        "name": "GPU",
        "measured": "2026-01-01T00:00:00+00:00",
        "config": {"clip_batch": 64},
        "machine": "CPU A",
        "torch": "2.11.0",
    }
    assert record["clip_eval"]["measured"] == "2025-12-31T00:00:00+00:00"
    assert record["clip_eval"]["config"] == {"workers": 8}
    assert set(record) == {"config", "device", "clip_eval", "generate"}


@pytest.mark.parametrize("text", ["{not json", '{"figures": 1}'])
def test_update_refuses_a_file_that_is_not_a_record_before_measuring(tmp_path, text):
    from .conftest import load_benchmark

    out = tmp_path / "record.json"
    out.write_text(text)
    with pytest.raises(SystemExit, match=f"--update: {out} is not .*drop --update"):
        load_benchmark("gpu_costs").main(["--smoke", "--device", "cpu", "--update", "--out", str(out)])
    assert out.read_text() == text  # nothing measured, nothing written
