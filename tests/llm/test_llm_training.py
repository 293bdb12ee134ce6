"""LM training and evaluation on the tiny mini TRACE: stored updates, reconstruction of
theta_i, resume after a kill, the epoch schedule, cells and generation."""

from __future__ import annotations

import json

import pytest
import torch

from codyra.evaluation.evaluate import evaluate_cell, evaluate_row
from codyra.experiment.train_job import task_checkpoint_dir, train_task
from codyra.llm.deepspeed_backend import zero2_config
from codyra.llm.generation import generate_answers
from codyra.llm.model import (
    WeightsUnavailableError,
    length_limits,
    load_causal_lm,
    pretrained_lm,
    task_folder,
)
from codyra.llm.rebuild import rebuild_lm, rebuild_lm_as
from codyra.store.io import read_json
from codyra.store.paths import (
    HISTORY_FILE,
    SUMMARY_FILE,
    UPDATE_FILE,
    cell_path,
    row0_cell_path,
    task_dir,
)
from codyra.store.updates import apply_update, load_update
from codyra.trace.data import load_split


def state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def history(cfg, method, i=1) -> list[dict]:
    """The task's history records, without when each step ran."""
    return [
        {k: v for k, v in json.loads(line).items() if k != "_time"}
        for line in (task_dir(cfg, method, 0, i) / HISTORY_FILE).read_text().splitlines()
    ]


@pytest.mark.parametrize("method", ["codyra", "lora-qv"])
def test_rebuilt_theta_equals_the_trained_model(tiny_trace, method):
    for i in (1, 2):
        trained = train_task(tiny_trace, method, 0, i)
    want = state(trained.model)
    rebuilt = state(rebuild_lm(tiny_trace, method, 0, 2).model)
    assert rebuilt.keys() == want.keys()
    for name, tensor in rebuilt.items():
        assert torch.equal(tensor, want[name]), name
    summary = read_json(task_dir(tiny_trace, method, 0, 2) / SUMMARY_FILE)
    assert summary["task"] == "NumGLUE-cm" and summary["steps"] == 6 and summary["update_kind"] == "lora"
    assert len(summary["matrices"]) == (14 if method == "codyra" else 4)
    assert [h["step"] for h in history(tiny_trace, method, 2)] == list(range(1, 7))


def test_codyra_prunes_gates_after_the_dense_phase(tiny_trace):
    tiny_trace["method_configs"]["codyra"]["kappa_max"] = 10.0  # far above the gates' scale
    summary = train_task(tiny_trace, "codyra", 0, 1).summary
    assert summary["active_rank_total"] == 0 and summary["stored_params"] == 0
    kappas = [h["kappa"] for h in history(tiny_trace, "codyra")]
    assert kappas[:3] == [0.0] * 3 and kappas[-1] == pytest.approx(10.0)


class Killed(Exception):
    pass


@pytest.mark.parametrize("method", ["codyra", "lora-qv"])  # lora-qv: adapter dropout 0.1
def test_killed_and_resumed_run_equals_uninterrupted_run(tiny_trace, tmp_path, method):
    def kill_at_5(step):
        if step == 5:
            raise Killed

    with pytest.raises(Killed):
        train_task(tiny_trace, method, 0, 1, on_step=kill_at_5)  # checkpoints at steps 2 and 4
    out = task_dir(tiny_trace, method, 0, 1)
    ckpt = task_checkpoint_dir(tiny_trace, method, 0, 1)
    assert read_json(ckpt / "state.json")["step"] == 4 and not (out / UPDATE_FILE).exists()
    resumed = train_task(tiny_trace, method, 0, 1)
    assert not ckpt.exists()
    fresh = {**tiny_trace, "results": str(tmp_path / "fresh")}
    uninterrupted = train_task(fresh, method, 0, 1)
    a, b = state(resumed.model), state(uninterrupted.model)
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert history(tiny_trace, method) == history(fresh, method)


def test_epochs_per_task_set_the_number_of_steps(tiny_trace_dict):
    from codyra.experiment.config import load_config

    tiny_trace_dict["task_settings"] = {
        tiny_trace_dict["tasks"][0]: {"train": {"epochs": 2}, "methods": {"lora-qv": {"train": {"epochs": 3}}}}
    }  # 2 x 16 examples / batch 4
    cfg = load_config(tiny_trace_dict)
    assert train_task(cfg, "codyra", 0, 1).summary["steps"] == 8
    assert train_task(cfg, "lora-qv", 0, 1).summary["steps"] == 12


def test_gradient_accumulation_equals_one_large_batch(tiny_trace_dict):
    from codyra.experiment.config import load_config
    from codyra.store.updates import load_update

    def run(name, batch_size, accumulation):
        cfg = load_config({**tiny_trace_dict, "results": f"{tiny_trace_dict['results']}-{name}"})
        cfg["train"].update(batch_size=batch_size, gradient_accumulation=accumulation)
        train_task(cfg, "codyra", 0, 1)
        return load_update(task_dir(cfg, "codyra", 0, 1)).dense_deltas(), history(cfg, "codyra")

    (whole, whole_history), (parts, parts_history) = run("whole", 4, 1), run("parts", 2, 2)
    # same 4 examples per step, same token-mean loss: equal up to summation order
    assert [h["tokens"] for h in parts_history] == [h["tokens"] for h in whole_history]
    torch.testing.assert_close(
        [h["loss"] for h in parts_history], [h["loss"] for h in whole_history], rtol=1e-5, atol=0
    )
    for name, (_, _, delta) in whole.items():
        torch.testing.assert_close(parts[name][2], delta, rtol=1e-4, atol=1e-6)  # fp32 summation order


def test_epochs_count_optimizer_steps_of_accumulated_batches(tiny_trace_dict):
    from codyra.experiment.config import load_config
    from codyra.llm.train import total_steps

    cfg = load_config(tiny_trace_dict)
    hp = {**cfg["train"], "epochs": 2, "batch_size": 2, "gradient_accumulation": 3}
    assert total_steps(hp, 16) == 6  # ceil(2 x 16 / (2 x 3))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_row_model_equals_the_fp32_rebuild_cast_once(tiny_trace, dtype):
    """A row's theta_i is summed in fp32 from theta_0's stored values and rounded once: equal to the
    fp32 rebuild cast to the evaluation's dtype, not to a model rounded after every task's update."""
    for i in (1, 2):
        train_task(tiny_trace, "codyra", 0, i)
    want = {k: v.to(dtype) for k, v in state(rebuild_lm(tiny_trace, "codyra", 0, 2).model).items()}
    got = state(rebuild_lm_as(tiny_trace, "codyra", 0, 2, torch.device("cpu"), dtype).model)
    assert got.keys() == want.keys()
    for name, tensor in got.items():
        assert tensor.dtype == dtype and torch.equal(tensor, want[name]), name
    if dtype == torch.bfloat16:  # rounding after each task's merge would differ somewhere
        stepwise = pretrained_lm(tiny_trace).model.to(dtype)
        for k in (1, 2):
            apply_update(stepwise, load_update(task_dir(tiny_trace, "codyra", 0, k)))
        assert any(not torch.equal(v, want[k]) for k, v in state(stepwise).items())


def test_a_row_builds_theta_once_for_all_its_cells(tiny_trace, monkeypatch):
    import codyra.llm.evaluate as lm_evaluate

    train_task(tiny_trace, "codyra", 0, 1)
    builds = []
    real = lm_evaluate.rebuild_lm_as
    monkeypatch.setattr(lm_evaluate, "rebuild_lm_as", lambda *a: builds.append(a[:4]) or real(*a))
    cells = evaluate_row(tiny_trace, "codyra", 0, 1)
    assert [c["j"] for c in cells] == [1, 2] and builds == [(tiny_trace, "codyra", 0, 1)]


def test_cells_score_generated_answers_and_share_row_0(tiny_trace):
    train_task(tiny_trace, "codyra", 0, 1)
    cell = evaluate_cell(tiny_trace, "codyra", 0, 1, 2)
    assert cell == read_json(cell_path(tiny_trace, "codyra", 0, 1, 2))
    assert cell["task"] == "NumGLUE-cm" and cell["metric"] == "accuracy" and cell["num_samples"] == 10
    assert 0.0 <= cell["accuracy"] <= 100.0 and (cell["benchmark"], cell["i"], cell["j"]) == ("tiny-trace", 1, 2)
    rows = cell_path(tiny_trace, "codyra", 0, 1, 2).with_suffix(".predictions.jsonl").read_text().splitlines()
    assert [json.loads(r)["answer"] for r in rows] == [e.answer for e in load_split(task_folder(tiny_trace, 2), "test")]

    row0 = evaluate_cell(tiny_trace, "zeroshot", 0, 2, 1)  # never trains: a copy of the pretrained row
    shared = read_json(row0_cell_path(tiny_trace, 1))
    assert row0["accuracy"] == shared["accuracy"] and row0["copied_from"] == str(row0_cell_path(tiny_trace, 1))
    assert row0_cell_path(tiny_trace, 1).with_suffix(".predictions.jsonl").is_file()
    assert evaluate_cell(tiny_trace, "codyra", 0, 0, 1)["accuracy"] == shared["accuracy"]


def test_greedy_generation_is_deterministic_and_independent_of_padding(tiny_trace):
    bundle = pretrained_lm(tiny_trace)
    prompts = [e.prompt for j in (1, 2) for e in load_split(task_folder(tiny_trace, j), "test")]

    def answers(batch_size):
        return generate_answers(
            bundle.model,
            bundle.tokenizer,
            prompts,
            limits=length_limits(tiny_trace),
            max_new_tokens=8,
            batch_size=batch_size,
        )

    batched = answers(7)  # prompts of different lengths share batches: left padding
    assert batched == answers(7) and batched == answers(1)
    assert any(batched)


def test_missing_weights_errors_name_the_fix(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="pretrain-mini"):
        load_causal_lm(str(tmp_path), local=True)

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # as on compute nodes
    with pytest.raises(
        WeightsUnavailableError,
        match=f"cache {tmp_path}.*model.cache_dir.*HF_HUB_OFFLINE.*codyra fetch-weights --model meta-llama/Llama-2",
    ):
        load_causal_lm("meta-llama/Llama-2-7b-chat-hf", local=False, cache_dir=str(tmp_path))


def test_zero_batches_split_evenly_over_ranks():
    config = zero2_config(batch_size=4, world_size=2, bf16=True, clip_norm=1.0)
    assert (config["train_batch_size"], config["train_micro_batch_size_per_gpu"]) == (4, 2)
    # TRACE: 1 per GPU x 4 GPUs x 8 accumulated micro-batches = 32 examples per optimizer step
    config = zero2_config(batch_size=4, world_size=4, bf16=True, clip_norm=1.0, accumulation=8)
    assert (config["train_batch_size"], config["train_micro_batch_size_per_gpu"]) == (32, 1)
    assert config["gradient_accumulation_steps"] == 8
    assert config["zero_optimization"]["stage"] == 2 and config["bf16"]["enabled"]
    with pytest.raises(ValueError, match="train.batch_size"):
        zero2_config(batch_size=4, world_size=3, bf16=True, clip_norm=1.0)


def test_models_load_correctly_in_concurrent_threads(tiny_trace):
    """Snakemake's local mode runs jobs as threads: transformers' loading must not interleave."""
    from concurrent.futures import ThreadPoolExecutor

    want = state(pretrained_lm(tiny_trace).model)
    with ThreadPoolExecutor(4) as pool:
        loaded = list(pool.map(lambda _: state(pretrained_lm(tiny_trace).model), range(8)))
    for got in loaded:
        assert all(torch.equal(got[k], want[k]) for k in want)
