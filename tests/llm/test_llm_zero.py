"""DeepSpeed ZeRO-2 on the CPU with 2 ranks (gloo): the proximal step stays correct.

Tolerances. In fp32 the two paths differ only in summation order (two half-batch gradients
averaged across ranks vs one full-batch backward; the global gradient norm summed per
partition), about 1e-7 relative per step: the stored update must match the plain path to
1e-5. In bf16 the replicas round every weight to 8 significant bits (relative 2^-9); the
matrix products accumulate that into gradient errors of a few percent, and AdamW, which
normalises each element's step, passes them on to the update: we measured 5% aggregate
difference in dW after 6 steps and allow 3x that, with per-step losses within 0.2%.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from codyra.experiment.config import load_config
from codyra.experiment.train_job import task_checkpoint_dir, train_task
from codyra.store.io import read_json
from codyra.store.paths import HISTORY_FILE, SUMMARY_FILE, task_dir
from codyra.store.updates import load_update

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def zero_config(cfg_dict: dict, tmp_path: Path, name: str, precision: str) -> tuple[dict, Path]:
    cfg = copy.deepcopy(cfg_dict)
    cfg["results"] = str(tmp_path / name)
    cfg["train"]["precision"] = precision
    cfg["llm"]["deepspeed"] = {"enabled": True, "nproc": 2}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_config(cfg), path


def run(*argv: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    finished = subprocess.run([sys.executable, *argv], check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-6000:]


def train_cli(config: Path) -> None:
    """`codyra train` as a Snakemake rule runs it: it re-executes itself under torchrun."""
    run("-m", "codyra.cli", "train", "--config", str(config), "--method", "codyra", "--seed", "0", "--task", "1")


def relative_update_error(cfg_a: dict, cfg_b: dict) -> float:
    a = load_update(task_dir(cfg_a, "codyra", 0, 1)).dense_deltas()
    b = load_update(task_dir(cfg_b, "codyra", 0, 1)).dense_deltas()
    assert a.keys() == b.keys()
    diff = sum(float(((a[k][2] - b[k][2]) ** 2).sum()) for k in a)
    return (diff / sum(float((a[k][2] ** 2).sum()) for k in a)) ** 0.5


def losses(cfg: dict) -> list[float]:
    lines = (task_dir(cfg, "codyra", 0, 1) / HISTORY_FILE).read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]


def check_ranks_agree(cfg: dict, precision: str) -> dict:
    summary = read_json(task_dir(cfg, "codyra", 0, 1) / SUMMARY_FILE)
    report = summary["distributed"]
    assert (report["world_size"], report["precision"]) == (2, precision)
    digests = report["replica_sha256_by_rank"]
    assert len(digests) == 2 and digests[0] == digests[1]  # gates (and A, B) identical on both ranks
    return summary


@pytest.fixture
def plain(tiny_trace_dict):
    """The plain-PyTorch fp32 reference; the gates must be pruned in the run's sparse half."""
    cfg = load_config(copy.deepcopy(tiny_trace_dict))
    summary = train_task(cfg, "codyra", 0, 1).summary
    assert 0 < summary["active_rank_total"] < 4 * 14
    return cfg, summary


def test_zero2_fp32_checkpoints_resume_on_any_path_and_match_plain(tiny_trace_dict, plain, tmp_path):
    plain_cfg, plain_summary = plain
    zero, config = zero_config(tiny_trace_dict, tmp_path, "zero-fp32", "fp32")
    run(
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(ROOT / "tests/llm/zero_worker.py"),
        str(config),
        "codyra",
        "5",
    )
    checkpoint = task_checkpoint_dir(zero, "codyra", 0, 1)
    assert read_json(checkpoint / "state.json")["step"] == 4

    # the ranks' checkpoint resumes in one plain process ...
    plain_resume = copy.deepcopy(zero)
    plain_resume["results"] = str(tmp_path / "plain-resume")
    plain_resume["llm"]["deepspeed"]["enabled"] = False
    shutil.copytree(checkpoint, task_checkpoint_dir(plain_resume, "codyra", 0, 1))  # same key: deepspeed is no setting
    train_task(plain_resume, "codyra", 0, 1)
    assert relative_update_error(plain_cfg, plain_resume) < 1e-5

    # ... and on the ranks again, through the CLI's torchrun re-execution
    train_cli(config)
    summary = check_ranks_agree(zero, "fp32")
    assert not checkpoint.exists()
    assert relative_update_error(plain_cfg, zero) < 1e-5
    assert summary["active_rank_total"] == plain_summary["active_rank_total"]
    torch.testing.assert_close(losses(zero), losses(plain_cfg), rtol=1e-5, atol=0)


def test_zero2_bf16_ranks_agree_and_track_plain(tiny_trace_dict, plain, tmp_path):
    plain_cfg, plain_summary = plain
    zero, config = zero_config(tiny_trace_dict, tmp_path, "zero-bf16", "bf16")
    train_cli(config)
    summary = check_ranks_agree(zero, "bf16")
    assert relative_update_error(plain_cfg, zero) < 0.15
    assert abs(summary["active_rank_total"] - plain_summary["active_rank_total"]) <= 2
    torch.testing.assert_close(losses(zero), losses(plain_cfg), rtol=2e-3, atol=0)


def test_zero2_gradient_accumulation_matches_one_large_batch(tiny_trace_dict, plain, tmp_path):
    """1 example per rank x 2 ranks x 2 accumulated micro-batches = the plain path's batch of 4."""
    plain_cfg, plain_summary = plain
    assert plain_summary["steps"] == 6
    accumulated = copy.deepcopy(tiny_trace_dict)
    accumulated["train"].update(batch_size=2, gradient_accumulation=2)
    zero, config = zero_config(accumulated, tmp_path, "zero-accumulate", "fp32")
    train_cli(config)
    check_ranks_agree(zero, "fp32")
    assert relative_update_error(plain_cfg, zero) < 1e-5
    torch.testing.assert_close(losses(zero), losses(plain_cfg), rtol=1e-5, atol=0)


GRADIENT_METHODS = {  # methods that read each micro-batch's gradient (EWC's hooks) or edit the step's (GEM, OGD)
    "ewc": {"kind": "ewc", "train": {"lr": 0.001}},
    "gem": {"kind": "gem", "train": {"lr": 0.001}},
    "ogd": {"kind": "ogd", "rank": 4, "alpha": 16, "placement": ["q_proj", "v_proj"]},
}


def relative_error(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    diff = sum(float(((a[k].float() - b[k].float()) ** 2).sum()) for k in a)
    return (diff / sum(float((a[k].float() ** 2).sum()) for k in a)) ** 0.5


@pytest.mark.parametrize("method", sorted(GRADIENT_METHODS))
def test_zero2_gives_gradient_methods_the_plain_step_gradient(tiny_trace_dict, tmp_path, method):
    """Under ZeRO-2 the method sees the step's full reduced gradient in ``.grad`` and its edits
    reach the partitioned gradients DeepSpeed steps with: task 2 (EWC's penalty and running
    Fisher, GEM's and OGD's projections against task 1's stored memory / basis) matches the plain path."""
    from safetensors.torch import load_file

    from codyra.store.paths import METHOD_STATE_FILE

    tiny_trace_dict["method_configs"][method] = GRADIENT_METHODS[method]
    plain = load_config(copy.deepcopy(tiny_trace_dict))
    train_task(plain, method, 0, 1)
    train_task(plain, method, 0, 2)
    zero, config = zero_config(tiny_trace_dict, tmp_path, f"zero-{method}", "fp32")
    shutil.copytree(task_dir(plain, method, 0, 1), task_dir(zero, method, 0, 1))  # task 2 starts from the same files
    run("-m", "codyra.cli", "train", "--config", str(config), "--method", method, "--seed", "0", "--task", "2")
    assert read_json(task_dir(zero, method, 0, 2) / SUMMARY_FILE)["distributed"]["world_size"] == 2

    def deltas(cfg):
        return {k: v[2] for k, v in load_update(task_dir(cfg, method, 0, 2)).dense_deltas().items()}

    def state(cfg):
        return load_file(str(task_dir(cfg, method, 0, 2) / METHOD_STATE_FILE))

    # GEM's QP (its active set, its dual solution) amplifies the paths' summation-order rounding
    # (measured 1.1e-5 after 6 steps), and its memories are bf16; so does Adam's division for EWC's
    # near-zero gradient entries (1.2e-5 with AVX2 kernels, codyra/__init__.py). A lost
    # projection, penalty or Fisher term would be O(1)
    assert relative_error(deltas(plain), deltas(zero)) < (1e-4 if method in ("gem", "ewc") else 1e-5)
    assert relative_error(state(plain), state(zero)) < (1e-2 if method == "gem" else 1e-5)


def test_zero2_carries_the_optimizer_as_the_plain_path(tiny_trace_dict, tmp_path):
    """``train.carry_optimizer`` under ZeRO-2: task 2 writes task 1's stored moments and step into
    its partitions and stores its own gathered ones; update and stored state match the plain path
    (without the carried moments task 2's Adam steps differ by O(1))."""
    from safetensors.torch import load_file

    from codyra.store.paths import METHOD_STATE_FILE, UPDATE_FILE

    tiny_trace_dict["method_configs"]["seqlora"] = {
        "kind": "seqlora",
        "rank": 4,
        "alpha": 16,
        "placement": ["q_proj", "v_proj"],
    }
    tiny_trace_dict["train"]["carry_optimizer"] = True
    plain = load_config(copy.deepcopy(tiny_trace_dict))
    train_task(plain, "seqlora", 0, 1)
    train_task(plain, "seqlora", 0, 2)
    zero, config = zero_config(tiny_trace_dict, tmp_path, "zero-carry", "fp32")
    shutil.copytree(task_dir(plain, "seqlora", 0, 1), task_dir(zero, "seqlora", 0, 1))
    run("-m", "codyra.cli", "train", "--config", str(config), "--method", "seqlora", "--seed", "0", "--task", "2")

    def tensors(cfg, name):
        return load_file(str(task_dir(cfg, "seqlora", 0, 2) / name))

    state = tensors(zero, METHOD_STATE_FILE)
    assert {float(v) for k, v in state.items() if k.endswith(".step")} == {12.0}  # 6 steps of task 1, 6 of task 2
    assert relative_error(tensors(plain, UPDATE_FILE), tensors(zero, UPDATE_FILE)) < 1e-5
    assert relative_error(tensors(plain, METHOD_STATE_FILE), state) < 1e-5
