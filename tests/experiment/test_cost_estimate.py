"""scripts/estimate-cost.py multiplies the DAG's jobs by per-unit costs; scripts/render-gpu-figures.py
renders a GPU record. Units and seconds are checked against hand counts on a small MTIL grid."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from codyra.data.catalog import EXPECTED
from codyra.experiment.costs import DEFAULT_RECORD

from ..conftest import ROOT, TINY, load_benchmark, load_script, write_yaml

pytestmark = pytest.mark.slow


# a GPU record with round unit costs: 0.1 s per LoRA step of 64 images (0.2 for CoDyRA), 1,000 images/s a
# cell, 5 s of imports, 6.4e12 FLOPs per step, 1e10 per evaluated image, a 1e15 FLOP/s peak
RECORD = {
    "device": {"name": "NVIDIA H200", "datasheet_peak_flops": {"bf16": 1e15, "fp32": 6e13}},
    "measured": "2026-01-01T00:00:00+00:00",
    "startup": {"median_s": 5.0},
    "clip_train": {
        "model": "codyra-mini",
        "batch": 64,
        "bf16": {
            "lora_step_flops": 6.4e12,
            "phases": {"sparse": {"step_s_median": {"lora": 0.1, "codyra": 0.2}}},
        },
    },
    "clip_eval": {
        "images_per_s": {"cell_cache": 1000.0},
        "encode_image_flops": 1e10,
        "cache_build_images_per_s": 100.0,
    },
}


def small_mtil_grid(tmp_path: Path, **train) -> Path:
    """Two MTIL tasks (10 and 30 iterations of 8 images), zero-shot, LoRA and CoDyRA, 2 seeds."""
    cfg = copy.deepcopy(TINY)
    cfg.update(
        benchmark="cost-fixture",
        results=str(tmp_path / "results"),
        seeds=[0, 1],
        methods=["zeroshot", "lora", "codyra"],
        data={"kind": "mtil", "root": str(tmp_path / "absent"), "fewshot": 5},
        tasks=["DTD", "EuroSAT"],
        task_settings={"EuroSAT": {"train": {"iterations": 30}}},
        train={"iterations": 10, "batch_size": 8, "lr": 0.001, **train},
        heldout_tasks=[],
    )
    cfg["method_configs"] = {
        "zeroshot": {"kind": "zeroshot"},
        "lora": {"kind": "lora", "rank": 2, "alpha": 2, "placement": "all"},
        "codyra": copy.deepcopy(TINY["method_configs"]["codyra"]),
    }
    return Path(write_yaml(tmp_path / "cost.yaml", cfg))


def test_the_estimate_counts_the_units_of_every_job(tmp_path):
    script = load_script("estimate-cost")
    path = small_mtil_grid(tmp_path)
    costs = script.UnitCosts(RECORD, Path("record.json"))
    est = script.estimate(path, "all_tables", costs)

    runs = 2 * 2  # the trained methods x seeds
    images = 2 * (10 * 8 + 30 * 8)  # per trained method: both seeds, task 1 and task 2
    assert est.units["images trained"] == images * 2
    lora_s, codyra_s = images * 0.1 / 64, images * 0.2 / 64
    assert est.seconds["train"] == pytest.approx(lora_s + codyra_s)
    tests = EXPECTED["mtil"]["DTD"].test + EXPECTED["mtil"]["EuroSAT"].test
    rows = runs * 2 + 1  # rows 1..2 of every trained run, and row 0 once
    assert est.units["images classified"] == rows * tests
    assert est.seconds["eval"] == pytest.approx(rows * tests / 1000.0)
    assert est.units["cache images"] == tests  # each test set decoded once
    assert est.cpu_seconds == pytest.approx(tests / 100.0 + 2 * 5.0)  # two CPU jobs, no GPU
    assert est.units["processes"] == runs + 1  # a group job per run, and row 0
    assert est.seconds["start-up"] == pytest.approx(5.0 * (runs + 1))
    assert est.floor["train"] == pytest.approx(images * 2 * 1e11 / 1e15)
    assert est.chains[(None, "codyra", "0")] == pytest.approx(codyra_s / 2 + 2 * tests / 1000.0)
    assert est.wall(1) == pytest.approx(est.total)
    assert est.wall(1000) == pytest.approx(max(est.chains.values()))
    assert costs.notes == []  # the measured model: nothing scaled


def test_a_compiled_step_trains_at_its_measured_rate_after_compiling_once_per_task(tmp_path):
    script = load_script("estimate-cost")
    path = small_mtil_grid(tmp_path, precision="bf16", compile=True, compile_mode="reduce-overhead")
    record = copy.deepcopy(RECORD)
    # half the eager step; warm-up: 3 steps beside 30 s (LoRA) and 40 s (CoDyRA) of compilation: every job is
    # given the larger
    record["clip_train"]["bf16_graphed"] = {
        "phases": {phase: {"step_s_median": {"lora": 0.05, "codyra": 0.1}} for phase in ("dense", "sparse")},
        "warmup": {"steps": 3, "seconds": {"lora": 30 + 3 * 0.05, "codyra": 40 + 3 * 0.1}},
    }
    est = script.estimate(path, "all_tables", script.UnitCosts(record, Path("record.json")))
    images = 2 * (10 * 8 + 30 * 8)  # per trained method: both seeds, task 1 and task 2
    tasks = 2 * 2  # per trained method: both seeds, 2 tasks, each a job that compiles its step
    assert est.seconds["train"] == pytest.approx(images * (0.05 + 0.1) / 64 + 2 * tasks * 40)


def test_the_gpu_page_names_the_device_the_date_and_the_code(tmp_path):
    script = load_script("render-gpu-figures")
    record = json.loads((Path(ROOT) / DEFAULT_RECORD).read_text())
    page = "\n".join(script.render(record, "record.json", "a commit of yesterday"))
    assert record["device"]["name"] in page and record["measured"] in page
    assert "**Code measured:** a commit of yesterday" in page
    ratio = record["clip_train"]["bf16"]["phases"]["sparse"]["paired_ratio"]["median"]
    assert f"{ratio:.3f}" in page
    del record["llm_train"]
    assert "ZeRO-2" not in "\n".join(script.render(record, "record.json", None))  # a missing section is left out


def test_the_data_path_section_says_how_many_workers_feed_the_gpu():
    script = load_script("render-gpu-figures")
    record = {
        "measured": "2026-01-01T00:00:00+00:00",
        "cpu_count": 2,
        "machine": "x86_64",
        "loadavg_1min": [0.1, 0.2],
        "images": 64,
        "size": 224,
        "batch_size": 16,
        "target": 10.0,
        "eval_images_per_s": {"jpeg": 100.0, "cache": 5000.0},
        "eval_speedup": 50.0,
        "train_images_per_s": {"jpeg": 80.0, "decoded": 160.0},
        "train_speedup": 2.0,
        "gpu": {"name": "NVIDIA H200", "record": "r.json", "images_per_s": {"train": 480.0, "eval": 6000.0}},
        "workers_to_feed_gpu": {"eval_jpeg": 60.0, "eval_cache": 1.2, "train_jpeg": 6.0, "train_decoded": 3.0},
    }
    page = "\n".join(script.render_data_path(record, "dp.json"))
    assert "| reading the evaluation cache | 5,000 (50x; target >= 10x) |" in page
    assert "about 60 such workers to evaluate from JPEGs, 1.2 from the cache, 6.0 to train" in page


def dag_record(client: bool, controller: bool | None, seconds: dict[tuple[str, str], float]) -> dict:
    runs = [
        {"config": c, "target": t, "jobs": 100, "seconds": s, "meets_target": s <= 10.0}
        for (c, t), s in seconds.items()
    ]
    return {
        "runs": runs,
        "target_s": 10.0,
        "slurm_client_installed": client,
        "slurm_controller_answers": controller,
        "repeats": 1,
        "snakemake": "9.0",
        "loadavg_1min": [0.1, 0.2],
        "cpu_count": 2,
        "machine": "x86_64",
        "measured": "2026-01-01T00:00:00+00:00",
    }


def test_the_dag_build_page_sets_records_side_by_side_and_marks_slow_runs():
    script = load_script("render-dag-build-time")
    up = dag_record(True, True, {("a.yaml", "paper"): 4.0, ("b.yaml", "paper"): 12.5})
    down = dag_record(True, False, {("a.yaml", "paper"): 13.0})
    bare = dag_record(False, None, {("a.yaml", "paper"): 3.5, ("b.yaml", "paper"): 11.0})
    page = "\n".join(script.render([("up.json", up), ("down.json", down), ("bare.json", bare)]))
    columns = ["SLURM client, controller up (s)", "SLURM client, controller down (s)", "no SLURM client (s)"]
    assert "| config | target | jobs | " + " | ".join(columns) + " |" in page
    assert "| `a.yaml` | `paper` | 100 | 4.0 | 13.0 * | 3.5 |" in page
    assert "| `b.yaml` | `paper` | 100 | 12.5 * | - | 11.0 * |" in page  # a config a record did not time: "-"


def test_a_floor_record_adds_its_snakemake_alone_column():
    script = load_script("render-dag-build-time")
    up = dag_record(True, True, {("a.yaml", "paper"): 12.0})
    up["floor"], up["runs"][0]["floor_seconds"] = True, 7.25
    bare = dag_record(False, None, {("a.yaml", "paper"): 11.0})
    page = "\n".join(script.render([("up.json", up), ("bare.json", bare)]))
    columns = ["SLURM client, controller up (s)", "no SLURM client (s)"]
    columns.append("SLURM client, controller up, Snakemake alone (s)")
    assert "| config | target | jobs | " + " | ".join(columns) + " |" in page
    assert "| `a.yaml` | `paper` | 100 | 12.0 * | 11.0 * | 7.2 |" in page


def test_two_records_of_one_setting_are_told_apart_by_their_time_of_measurement():
    script = load_script("render-dag-build-time")
    before = dag_record(True, True, {("a.yaml", "paper"): 12.0})
    after = dag_record(True, True, {("a.yaml", "paper"): 9.0})
    after["measured"] = "2026-01-02T10:30:00+00:00"
    page = "\n".join(script.render([("before.json", before), ("after.json", after)]))
    columns = ["SLURM client, controller up, 2026-01-01 00:00 (s)", "SLURM client, controller up, 2026-01-02 10:30 (s)"]
    assert "| config | target | jobs | " + " | ".join(columns) + " |" in page
    assert "| `a.yaml` | `paper` | 100 | 12.0 * | 9.0 |" in page


DRY_RUN = """Building DAG of jobs...
[Sat Nov 28 09:13:25 2026]
localrule mlflow_init:
    output: results/mini/mlflow.ready.json
    jobid: 3
[Sat Nov 28 09:13:25 2026] Group job run-lora-seed1 (jobs in lexicogr. order):

    [Sat Nov 28 09:13:25 2026]
    rule eval_row:
        input: results/a.json, results/lora/seed1/task2/update.safetensors
        output: results/lora/seed1/cells/A_2_1.json
        wildcards: method=lora, seed=1, i=2
    [Sat Nov 28 09:13:25 2026]
    rule eval_row:
        input: results/a.json
        output: results/lora/seed1/cells/A_1_1.json
        wildcards: seed=1, method=lora, i=1
"""


def test_the_floor_reads_each_jobs_inputs_by_its_wildcards_from_the_dry_run():
    benchmark = load_benchmark("dag_build_time")
    assert benchmark.printed_jobs(DRY_RUN) == {
        "mlflow_init": {"": []},
        "eval_row": {
            "i=2,method=lora,seed=1": ["results/a.json", "results/lora/seed1/task2/update.safetensors"],
            "i=1,method=lora,seed=1": ["results/a.json"],
        },
    }


def test_a_trace_task_counts_its_folder_or_the_release_that_data_root_names(tmp_path):
    from codyra.experiment.costs import trace_examples

    def cfg(root):
        return {"data": {"root": str(root)}}

    release = tmp_path / "LLM-CL-Benchmark_500"
    assert [trace_examples(cfg(release), t, "test") for t in ("FOMC", "NumGLUE-cm")] == [100, 81]
    assert trace_examples(cfg(release), "FOMC", "train") == 500
    assert trace_examples(cfg(tmp_path / "LLM-CL-Benchmark_5000"), "FOMC", "test") == 2000  # TRACE's sampling
    (release / "FOMC").mkdir(parents=True)
    (release / "FOMC" / "test.json").write_text(json.dumps([{"prompt": "p", "answer": "A"}] * 7))
    assert trace_examples(cfg(release), "FOMC", "test") == 7  # the folder, where it is there to count


def test_a_causal_lm_row_generates_its_expected_answers_in_a_job_of_its_own(tmp_path):
    script = load_script("estimate-cost")
    root = tmp_path / "trace"
    (root / "FOMC").mkdir(parents=True)
    answers = [{"prompt": "p", "answer": "ab"}, {"prompt": "q", "answer": "abcdef"}]
    (root / "FOMC" / "test.json").write_text(json.dumps(answers))
    cfg = {
        "benchmark": "cost-lm",
        "results": str(tmp_path / "results"),
        "seeds": [0],
        "methods": ["zeroshot", "lora"],
        "model": {"family": "causal_lm", "name": "codyra-mini-llama"},
        "data": {"kind": "trace", "root": str(root)},
        "tasks": ["FOMC", "Py150"],
        "train": {"iterations": 2, "batch_size": 4, "lr": 0.01},
        "llm": {"max_new_tokens": 8, "mini": {"eval_per_task": 2, "vocab_size": 400}},
        "mini": {"train_per_task": 16, "test_per_task": 10, "corpus_size": 100, "pretrain_steps": 2},
        "method_configs": {"zeroshot": {"kind": "zeroshot"}, "lora": {"kind": "lora", "rank": 2}},
    }
    record = {
        **RECORD,
        "generate": {"tokens_per_s": {"batched": 100.0}, "row_build_s": 8.0},  # 1 s per update of the model
        "config": {"rank_tasks": 8},
        "llm_train": {
            "shape": {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4},
            "vocab": 400,
            "sequence_tokens": 100,
            "step_flops": 1e12,
            "phases": {"sparse": {"tokens_per_s": {"lora": 1000.0, "codyra": 1000.0}}},
        },
    }
    costs = script.UnitCosts(record, Path("record.json"))
    costs.lm_scale = lambda params, name: 1.0  # the measured model's size
    ratios = {"FOMC": 1.5, "Py150": 1.0}
    est = script.estimate(Path(write_yaml(tmp_path / "lm.yaml", cfg)), "all_tables", costs, ratios=ratios)

    # FOMC's answers: 2 and 6 bytes (the mini's tokenizer is not there: bytes bound tokens), each with its
    # end token, times the measured ratio 1.5; Py150 has no test set here: the bound, 8
    fomc = (3 + 7) / 2 * 1.5
    assert [(r["task"], r["expected"]) for r in est.answers] == [("FOMC", fomc), ("Py150", 8)]
    assert est.answers[0]["how"].startswith("UTF-8 bytes") and est.answers[1]["how"].startswith("no test set")
    rows = 2 + 1  # lora's rows 1 and 2, and row 0 (zeroshot's rows are copies)
    assert est.units["tokens generated (expected)"] == round(rows * 10 * (fomc + 8))
    assert est.seconds["generation"] == pytest.approx(rows * 10 * (fomc + 8) / 100.0, rel=1e-3)
    assert est.generation_bound == pytest.approx(rows * 10 * 2 * 8 / 100.0)
    # theta_i of lora's rows 1 and 2 merges 1 and 2 updates (row 0 none): the measured model is this one
    assert est.seconds["theta_i build"] == pytest.approx((1 + 2) * 1.0)
    # a process per training task and one per row: a row never runs in its task's multi-GPU job
    trained = 2
    assert est.units["processes"] == 1 + trained + rows  # the mini's pretraining, tasks 1-2, rows 0-2


def test_the_gpu_page_shows_every_precision_and_the_token_budget_a_record_holds():
    script = load_script("render-gpu-figures")
    record = json.loads((Path(ROOT) / DEFAULT_RECORD).read_text())
    clip = record["clip_train"]
    clip["tf32"], clip["bf16_compiled"] = copy.deepcopy(clip["fp32"]), copy.deepcopy(clip["bf16"])
    clip["bf16_graphed"] = copy.deepcopy(clip["bf16"])
    clip["speedup_over_fp32_lora"] = {"tf32": 1.25, "bf16": 1.5, "bf16_compiled": 3.0, "bf16_graphed": 6.25}
    gen = record["generate"]
    gen["tokens_per_s"]["budget"], gen["batch_tokens"], gen["budget_speedup"] = 9000.0, 65536, 20.0
    gen["greedy_answers_agree_budget_vs_batched"], gen["row_build_s"] = 0.984, 12.5
    gen["greedy_answers_shared_prefix_budget_vs_batched"] = 0.9912
    record["config"] = {"rank_tasks": 8}
    page = "\n".join(script.render(record, "record.json", None))
    assert "| tf32 | sparse |" in page and "| bf16, compiled | dense |" in page
    assert "| bf16, compiled, CUDA graphs | sparse |" in page
    speedups = "tf32 1.25x, bf16 1.50x, bf16, compiled 3.00x, bf16, compiled, CUDA graphs 6.25x."
    assert f"LoRA's step against fp32's: {speedups}" in page
    assert "In batches of 65,536 tokens" in page and "9,000 generated tokens/s (20.0x" in page
    assert "agree with those batches' on 98.4 % of the prompts, and on the first 99.1 % of an answer" in page
    assert "summed on the GPU): 12.5 s." in page
    assert "The first 3 steps of each" not in page and "beyond their weights" not in page  # the record has neither
    clip["bf16_graphed"] |= {"warmup": {"steps": 3, "seconds": {"lora": 41.0, "codyra": 52.0}}}
    clip["bf16_graphed"]["resident_gib_both_variants"] = 1.5
    for phase, peak in zip(clip["bf16_graphed"]["phases"].values(), (3.0, 3.25), strict=True):
        phase["peak_reserved_gib_both_variants"] = peak
    page = "\n".join(script.render(record, "record.json", None))
    assert (
        "(compilation and CUDA graph recording where asked; the cost model's compile time), LoRA / CoDyRA, s: "
        "bf16, compiled, CUDA graphs 41.0 / 52.0." in page
    )
    assert "the CUDA graphs' pool), GiB: bf16, compiled, CUDA graphs 1.75." in page


def test_the_gpu_page_dates_each_run_and_rates_a_step_against_its_own_precisions_peak():
    script = load_script("render-gpu-figures")
    record = json.loads((Path(ROOT) / DEFAULT_RECORD).read_text())
    record["measured"] = "2026-01-02T00:00:00+00:00"
    record["clip_eval"]["measured"] = record["generate"]["measured"] = record["measured"]
    for name in ("device", "startup", "clip_train", "llm_train"):
        record[name]["measured"] = "2026-01-01T00:00:00+00:00"
    tf32 = record["clip_train"]["tf32"]
    tf32["lora_step_flops"], tf32["phases"]["sparse"]["step_s_median"]["lora"] = 2.0e13, 0.2
    record["device"]["datasheet_peak_flops"]["tf32"] = 4.0e14  # 1e14 FLOP/s of 4e14: 25 %
    page = "\n".join(script.render(record, "record.json", None))
    assert (
        "Measured in `device`, `startup`, `clip_train`, `llm_train` at 2026-01-01T00:00:00+00:00; "
        "`clip_eval`, `generate` at 2026-01-02T00:00:00+00:00 on one NVIDIA H200"
    ) in page
    assert "| tf32 | sparse | 200.0 |" in page
    row = next(line for line in page.splitlines() if line.startswith("| tf32 | sparse |"))
    assert row.endswith("| 25.0 % |")


def test_a_test_set_without_a_measured_ratio_is_refused_by_name(tmp_path):
    from codyra.errors import ConfigError
    from codyra.experiment.costs import expected_answer_tokens

    (tmp_path / "MyTask").mkdir()
    (tmp_path / "MyTask" / "test.json").write_text(json.dumps([{"prompt": "p", "answer": "abc"}]))
    cfg = {"data": {"root": str(tmp_path)}, "llm": {"max_new_tokens": 2}}
    assert expected_answer_tokens(cfg, "MyTask", {"MyTask": 1.0}, len) == 2  # 3 bytes + EOS, capped at the bound
    with pytest.raises(ConfigError, match="no measured answer-length ratio for task 'MyTask'.*--answer-tokens"):
        expected_answer_tokens(cfg, "MyTask", {"FOMC": 1.0}, len)
