"""The TRACE configs: valid, the paper's schedules, and one backbone per file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from codyra.config import load_config, resolve_job
from codyra.llm.metrics import TRACE_TASKS

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
BACKBONES = {
    "trace.yaml": ("trace-llama-2-7b-chat", "meta-llama/Llama-2-7b-chat-hf"),
    "trace_gemma-2b-it.yaml": ("trace-gemma-2b-it", "google/gemma-2b-it"),
    "trace_llama-3.2-1b-instruct.yaml": ("trace-llama-3.2-1b-instruct", "meta-llama/Llama-3.2-1B-Instruct"),
}
CODYRA_EPOCHS = [2, 1, 3, 2, 1, 2, 2, 3]  # paper (after TreeLoRA)
TRACE_LORA_EPOCHS = [5, 3, 7, 5, 3, 5, 5, 7]  # TRACE's LoRA baseline


@pytest.mark.parametrize("name", [*BACKBONES, "mini_trace.yaml"])
def test_trace_configs_follow_the_paper_schedule(name):
    cfg = load_config(CONFIG_DIR / name)
    assert [t["name"] for t in cfg["tasks"]] == list(TRACE_TASKS)
    assert cfg["methods"] == ["zeroshot", "lora-r8-qv", "lora-r16-all", "codyra"]
    epochs = {m: [resolve_job(cfg, m, i)["train"]["epochs"] for i in range(1, 9)] for m in cfg["methods"]}
    assert epochs["codyra"] == epochs["lora-r16-all"] == CODYRA_EPOCHS
    assert epochs["lora-r8-qv"] == TRACE_LORA_EPOCHS
    codyra = resolve_job(cfg, "codyra", 1)["method"]
    assert (codyra["rank"], codyra["dense_ratio"], codyra["kappa_max"]) == (16, 0.5, 0.005)
    assert resolve_job(cfg, "lora-r8-qv", 1)["method"] | {"kind": "lora"} == {
        "kind": "lora", "rank": 8, "alpha": 32, "dropout": 0.1, "placement": ["q_proj", "v_proj"],
    }


def test_backbone_configs_differ_only_in_benchmark_and_model():
    configs = {}
    for name, (benchmark, model) in BACKBONES.items():
        cfg = load_config(CONFIG_DIR / name)
        assert (cfg["benchmark"], cfg["model"]["name"], len(cfg["seeds"])) == (benchmark, model, 3)
        assert cfg["llm"]["deepspeed"]["enabled"] and cfg["train"]["precision"] == "bf16"
        raw = yaml.safe_load((CONFIG_DIR / name).read_text())
        configs[name] = {**raw, "benchmark": None, "model": {**raw["model"], "name": None}}
    first, *others = configs.values()
    assert all(other == first for other in others)
