"""The TRACE configs: valid, the paper's schedules, and the backbone choice of paper Table 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from codyra.experiment.config import ConfigError, load_config, read_config_file
from codyra.experiment.resolve import resolve_job
from codyra.trace.metrics import TRACE_TASKS
from codyra.yaml_loader import load_yaml

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
BACKBONES = {  # paper Table 2
    "llama-2-7b-chat": "meta-llama/Llama-2-7b-chat-hf",
    "gemma-2b-it": "google/gemma-2b-it",
    "llama-3.2-1b-instruct": "meta-llama/Llama-3.2-1B-Instruct",
}
CODYRA_EPOCHS = [2, 1, 3, 2, 1, 2, 2, 3]  # paper (after TreeLoRA)
TRACE_LORA_EPOCHS = [5, 3, 7, 5, 3, 5, 5, 7]  # TRACE's LoRA baseline


SEQLORA = {"kind": "seqlora", "rank": 8, "alpha": 32, "dropout": 0.1, "placement": ["q_proj", "v_proj"]}


@pytest.mark.parametrize("name", ["trace.yaml", "mini_trace.yaml"])
def test_trace_configs_follow_the_paper_schedule(name):
    cfg = load_config(CONFIG_DIR / name)
    assert list(cfg["tasks"]) == list(TRACE_TASKS)
    epochs = {m: [resolve_job(cfg, m, i)["train"]["epochs"] for i in range(1, 9)] for m in cfg["methods"]}
    assert epochs["codyra"] == epochs["lora-r16-all"] == CODYRA_EPOCHS
    codyra = resolve_job(cfg, "codyra", 1)["method"]
    assert (codyra["rank"], codyra["dense_ratio"], codyra["kappa_max"]) == (16, 0.5, 0.005)
    assert resolve_job(cfg, "seqlora-r8-qv", 1)["method"] == SEQLORA  # runnable on both
    assert resolve_job(cfg, "lora-r16-all", 1)["method"]["kind"] == "lora"  # merged per task


def test_trace_baseline_is_seqlora_with_traces_schedule_and_batch_32():
    cfg = load_config(CONFIG_DIR / "trace.yaml")
    assert cfg["methods"][:4] == ["zeroshot", "seqlora-r8-qv", "lora-r16-all", "codyra"]
    # the TRACE table's baselines; on the default backbone (llama-2-7b-chat) without full-parameter EWC and
    # GEM, which an H100 node cannot hold (config key backbones.<name>.leave_out, named in the tables)
    assert cfg["methods"][4:] == ["ogd", "olora", "hidelora", "treelora", "icl", "l2p", "dualprompt"]
    assert set(cfg["left_out"]) == {"ewc", "gem"}
    smaller = load_config(read_config_file(CONFIG_DIR / "trace.yaml") | {"backbone": "gemma-2b-it"})
    assert smaller["methods"][4:6] == ["ewc", "gem"] and not smaller["left_out"]
    for name in ("olora", "hidelora", "treelora"):
        runs = [resolve_job(cfg, name, i)["train"] for i in range(1, 9)]
        assert {r["batch_size"] * r["gradient_accumulation"] for r in runs} == {32}
        assert [r["epochs"] for r in runs] == [2, 1, 3, 2, 1, 2, 2, 3]
    jobs = [resolve_job(cfg, "seqlora-r8-qv", i) for i in range(1, 9)]
    assert [j["train"]["epochs"] for j in jobs] == TRACE_LORA_EPOCHS
    assert {j["train"]["batch_size"] * j["train"]["gradient_accumulation"] for j in jobs} == {32}
    codyra = resolve_job(cfg, "codyra", 1)["train"]
    assert codyra["batch_size"] * codyra["gradient_accumulation"] == 4  # paper
    assert cfg["llm"]["tokenization"] == "trace" and cfg["llm"]["similarity"] == "difflib"


@pytest.mark.parametrize("name", ["trace.yaml", "mini_trace.yaml", "mini_trace_baselines.yaml"])
def test_trace_methods_run_the_references_constant_schedule(name):
    """TRACE / TreeLoRA training/main.py: get_constant_schedule_with_warmup(0) whatever
    --lr_scheduler_type says; CoDyRA adheres to TreeLoRA's setup (the paper states no schedule)."""
    cfg = load_config(CONFIG_DIR / name)
    runs = [resolve_job(cfg, m, i)["train"] for m in cfg["methods"] for i in range(1, 9)]
    assert {(r["lr_schedule"], r["warmup_steps"]) for r in runs} == {("constant", 0)}


@pytest.mark.parametrize("name", ["mtil_5shot.yaml", "xtail_16shot.yaml", "mtil_full.yaml"])
def test_clip_configs_keep_the_released_cosine_schedule(name):
    cfg = load_config(CONFIG_DIR / name)
    assert cfg["train"]["lr_schedule"] == "cosine"


TREELORA_FULL_GRAD_EPOCHS = [1, 1, 5, 5, 1, 5, 5, 5]  # TreeLoRA scripts/full_grad_methods/{EWC,GEM}.sh


@pytest.mark.parametrize("name", ["trace.yaml", "mini_trace_baselines.yaml"])
def test_ewc_gem_run_treeloras_full_grad_scripts_and_ogd_traces_cl_script(name):
    cfg = load_config(CONFIG_DIR / name)
    runs = {m: [resolve_job(cfg, m, i)["train"] for i in range(1, 9)] for m in ("ewc", "gem", "ogd")}
    for method in ("ewc", "gem"):
        assert [r["epochs"] for r in runs[method]] == TREELORA_FULL_GRAD_EPOCHS
    assert [r["epochs"] for r in runs["ogd"]] == TRACE_LORA_EPOCHS  # train_seq_cl.sh 5,3,7,5,3,5,5,7
    if name == "trace.yaml":  # the mini keeps its batch of 4 and its 7x learning rates
        examples = {m: {r["batch_size"] * r["gradient_accumulation"] for r in rs} for m, rs in runs.items()}
        assert examples == {"ewc": {32}, "gem": {32}, "ogd": {128}}  # 1 x 4 GPUs x 8; 2 x 8 GPUs x 8
        assert {r["lr"] for rs in runs.values() for r in rs} == {1e-5}


def raw_trace() -> dict:
    return load_yaml((CONFIG_DIR / "trace.yaml").read_text())


@pytest.mark.parametrize("backbone", BACKBONES)
def test_the_backbone_sets_the_model_and_a_benchmark_of_its_own(backbone):
    cfg = load_config({**raw_trace(), "backbone": backbone})
    assert (cfg["benchmark"], cfg["model"]["name"]) == (f"trace-{backbone}", BACKBONES[backbone])
    assert "backbone" not in cfg and "backbones" not in cfg  # consumed: the resolved config is plain
    assert load_config(cfg) == cfg  # resolving again changes nothing (jobs re-validate the workflow's config)
    assert len(cfg["seeds"]) == 3 and cfg["llm"]["deepspeed"]["enabled"] and cfg["train"]["precision"] == "bf16"


def test_the_default_backbone_is_llama_2_7b_chat():
    assert load_config(CONFIG_DIR / "trace.yaml")["benchmark"] == "trace-llama-2-7b-chat"


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"backbone": "llama-7b"},
            "config key backbone: 'llama-7b' is not one of backbones (llama-2-7b-chat, gemma-2b-it",
        ),
        ({"backbones": []}, "config key backbones: must map backbone names to model ids"),
        ({"model": {"family": "causal_lm", "name": "gpt2"}}, "config key model.name: set it or use backbones/backbone"),
    ],
)
def test_a_bad_backbone_choice_names_the_key(change, message):
    with pytest.raises(ConfigError) as err:
        load_config({**raw_trace(), **change})
    assert message in str(err.value)


def test_a_backbone_without_backbones_is_an_error():
    with pytest.raises(ConfigError, match="config key backbone: set, but the config has no backbones"):
        load_config({**load_yaml((CONFIG_DIR / "mini_trace.yaml").read_text()), "backbone": "gemma-2b-it"})
