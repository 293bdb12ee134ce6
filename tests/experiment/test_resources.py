"""The resource check (codyra.experiment.resources): model sizes against the models' own code, each job's
estimate against hand-computed values, the refusals of what a profile cannot hold, the methods a backbone
leaves out and the line the tables print for them."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from codyra.errors import ConfigError
from codyra.experiment.config import config_from_files, load_config, read_config_file
from codyra.experiment.costs import UnitCosts, read_record
from codyra.experiment.model_shapes import (
    BLIP_DEFAULTS,
    PAPER_BACKBONES,
    blip_shape,
    lm_shape,
    model_shape,
    open_clip_shape,
)
from codyra.experiment.resources import (
    GIB,
    PROCESS,
    Estimator,
    Job,
    ProfileResources,
    check,
    check_profile,
    job_threads,
)
from codyra.methods import method_of

from ..conftest import ROOT, TINY

REPO = Path(ROOT)
PROFILE = REPO / "profiles" / "slurm"
LLAMA_2_7B = 6_738_415_616  # parameters of meta-llama/Llama-2-7b-chat-hf (its model card: 6.7B)
GEMMA_2B = 2_506_172_416  # google/gemma-2b-it


def paper(name: str, **overrides) -> dict:
    return load_config(config_from_files([REPO / "config" / name], {"check_data": False, **overrides}))


def trace(backbone: str, **overrides) -> dict:
    return paper("trace.yaml", backbone=backbone, **overrides)


def need(cfg: dict, job: Job, gpus: int = 1):
    job = replace(job, method_class=method_of(cfg, job.method) if job.method else None)  # as planned_jobs gives it
    return Estimator({None: cfg}, read_record(), "NVIDIA H100 80GB HBM3").need(job, gpus)


def threads(cfg: dict, rule: str, method: str | None = None, task: int | None = None, gpus: int = 1) -> int:
    return job_threads(cfg, rule, method, task, gpus, method_of(cfg, method) if method else None)


def edited_profile(tmp_path: Path, old: str, new: str) -> Path:
    text = (PROFILE / "config.yaml").read_text()
    assert text.count(old) == 1, old
    (tmp_path / "config.yaml").write_text(text.replace(old, new))
    return tmp_path


# --- model shapes


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, (family, _) in PAPER_BACKBONES.items() if family == "causal_lm"])
def test_a_paper_causal_lm_has_the_parameters_transformers_builds(name):
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM

    architecture = PAPER_BACKBONES[name][1]
    fields = {key: value for key, value in architecture.items() if key != "model_type"}
    config = AutoConfig.for_model(architecture.get("model_type", "llama"), **fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert lm_shape(architecture, name, "test").params == sum(p.numel() for p in model.parameters())


def test_the_image_text_models_have_the_parameters_their_code_builds():
    torch = pytest.importorskip("torch")
    import open_clip
    from transformers import BlipConfig, BlipForImageTextRetrieval

    import codyra.clip.model  # noqa: F401  (registers the mini CLIP's architecture with open_clip)

    folders = {
        "ViT-B-16": Path(open_clip.__file__).parent / "model_configs",
        "codyra-mini": REPO / "src/codyra/mini/clip/model_configs",
    }
    for name, folder in folders.items():
        with torch.device("meta"):
            model = open_clip.create_model(name, device="meta")
        shape = open_clip_shape(json.loads((folder / f"{name}.json").read_text()), name, "test")
        assert shape.params == sum(p.numel() for p in model.parameters()), name
    mini = json.loads((REPO / "src/codyra/mini/blip/model_configs/codyra-mini-blip.json").read_text())
    for config in (BLIP_DEFAULTS, mini):
        with torch.device("meta"):
            model = BlipForImageTextRetrieval(BlipConfig(**config))
        assert blip_shape(config, "blip", "test").params == sum(p.numel() for p in model.parameters())


def test_adapters_on_every_matrix_are_what_lora_trains_with_placement_all():
    torch = pytest.importorskip("torch")
    import open_clip
    from transformers import LlamaConfig, LlamaForCausalLM

    import codyra.clip.model  # noqa: F401  (registers the mini CLIP's architecture with open_clip)
    from codyra.family import family_of
    from codyra.methods import build_method
    from codyra.methods.base import standalone_context

    clip = load_config({**copy.deepcopy(TINY), "results": "unused"})
    lm = paper("mini_trace.yaml")
    architecture = json.loads((REPO / "src/codyra/mini/trace/model_configs/codyra-mini-llama.json").read_text())
    models = {
        "clip": (clip, open_clip.create_model("codyra-mini")),
        "causal_lm": (lm, LlamaForCausalLM(LlamaConfig(**architecture, vocab_size=lm["llm"]["mini"]["vocab_size"]))),
    }
    for family, (cfg, model) in models.items():
        context = standalone_context(model, family_of(family), torch.Generator(), 0.0, keep_theta_0=False)
        groups = build_method({"kind": "lora", "rank": 4, "placement": "all"}).setup(context)
        trained = sum(p.numel() for g in groups for p in g["params"])
        assert model_shape(cfg).adapter_params(4) == trained, family


def test_the_shape_comes_from_the_models_own_config_where_this_machine_has_it(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    tiny = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2}
    (folder / "config.json").write_text(json.dumps({**tiny, "vocab_size": 10, "tie_word_embeddings": False}))
    cfg = trace("gemma-2b-it")
    cfg["model"] = {**cfg["model"], "pretrained": str(folder)}
    shape = model_shape(cfg)
    # embeddings and head 2 x 10 x 8; per layer q, k, v, o 4 x 64, gate, up, down 3 x 128, 2 norms of 8; a final norm
    assert shape.params == 2 * 80 + 2 * (4 * 64 + 3 * 128 + 16) + 8
    assert shape.source == str(folder / "config.json")
    assert model_shape(trace("gemma-2b-it")).params == GEMMA_2B  # no config here: the paper's table
    cfg["model"] = {**cfg["model"], "pretrained": None, "name": "an-org/unknown-model", "cache_dir": str(tmp_path)}
    with pytest.raises(ConfigError, match="no architecture of 'an-org/unknown-model'.*hf download"):
        model_shape(cfg)


# --- unit costs


def test_the_activation_cost_is_the_measured_peak_less_what_the_record_accounts_for():
    record = json.loads(read_record().path.read_text())
    lm = record["llm_train"]
    lm["shape"] = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2}
    lm["vocab"], lm["sequence_tokens"], lm["adapter"] = 10, 4, {"rank": 1}
    params = 2 * 80 + 2 * (4 * 64 + 3 * 128 + 16) + 8  # as above
    adapters = 2 * 1 * (4 * 16 + 2 * 24 + 24)  # rank 1 on q, k, v, o (8 + 8), gate, up (8 + 16), down (16 + 8)
    activations = 50 * 4 * 2 * 8  # 50 bytes per token, layer and unit of width
    peak = 2 * params + 4 * 10 * 10 + 16 * adapters + activations  # replica, logits, adapters' state
    lm["memory"] = {"resident_gib_both_models": 2.0, "peak_gib_lora_sparse": 1.0 + peak / GIB}
    assert UnitCosts(record, Path("r.json")).lm_activation_bytes() == pytest.approx(50)


def test_work_moves_to_another_gpu_by_its_datasheet():
    costs = read_record()
    assert costs.device == "NVIDIA H200"
    assert costs.to_gpu("NVIDIA H100 80GB HBM3", "bandwidth") == pytest.approx(4.8 / 3.35)
    assert costs.to_gpu("NVIDIA H100 80GB HBM3", "compute") == 1.0
    with pytest.raises(ConfigError, match="no datasheet figures of 'NVIDIA A100'"):
        costs.to_gpu("NVIDIA A100", "compute")


# --- each job's needs


def test_full_parameter_ewc_keeps_its_fp32_state_beside_zero2s():
    ewc = need(trace("gemma-2b-it"), Job("train_lm_task", "ewc", 2), gpus=4)
    p = GEMMA_2B
    assert ewc.gpus == 4
    assert ewc.gpu["model replica (bf16)"] == 2 * p and ewc.gpu["gradients"] == 2 * p
    assert ewc.gpu["fp32 masters and AdamW moments (1/4 under ZeRO-2)"] == 12 * p / 4
    assert ewc.gpu["method state"] == 8 * p  # the Fisher and theta_{i-1}, fp32
    assert ewc.host["4 rank(s): process and theta_{i-1} rebuilt in fp32"] == 4 * (PROCESS + 4 * p)
    assert ewc.host["4 rank(s): method state"] == 4 * 8 * p  # theta_{i-1} ("before") and the Fisher it loaded
    assert ewc.host["the lead rank: what it stores"] == 8 * p  # the delta and the Fisher


def test_gem_keeps_a_gradient_per_task_and_reads_the_full_fp32_gradient():
    gem = need(trace("gemma-2b-it"), Job("train_lm_task", "gem", 8), gpus=4)
    p = GEMMA_2B
    assert gem.gpu["full fp32 gradient for the method"] == 4 * p
    assert gem.gpu["method state"] == 4 * 7 * 256000 * 2048  # 7 memories of the embedding, the largest tensor
    assert gem.host["4 rank(s): method state"] == 4 * (4 + 2 * 8) * p  # "before", 7 memories and the last gradient
    assert gem.host["the lead rank: what it stores"] == (4 + 2 * 8) * p  # the delta and 8 memories
    lora = need(trace("gemma-2b-it"), Job("train_lm_task", "lora-r16-all", 8), gpus=4)
    assert lora.gpu["full fp32 gradient for the method"] == 0 and lora.host["the lead rank: what it stores"] < GIB


def test_a_compiled_clip_step_costs_its_measured_rate_compilation_and_graph_memory():
    cfg = paper("mtil_5shot.yaml")
    job = Job("train_task", "codyra", 2)
    record = copy.deepcopy(read_record().record)
    clip = record["clip_train"]
    # round figures: the graphed step half the eager bf16 one, 100 s of compilation beyond 3 steady warm-up
    # steps, and 6 GiB held beyond the resident weights against the eager step's 4
    graphed = copy.deepcopy(clip["bf16"])
    for phase in graphed["phases"].values():
        phase["step_s_median"] = {k: s / 2 for k, s in phase["step_s_median"].items()}
        phase["peak_reserved_gib_both_variants"] = 10.0 + 6.0
    dense = graphed["phases"]["dense"]["step_s_median"]  # a CoDyRA job is given the larger warm-up, LoRA's
    warmup = {"lora": 100 + 3 * dense["lora"], "codyra": 50 + 3 * dense["codyra"]}
    graphed |= {"warmup": {"steps": 3, "seconds": warmup}}
    graphed["resident_gib_both_variants"] = 10.0
    clip["bf16_graphed"] = graphed
    clip["bf16"]["resident_gib_both_variants"] = 10.0
    for phase in clip["bf16"]["phases"].values():
        phase["peak_reserved_gib_both_variants"] = 10.0 + 4.0

    def estimate(compile_mode=None):
        edited = copy.deepcopy(cfg)
        edited["train"] |= {"precision": "bf16", "compile": compile_mode is not None, "compile_mode": compile_mode}
        costs = UnitCosts(record, Path("r.json"))
        planned = replace(job, method_class=method_of(cfg, "codyra"))
        return Estimator({None: edited}, costs, "NVIDIA H200").need(planned, 1), costs

    eager, _ = estimate()
    compiled, costs = estimate("reduce-overhead")
    startup = record["startup"]["median_s"]
    assert compiled.seconds - startup - 100 == pytest.approx((eager.seconds - startup) / 2)
    for part in ("image activations", "class-prompt activations"):
        assert compiled.gpu[part] == pytest.approx(1.5 * eager.gpu[part])
    assert costs.notes == []
    # the shipped record's compiled step has no warm-up or memory: its rate, no compilation, eager memory, noted
    del clip["bf16_graphed"]["warmup"], clip["bf16_graphed"]["resident_gib_both_variants"]
    compiled, costs = estimate("reduce-overhead")
    assert compiled.seconds - startup == pytest.approx((eager.seconds - startup) / 2)
    assert compiled.gpu["image activations"] == eager.gpu["image activations"]
    assert sorted(set(costs.notes)) == [
        "the bf16_graphed step's compilation as none (the GPU record did not time it)",
        "the bf16_graphed step's memory as the bf16 eager step's (the GPU record did not measure both)",
    ]
    # a mode the record did not measure: the eager step's rate, noted
    del clip["bf16_compiled"]
    compiled, costs = estimate("default")
    assert compiled.seconds == pytest.approx(eager.seconds)
    assert sorted(set(costs.notes)) == [
        (
            "a bf16_compiled step (train.compile_mode default) as the bf16 eager step, without its compilation "
            "and with the eager activations"
        )
    ]


ROW_GPU = "KV cache and prompt pass (one layer at a time), or theta_i's fp32 sums before them"


def test_a_row_of_a_causal_lm_builds_theta_on_its_gpu_and_generates_every_answer_to_its_budget():
    cfg = trace("llama-2-7b-chat")
    row = need(cfg, Job("eval_lm_row", "codyra", 3))
    assert row.host["theta_0 as loaded (its checkpoint's dtype, fp32 at most)"] == 4 * LLAMA_2_7B
    assert row.host["an update merging (fp32)"] == 0
    record = read_record().record
    answers = 7 * 100 + 81  # LLM-CL-Benchmark_500's test sets without the data: 100 each, NumGLUE-cm 81
    gen = record["generate"]
    seconds = answers * 512 / gen["tokens_per_s"]["budget"] * 4.8 / 3.35  # H200 -> H100 bandwidth
    build = gen["row_build_s"] * 3 / 8  # 3 of the measured 8 updates, the measured model (CPU work: no GPU ratio)
    assert row.seconds == pytest.approx(seconds + build + record["startup"]["median_s"])
    zeroshot = need(cfg, Job("eval_lm_row", "zeroshot", 3))  # nothing to merge
    assert zeroshot.seconds == pytest.approx(seconds + record["startup"]["median_s"])
    # a batch of 65,536 positions: K and V of 32 layers x 4,096 in bf16, and the prompt pass of one layer
    generating = 65536 * 32 * 2 * 4096 * 2 + 65536 * 4096 * 8 * 2
    assert row.gpu["model (bf16)"] == 2 * LLAMA_2_7B and row.gpu[ROW_GPU] == max(generating, 4 * LLAMA_2_7B)
    # batches of eval.batch_size prompts: FIX(ICL)'s hold its demonstrations (3,584 tokens) and the KV cache them
    cfg["eval"]["batch_tokens"] = None
    icl = need(cfg, Job("eval_lm_row", "icl", 3))
    assert icl.gpu[ROW_GPU] == 16 * (3584 + 512) * (32 * 2 * 4096 * 2 + 4096 * 8 * 2)
    cfg["eval"]["precision"] = "tf32"  # fp32 tensors, TF32 products: the model and cache in fp32
    assert need(cfg, Job("eval_lm_row", "codyra", 3)).gpu["model (fp32)"] == 4 * LLAMA_2_7B


def test_a_trace_row_is_a_job_of_its_own_and_a_group_that_idles_gpus_is_warned_about(tmp_path):
    from codyra.experiment.resources import group_of

    cfg = trace("gemma-2b-it")
    assert group_of(cfg, Job("eval_lm_row", "codyra", 3)) == "row-codyra-3"
    assert group_of(cfg, Job("train_lm_task", "codyra", 3)) == "task-codyra-3"
    report = check(cfg, ProfileResources.read(PROFILE), read_record())
    assert not [w for w in report.warnings() if "idle" in w]
    # a CLIP run's job with its training on 2 GPUs: its rows (one GPU each) would leave one idle
    profile = edited_profile(tmp_path, '    runtime: "45 * 1.5 ** (attempt - 1)"', "    runtime: 45\n    gpu: 2")
    report = check(paper("mtil_5shot.yaml"), ProfileResources.read(profile), read_record())
    assert "group job run-codyra: holds 2 GPU(s) for its train_task, and 1 of them idle while its eval_row runs" in (
        "\n".join(report.warnings())
    )


def test_every_job_asks_for_the_cpus_it_runs():
    cfg = trace("gemma-2b-it")
    assert threads(cfg, "train_lm_task", "codyra", 1, gpus=4) == 4 * 4 + 1  # 4 ranks of 4 threads, the launcher
    cfg["llm"]["deepspeed"]["nproc"] = 2
    assert threads(cfg, "train_lm_task", "codyra", 1, gpus=4) == 2 * 4 + 1
    assert threads(cfg, "eval_lm_row") == 4
    clip = paper("mtil_5shot.yaml")  # 8 threads, 8 loader processes per image stream
    assert threads(clip, "train_task", "codyra", 1) == 8 + 8
    assert threads(clip, "train_task", "lwf", 1) == 8 + 2 * 8  # and its distillation stream's
    assert threads(clip, "eval_row") == threads(clip, "eval_cache") == 8 + 8
    with pytest.raises(TypeError, match="needs the method's class"):  # a training job's threads depend on it
        job_threads(clip, "train_task", "lwf", 1)
    assert not [w for w in check(trace("gemma-2b-it"), ProfileResources.read(PROFILE), read_record()).warnings()]


# --- against the profile


@pytest.mark.parametrize("backbone", ["llama-2-7b-chat", "gemma-2b-it", "llama-3.2-1b-instruct"])
def test_every_trace_backbone_runs_within_the_profile(backbone):
    check_profile(trace(backbone), PROFILE)


def test_llama_2_7b_leaves_out_what_an_h100_node_cannot_hold():
    cfg = trace("llama-2-7b-chat")
    assert set(cfg["left_out"]) == {"ewc", "gem"} and not set(cfg["left_out"]) & set(cfg["methods"])
    raw = read_config_file(REPO / "config" / "trace.yaml")
    raw["backbones"]["llama-2-7b-chat"].pop("leave_out")
    with pytest.raises(ConfigError) as refused:
        check_profile(load_config({**raw, "check_data": False}), PROFILE)
    message = str(refused.value)
    assert "train_lm_task ewc task 1: needs 106.4 GiB per GPU" in message
    assert "train_lm_task gem task 8: needs 84.7 GiB per GPU" in message and "leave gem out" in message


def test_a_row_budget_below_the_estimate_is_refused(tmp_path):
    row = '    runtime: "30 * 1.5 ** (attempt - 1)"  # on the GPU'
    profile = edited_profile(tmp_path, row, "    runtime: 5  # on the GPU")
    with pytest.raises(ConfigError) as refused:
        check_profile(trace("llama-2-7b-chat"), profile)
    # every row is a group job alone, a 1-GPU job of its own
    assert re.search(
        r"group job row-\S+-\d \(1 jobs: eval_lm_row\): needs about 0.1 h; it requests 5 min", str(refused.value)
    )


def test_a_group_job_is_held_to_the_sum_of_its_members_runtimes():
    check_profile(paper("mtil_full.yaml"), PROFILE)  # S-Prompts' run: about 8 h of the 13.75 h its job requests
    with pytest.raises(ConfigError, match=r"group job task-sprompts-11 \(2 jobs: eval_row, train_task\)"):
        check_profile(paper("mtil_full.yaml", cluster_job="task"), PROFILE)  # its 2.2 h task alone in 75 min


def test_a_job_of_several_gpus_is_refused_without_nodes_1(tmp_path):
    profile = edited_profile(tmp_path, "  nodes: 1 ", "  # nodes: 1 ")
    with pytest.raises(ConfigError, match="asks for 4 GPUs without nodes: 1"):
        check_profile(trace("llama-3.2-1b-instruct"), profile)


def test_a_gpu_without_a_declared_memory_is_refused(tmp_path):
    profile = edited_profile(tmp_path, "  gpu_mem_mb: 81559 ", "  # gpu_mem_mb: 81559 ")
    with pytest.raises(ConfigError, match="set default-resources gpu_mem_mb"):
        check_profile(load_config({**copy.deepcopy(TINY), "results": str(tmp_path)}), profile)


@pytest.mark.slow
def test_the_workflow_refuses_a_cluster_run_before_submitting_and_leaves_local_runs_alone(tmp_path):
    from ..workflow.conftest import snakemake

    (tmp_path / "profile").mkdir()
    profile = edited_profile(tmp_path / "profile", "  mem_mb: 64000 ", "  mem_mb: 100 ")
    cfg = {**copy.deepcopy(TINY), "results": str(tmp_path / "results")}
    refused = snakemake(tmp_path, cfg, "-n", "--profile", str(profile), "all_tables", check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "would fail on the cluster" in said
    assert "train_task codyra task 1: needs 3.0 GiB of host memory" in said and "(nothing was submitted)" in said
    snakemake(tmp_path, cfg, "-n", "--cores", "1", "all_tables")


# --- the backbone's methods and the tables' line


def test_a_backbone_leaves_its_methods_out_and_says_why(tmp_path):
    raw = {**copy.deepcopy(TINY), "results": str(tmp_path), "backbone": "small"}
    del raw["model"]["name"]
    raw["backbones"] = {"small": {"name": "codyra-mini", "leave_out": {"full-ft": "too big"}}, "plain": "codyra-mini"}
    cfg = load_config(copy.deepcopy(raw))
    assert cfg["methods"] == ["zeroshot", "lora-r4", "codyra"] and cfg["left_out"] == {"full-ft": "too big"}
    assert load_config({**copy.deepcopy(raw), "backbone": "plain"})["left_out"] == {}
    raw["backbones"]["small"]["leave_out"] = {"ful-ft": "a typo"}
    with pytest.raises(ConfigError, match=r"backbones.small.leave_out: \['ful-ft'\] are not entries"):
        load_config(raw)


def test_the_tables_name_the_methods_left_out_in_every_format(tmp_path, monkeypatch):
    from codyra.analysis.paper_metrics import read_csv_table
    from codyra.evaluation import tables

    cfg = load_config({**copy.deepcopy(TINY), "results": str(tmp_path), "methods": ["zeroshot", "codyra"]})
    cfg["left_out"] = {"full-ft": "needs 106 GiB per GPU"}
    n = len(cfg["tasks"])
    matrix = {"A": [[50.0 + i + j for j in range(n)] for i in range(n + 1)]}
    monkeypatch.setattr(tables, "load_runs", lambda cfg, classes: {m: [matrix] for m in cfg["methods"]})
    out = tables.write_tables(cfg)
    line = "Left out: Full FT: needs 106 GiB per GPU"
    assert f"*{line}*" in (out / "table1.md").read_text()
    assert rf"\par\footnotesize {line}" in (out / "forgetting.tex").read_text()
    assert f"<p><em>{line}</em></p>" in (out / "table1.html").read_text()
    rows = list(csv.DictReader(io.StringIO((out / "table1.csv").read_text())))
    assert [(r["block"], r["row"], r["column"]) for r in rows if r["block"] == "left out"] == [
        ("left out", "Full FT", "needs 106 GiB per GPU")
    ]
    assert all(block != "left out" for block, _, _ in read_csv_table(out / "table1.csv"))  # no value to compare
    assert "Left out" not in (out / "A_codyra.md").read_text()  # a method's own matrix


def test_check_resources_prints_every_rule_against_its_request(tmp_path, capsys):
    from codyra.cli import main

    args = ["check-resources", "--config", str(REPO / "config" / "trace.yaml"), "--set", "check_data=false"]
    assert main([*args, "--set", "backbone=gemma-2b-it"]) == 0
    printed = capsys.readouterr().out
    assert "| train_lm_task | 88 | " in printed and "| 17 of 17 | 4 of 4 |" in printed
    assert "Every job fits what the profile requests." in printed
    profile = edited_profile(tmp_path, "  gpu_mem_mb: 81559 ", "  gpu_mem_mb: 40960 ")  # a 40 GB GPU
    assert main([*args, "--set", "backbone=gemma-2b-it", "--profile", str(profile)]) == 1
    assert "train_lm_task gem task 8: needs 48.5 GiB per GPU" in capsys.readouterr().out


def test_the_check_looks_each_method_up_once_per_config_of_its_jobs(monkeypatch):
    from codyra import methods
    from codyra.experiment.resources import study_configs

    cfg = paper("xtail_16shot.yaml")  # the stream and its single-task studies
    configs = study_configs(cfg)
    calls, real = [], methods.method_class
    monkeypatch.setattr(methods, "method_class", lambda kind: calls.append(kind) or real(kind))
    monkeypatch.setattr("codyra.experiment.resources.study_configs", lambda _: configs)
    report = check(cfg, ProfileResources.read(PROFILE), read_record())
    assert len(report.fits) > 100  # every training, row and held-out row of every method
    assert Counter(calls) == Counter(c["method_configs"][m]["kind"] for c in configs.values() for m in c["methods"])
