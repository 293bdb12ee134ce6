"""Corrupt, absurd or non-reproducible result files are detected and named, never used."""

from __future__ import annotations

import hashlib
import json
import math
import struct

import pytest
import torch

from codyra.evaluation.results import summarize_run
from codyra.store.io import ResultError, read_json, write_json
from codyra.store.paths import SUMMARY_FILE, UPDATE_FILE, cell_path
from codyra.store.updates import TaskUpdate, load_update, save_update

TARGET = "visual.transformer.resblocks.0.attn.q"


def lora_update() -> TaskUpdate:
    gen = torch.Generator().manual_seed(0)
    tensors = {
        f"{TARGET}.A": torch.randn(3, 8, generator=gen),
        f"{TARGET}.B": torch.randn(8, 3, generator=gen),
        f"{TARGET}.w": torch.tensor([45.6, 1.5, -0.25]),
    }
    return TaskUpdate(
        "lora", tensors, {TARGET: {"param": "visual.transformer.resblocks.0.attn.in_proj_weight", "rows": [0, 8]}}
    )


def overwrite_value(path, name: str, index: int, value: float) -> None:
    """Overwrite one float32 element of tensor ``name`` inside the file: it still parses."""
    blob = bytearray(path.read_bytes())
    size = int.from_bytes(blob[:8], "little")
    start = 8 + size + json.loads(blob[8 : 8 + size])[name]["data_offsets"][0] + 4 * index
    blob[start : start + 4] = struct.pack("<f", value)
    path.write_bytes(bytes(blob))


@pytest.fixture
def stored(tmp_path):
    folder = tmp_path / "results" / "tiny" / "codyra" / "seed0" / "task2"
    save_update(folder, lora_update(), {"note": "test"})
    return folder


@pytest.mark.parametrize(
    "value, problem", [(math.nan, "non-finite"), (math.inf, "non-finite"), (16.8, "does not match the digest")]
)
def test_update_corrupted_inside_its_tensor_data_is_rejected_naming_file_and_job(stored, value, problem):
    assert load_update(stored).tensors[f"{TARGET}.w"][0] == pytest.approx(45.6)
    overwrite_value(stored / UPDATE_FILE, f"{TARGET}.w", 0, value)
    with pytest.raises(ResultError, match=problem) as err:
        load_update(stored)
    message = str(err.value)
    assert str(stored / UPDATE_FILE) in message
    assert (
        f"snakemake -f {stored / UPDATE_FILE}" in message
        and "codyra train --method codyra --seed 0 --task 2" in message
    )


def test_digest_covers_tensor_content_not_file_bytes(stored):
    recorded = read_json(stored / SUMMARY_FILE)["update_digest"]
    assert recorded == load_update(stored).digest() == lora_update().digest()
    changed = lora_update()
    changed.tensors[f"{TARGET}.B"][2, 1] += 1e-6
    assert changed.digest() != recorded


def test_a_diverged_task_stores_nothing(tmp_path):
    update = lora_update()
    update.tensors[f"{TARGET}.A"][1, 2] = math.nan
    with pytest.raises(ValueError, match="non-finite values .*diverged"):
        save_update(tmp_path / "task1", update, {})
    assert not (tmp_path / "task1" / UPDATE_FILE).exists() and not (tmp_path / "task1" / SUMMARY_FILE).exists()


def test_identical_tensors_give_identical_bytes(tmp_path):
    # safetensors writes its metadata in hash-map order, which changes from one call to the next
    digests = set()
    for k in range(8):
        save_update(tmp_path / f"copy{k}", lora_update(), {})
        blob = (tmp_path / f"copy{k}" / UPDATE_FILE).read_bytes()
        size = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8 : 8 + size])
        assert list(header) == sorted(header) and list(header["__metadata__"]) == sorted(header["__metadata__"])
        digests.add(hashlib.sha256(blob).hexdigest())
    assert len(digests) == 1


# --- cells are validated on read --------------------------------------------------------


def write_cells(cfg: dict, method: str = "codyra", seed: int = 0) -> None:
    n = len(cfg["tasks"])
    for i in range(n + 1):
        for j in range(1, n + 1):
            cell = {
                "accuracy": 50.0 + i - j,
                "benchmark": cfg["benchmark"],
                "method": method,
                "seed": seed,
                "i": i,
                "j": j,
                "task": cfg["tasks"][j - 1],
                "num_classes": 4 + j,
                "num_samples": 40,
            }
            write_json(cell_path(cfg, method, seed, i, j), cell)


@pytest.fixture
def cells_cfg(tiny_cfg):
    tiny_cfg["tracking"]["enabled"] = False
    write_cells(tiny_cfg)
    return tiny_cfg


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, problem",
    [
        ({"accuracy": 1e9}, "accuracy 1000000000.0 is not a finite number in 0..100"),
        ({"accuracy": math.nan}, "accuracy nan is not a finite number"),
        ({"accuracy": -3.0}, "accuracy -3.0 is not"),
        ({"accuracy": "87"}, "accuracy '87' is not"),
        ({"j": 3}, "j is 3, expected 2"),
        ({"method": "full-ft"}, "method is 'full-ft', expected 'codyra'"),
        ({"seed": 1}, "seed is 1, expected 0"),
        ({"task": "count"}, "task is 'count', expected 'digits'"),
        ({"num_classes": "ten"}, "num_classes 'ten' is not a positive integer"),
        ({"num_classes": 9}, "disagree on num_classes"),
    ],
)
def test_absurd_or_misfiled_cell_is_refused_naming_the_file(cells_cfg, change, problem):
    assert summarize_run(cells_cfg, "codyra", 0)["A"] == [[50.0 + i - j for j in (1, 2, 3)] for i in range(4)]
    path = cell_path(cells_cfg, "codyra", 0, 2, 2)
    (path.parent.parent / "matrix.json").unlink()
    write_json(path, {**read_json(path), **change})
    with pytest.raises(ResultError, match=problem) as err:
        summarize_run(cells_cfg, "codyra", 0)
    assert str(path) in str(err.value) or str(path.parent.parent) in str(err.value)
    assert not (path.parent.parent / "matrix.json").exists()


def test_cell_that_is_not_json_is_named(cells_cfg):
    path = cell_path(cells_cfg, "codyra", 0, 1, 3)
    path.write_text('{"accuracy": 4')
    with pytest.raises(ResultError, match="is not valid JSON") as err:
        summarize_run(cells_cfg, "codyra", 0)
    assert str(path) in str(err.value)
