"""A tiny mini TRACE whose LM jobs take a fraction of a second: 2 tasks, 16 training
examples each, a 2-layer LLaMA pretrained for 10 steps (enough for a valid theta_0)."""

from __future__ import annotations

import copy

import pytest

TINY_TRACE = {
    "benchmark": "tiny-trace",
    "seeds": [0],
    "methods": ["zeroshot", "lora-qv", "codyra"],
    "model": {"family": "causal_lm", "name": "codyra-mini-llama"},
    "data": {"kind": "trace"},
    "tasks": ["C-STANCE", "NumGLUE-cm"],
    "train": {"iterations": 6, "batch_size": 4, "lr": 0.01, "weight_decay": 0.01, "checkpoint_every": 2},
    "eval": {"batch_size": 4},
    "llm": {
        "max_prompt_len": 96,
        "max_answer_len": 16,
        "max_new_tokens": 6,
        "mini": {"eval_per_task": 4, "vocab_size": 400, "pretrain_tasks": ["C-STANCE"]},
    },
    "mini": {
        "train_per_task": 16,
        "test_per_task": 10,
        "corpus_size": 100,
        "pretrain_steps": 10,
        "pretrain_batch_size": 8,
    },
    "tracking": {"enabled": False},
    "method_configs": {
        "zeroshot": {"kind": "zeroshot"},
        "lora-qv": {"kind": "lora", "rank": 4, "alpha": 16, "dropout": 0.1, "placement": ["q_proj", "v_proj"]},
        "codyra": {"kind": "codyra", "rank": 4, "dense_ratio": 0.5, "kappa_max": 0.05},
    },
}


@pytest.fixture(scope="session")
def tiny_trace_theta0(tmp_path_factory):
    """(data root, theta_0 folder) written once by the mini TRACE pretraining."""
    from codyra.experiment.config import load_config
    from codyra.llm.model import mini_model_dir, trace_root
    from codyra.mini.trace.pretrain import pretrain_mini_lm

    cfg = load_config({**copy.deepcopy(TINY_TRACE), "results": str(tmp_path_factory.mktemp("tiny_trace"))})
    pretrain_mini_lm(cfg)
    return trace_root(cfg), mini_model_dir(cfg)


@pytest.fixture
def tiny_trace_dict(tmp_path, tiny_trace_theta0):
    """The tiny mini TRACE config (a dict, before validation) writing under tmp_path."""
    data_root, theta0 = tiny_trace_theta0
    cfg = copy.deepcopy(TINY_TRACE)
    cfg["results"] = str(tmp_path / "results")
    cfg["data"]["root"] = str(data_root)
    cfg["model"]["pretrained"] = str(theta0)
    return cfg


@pytest.fixture
def tiny_trace(tiny_trace_dict):
    from codyra.experiment.config import load_config

    return load_config(tiny_trace_dict)
