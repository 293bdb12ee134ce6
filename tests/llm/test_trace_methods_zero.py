"""Every training method of config/trace.yaml, with the options trace.yaml gives them (sizes shrunk),
trains tasks 1 and 2 under DeepSpeed ZeRO-2 in bf16 on two ranks, as the paper grid runs them: on the
tiny LLaMA of the mini TRACE, and CoDyRA on a tiny Gemma. One torchrun launch trains them all
(zero_methods_worker.py); the test then reads what the ranks wrote and what they observed.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from codyra.store.io import read_json
from codyra.store.paths import METHOD_STATE_FILE, SUMMARY_FILE, UPDATE_FILE, task_dir
from codyra.yaml_loader import load_yaml

ROOT = Path(__file__).resolve().parents[2]
TRACE = load_yaml((ROOT / "config" / "trace.yaml").read_text())
METHODS = [m for m in TRACE["methods"] if m not in ("zeroshot", "icl")]  # icl and zeroshot never train
GEMMA_METHODS = ["codyra"]
STEPS = 3  # per task; a checkpoint after step 2 gathers the masters and moments mid-task
pytestmark = pytest.mark.slow


def shrink(train: dict) -> dict:
    """A train block of trace.yaml with its sizes cut: 2 micro-batches a step, 4 examples each
    (2 per rank), STEPS steps a task; every other setting as trace.yaml gives it."""
    out = {k: v for k, v in train.items() if k not in ("epochs", "threads", "checkpoint_every")}
    if "batch_size" in out:
        out["batch_size"] = 4
    if out.get("gradient_accumulation", 1) > 1:
        out["gradient_accumulation"] = 2
    return out


def trace_config(tiny: dict, tmp_path: Path, name: str, methods: list[str]) -> Path:
    """The tiny mini TRACE (data, theta_0, lengths) with trace.yaml's training settings and methods."""
    cfg = copy.deepcopy(tiny)
    cfg["benchmark"] = name
    cfg["results"] = str(tmp_path / name)
    cfg["methods"] = methods
    cfg["method_configs"] = {m: {**TRACE["method_configs"][m]} for m in methods}
    for spec in cfg["method_configs"].values():
        if "train" in spec:
            spec["train"] = shrink(spec["train"])
    cfg["train"] = {**shrink(TRACE["train"]), "iterations": STEPS, "epochs": None, "checkpoint_every": 2}
    cfg["llm"]["gradient_clipping"] = TRACE["llm"]["gradient_clipping"]
    cfg["llm"]["deepspeed"] = {"enabled": True, "nproc": 2}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def tiny_gemma(llama_folder: Path, out: Path) -> Path:
    """A 2-layer GemmaForCausalLM with the mini TRACE's tokenizer, written as a Hugging Face folder."""
    from transformers import AutoTokenizer, GemmaConfig, GemmaForCausalLM

    from codyra.store.theta0 import write_model_folder

    tokenizer = AutoTokenizer.from_pretrained(llama_folder)
    config = GemmaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    write_model_folder(out, GemmaForCausalLM(config), tokenizer)
    return out


@pytest.fixture(scope="module")
def trained(tiny_trace_theta0, tmp_path_factory):
    """(configs by benchmark, each rank's observations) after the one torchrun launch."""
    from conftest import TINY_TRACE

    from codyra.experiment.config import load_config

    tmp_path = tmp_path_factory.mktemp("trace_zero")
    data_root, theta0 = tiny_trace_theta0
    tiny = {**copy.deepcopy(TINY_TRACE), "data": {"kind": "trace", "root": str(data_root)}}
    llama = trace_config({**tiny, "model": {**tiny["model"], "pretrained": str(theta0)}}, tmp_path, "llama", METHODS)
    gemma_theta0 = tiny_gemma(theta0, tmp_path / "gemma-theta0")
    gemma_model = {**tiny["model"], "pretrained": str(gemma_theta0)}
    gemma = trace_config({**tiny, "model": gemma_model}, tmp_path, "gemma", GEMMA_METHODS)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(ROOT / "tests/llm/zero_methods_worker.py"),
        str(tmp_path),
        str(llama),
        *METHODS,
        "--",
        str(gemma),
        *GEMMA_METHODS,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-8000:]
    configs = {name: load_config(path) for name, path in (("llama", llama), ("gemma", gemma))}
    ranks = [json.loads((tmp_path / f"observations-rank{r}.json").read_text()) for r in (0, 1)]
    return configs, ranks


def stored(cfg: dict, method: str, task: int, name: str) -> dict:
    path = task_dir(cfg, method, 0, task) / name
    return load_file(str(path)) if path.is_file() else {}


@pytest.mark.parametrize(("benchmark", "method"), [*(("llama", m) for m in METHODS), ("gemma", "codyra")])
def test_trace_method_trains_two_tasks_under_zero2_bf16(trained, benchmark, method):
    configs, _ = trained
    cfg = configs[benchmark]
    for task in (1, 2):
        summary = read_json(task_dir(cfg, method, 0, task) / SUMMARY_FILE)
        report = summary["distributed"]
        assert (report["backend"], report["world_size"], report["precision"]) == ("deepspeed-zero2", 2, "bf16")
        digests = report["replica_sha256_by_rank"]
        assert len(digests) == 2 and digests[0] == digests[1], f"{method} task {task}: the ranks' replicas differ"
        assert summary["steps"] == STEPS and math.isfinite(summary["final_loss"])
        tensors = {**stored(cfg, method, task, UPDATE_FILE), **stored(cfg, method, task, METHOD_STATE_FILE)}
        assert tensors, f"{method} task {task} stored nothing"
        bad = [k for k, v in tensors.items() if v.is_floating_point() and not torch.isfinite(v).all()]
        assert not bad, f"{method} task {task}: non-finite {bad[:3]}"


def test_task_two_uses_task_one_state_alike_on_both_ranks(trained):
    """What each method computes from task 1's stored state (cast to the bf16 replica's dtype where it
    meets it) is non-zero and identical on both ranks; task 1 has none of it."""
    _, (rank0, rank1) = trained
    assert rank0 == rank1
    for method in ("olora", "ewc", "treelora", "gem", "ogd"):
        assert f"llama:{method}:1" not in rank0, f"{method} read an earlier task's state on task 1"

    def calls(method: str, name: str) -> list:
        return rank0[f"llama:{method}:2"][name]

    micro_batches = STEPS * 2  # trace.yaml's accumulation, shrunk to 2
    orthogonality = calls("olora", "orthogonality_loss")
    assert len(orthogonality) == micro_batches and all(v > 0 for v in orthogonality)
    regularizer = calls("treelora", "tree_regularizer")
    assert len(regularizer) == micro_batches and all(v != 0 for v in regularizer)
    penalty = calls("ewc", "ewc_penalty")
    assert len(penalty) == micro_batches and penalty[0] == 0 and max(penalty) > 0  # 0 while theta = theta_1
    gem_calls = calls("gem", "project_gradient")
    assert gem_calls and all(rows == 1 for rows, _ in gem_calls) and any(changed for _, changed in gem_calls)
    ogd_calls = calls("ogd", "project_parameters")
    assert len(ogd_calls) == STEPS and all(columns > 0 and changed for columns, changed in ogd_calls)


@pytest.mark.parametrize(
    "method", [m for m in METHODS if TRACE["method_configs"][m].get("train", {}).get("carry_optimizer")]
)
def test_carried_optimizer_continues_through_zero2_bf16(trained, method):
    """trace.yaml's one-optimizer methods store AdamW's state gathered from the ranks; task 2 continued it."""
    configs, _ = trained
    state = stored(configs["llama"], method, 2, METHOD_STATE_FILE)
    assert {float(v) for k, v in state.items() if k.endswith(".step")} == {2.0 * STEPS}
