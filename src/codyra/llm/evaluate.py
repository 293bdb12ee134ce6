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

from codyra.device import pick_device, precision_scope, use_threads
from codyra.llm.generation import generate_answers
from codyra.llm.model import length_limits, pretrained_lm, task_folder
from codyra.llm.rebuild import rebuild_lm_as
from codyra.steps.batches import derive_seed
from codyra.store.cells import cell_record
from codyra.store.io import write_text
from codyra.store.model_states import require_updates
from codyra.store.paths import cell_path, row0_cell_path
from codyra.store.updates import load_method_state
from codyra.trace.data import load_split
from codyra.trace.metrics import TRACE_TASK_METRICS, score_task


def predictions_path(cell_file: Path) -> Path:
    return cell_file.with_suffix(".predictions.jsonl")


def row_model(cfg: dict, row, device: torch.device):
    """(theta_i on ``device`` in the evaluation's dtype, its tokenizer, the stored method states of tasks
    1..i), built once for a row: bf16 on a GPU where ``eval.precision`` is auto or bf16, fp32 otherwise.
    A method that never trains answers with theta_0 (FIX(ICL): only its prompts differ); row 0 is theta_0.
    ``row``: a :class:`codyra.methods.base.Row`."""
    bf16 = device.type == "cuda" and cfg["eval"]["precision"] in ("auto", "bf16")
    dtype = torch.bfloat16 if bf16 else torch.float32
    if row.kind is None or not row.kind.trains:
        bundle = pretrained_lm(cfg, dtype=None)
        bundle.model.to(device, dtype=dtype)
        return bundle.model, bundle.tokenizer, None
    bundle = rebuild_lm_as(cfg, row.method, row.seed, row.i, device, dtype)
    states = [load_method_state(d) for d in require_updates(cfg, row.method, row.seed, row.i)]
    return bundle.model, bundle.tokenizer, states


def evaluate_lm_cell(cfg: dict, row, j: int, *, theta, device) -> dict:
    """A[i, j] of ``row``, whose ``kind`` is the method's class (its hooks ``for_task`` and
    ``test_prompts``), None for the pretrained row (method ``pretrained``, seed None, i 0);
    ``theta`` the row's model (:func:`row_model`), shared by its cells.

    Writes the predictions file and returns the cell's JSON object (the caller writes it)."""
    started = time.time()
    method, seed, i, kind = row.method, row.seed, row.i, row.kind
    backbone, tokenizer, states = theta
    # the model that answers task j: the method's modules beside the backbone (an E-prompt, a pool) in
    # the backbone's device and dtype; the backbone itself is not copied
    model = backbone if states is None else kind.for_task(backbone, states, j)
    model.to(device, dtype=next(backbone.parameters()).dtype)
    task = cfg["tasks"][j - 1]
    examples = load_split(task_folder(cfg, j), "test")
    prompts, answers = [e.prompt for e in examples], [e.answer for e in examples]
    # what the model is shown: the method may rewrite the prompts (FIX(ICL)'s demonstrations)
    shown, prompt_len = (
        kind.test_prompts(cfg, method, seed, j, examples, tokenizer)
        if kind is not None and kind.rewrites_prompts
        else (prompts, cfg["llm"]["max_prompt_len"])
    )
    llm = cfg["llm"]
    with precision_scope(device, cfg["eval"]["precision"]):  # tf32: TF32 matmuls on a GPU
        predictions = generate_answers(
            model,
            tokenizer,
            shown,
            limits=dataclasses.replace(length_limits(cfg), max_prompt_len=prompt_len),
            max_new_tokens=llm["max_new_tokens"],
            batch_size=cfg["eval"]["batch_size"],
            batch_tokens=cfg["eval"]["batch_tokens"],
            decoding=llm["decoding"],
            temperature=llm["temperature"],
            seed=derive_seed(seed or 0, i, j),
            device=device,
            desc=f"A[{i},{j}] {task}",
        )
    accuracy = score_task(
        task, predictions, answers, prompts, llm["accuracy_mode"], llm["rouge_mode"], llm["similarity"]
    )
    cell_file = row0_cell_path(cfg, j) if kind is None else cell_path(cfg, method, seed, i, j)
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


def lm_cells(cfg: dict, row, device):
    """Yield the cells of ``row``; theta_i is built once for the row and kept on the device."""
    use_threads(cfg["eval"]["threads"])
    device = pick_device(device)
    theta = row_model(cfg, row, device)
    for j in row.js:
        yield evaluate_lm_cell(cfg, row, j, theta=theta, device=device)
