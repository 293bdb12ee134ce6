"""One cell A[i, j] of a TRACE benchmark: generate answers to task j's test prompts with
theta_i and score them with the task's metric (0-100, :func:`codyra.trace.metrics.score_task`).

``codyra.evaluation.evaluate`` owns the cell protocol (index checks, row 0 shared by every method and
copied for methods that never train, the JSON file, MLflow) and asks the family for the
cells (:func:`lm_cells`) where a CLIP benchmark would classify images. The predictions are
kept beside the cell file, ``A_{i}_{j}.predictions.jsonl`` (the prompt as shown, answer,
prediction), for inspection. theta_i is the method's model for task j (``Method.for_task``),
shown the prompts the method makes of task j's (``Method.test_prompts``); metrics that read
the prompts (SARI's sources) get the task's own.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import torch

from codyra.device import pick_device, use_threads
from codyra.llm.generation import generate_answers
from codyra.llm.model import length_limits, pretrained_lm, task_folder
from codyra.llm.rebuild import rebuild_lm
from codyra.steps.batches import derive_seed
from codyra.store.cells import cell_record
from codyra.store.io import write_text
from codyra.store.model_states import for_inference
from codyra.store.paths import PRETRAINED, cell_path, row0_cell_path
from codyra.trace.data import load_split
from codyra.trace.metrics import TRACE_TASK_METRICS, score_task


def predictions_path(cell_file: Path) -> Path:
    return cell_file.with_suffix(".predictions.jsonl")


def evaluate_lm_cell(cfg: dict, method: str, seed: int | None, i: int, j: int, *, kind, device=None) -> dict:
    """A[i, j] for (method, seed), ``kind`` the method's class (its hooks ``for_task`` and
    ``test_prompts``), or the pretrained row (method ``pretrained``, ``kind`` and seed None, i 0).

    Writes the predictions file and returns the cell's JSON object (the caller writes it)."""
    started = time.time()
    use_threads(cfg["eval"]["threads"])
    device = pick_device(device)
    trained = kind is not None and kind.trains
    # a method that never trains answers with theta_0 (FIX(ICL): only its prompts differ)
    bundle = (
        for_inference(cfg, method, seed, i, rebuild_lm(cfg, method, seed, i), kind, task=j)
        if trained
        else pretrained_lm(cfg)
    )
    # bf16 weights for generation on a GPU (as in training); fp32 on the CPU
    bf16 = device.type == "cuda" and cfg["eval"]["precision"] in ("auto", "bf16")
    model = bundle.model.to(device, dtype=torch.bfloat16 if bf16 else torch.float32)
    task = cfg["tasks"][j - 1]["name"]
    examples = load_split(task_folder(cfg, j), "test")
    prompts, answers = [e.prompt for e in examples], [e.answer for e in examples]
    # what the model is shown: the method may rewrite the prompts (FIX(ICL)'s demonstrations)
    shown, prompt_len = (
        kind.test_prompts(cfg, method, seed, j, examples, bundle.tokenizer)
        if kind is not None and kind.rewrites_prompts
        else (prompts, cfg["llm"]["max_prompt_len"])
    )
    llm = cfg["llm"]
    predictions = generate_answers(
        model,
        bundle.tokenizer,
        shown,
        limits=dataclasses.replace(length_limits(cfg), max_prompt_len=prompt_len),
        max_new_tokens=llm["max_new_tokens"],
        batch_size=cfg["eval"]["batch_size"],
        decoding=llm["decoding"],
        temperature=llm["temperature"],
        seed=derive_seed(seed or 0, i, j),
        device=device,
        desc=f"A[{i},{j}] {task}",
    )
    accuracy = score_task(
        task, predictions, answers, prompts, llm["accuracy_mode"], llm["rouge_mode"], llm["similarity"]
    )
    cell_file = row0_cell_path(cfg, j) if method == PRETRAINED else cell_path(cfg, method, seed, i, j)
    rows = [{"prompt": p, "answer": a, "prediction": q} for p, a, q in zip(shown, answers, predictions, strict=True)]
    write_text(predictions_path(cell_file), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return cell_record(
        cfg,
        method,
        seed,
        i,
        j,
        accuracy,
        started,
        metric=TRACE_TASK_METRICS[task],
        num_samples=len(examples),
        decoding=llm["decoding"],
        max_new_tokens=llm["max_new_tokens"],
    )


def lm_cells(cfg: dict, method: str, seed: int | None, i: int, js: list[int], device, kind):
    """Yield A[i, j] for j in ``js`` (theta_i is rebuilt per cell: generation casts it)."""
    for j in js:
        yield evaluate_lm_cell(cfg, method, seed, i, j, kind=kind, device=device)
