"""The training job of task i (``codyra train``, the workflow's training rules): what the loop
(:mod:`codyra.training.loop`) is handed and what it is spared.

The job resolves the settings of (method, task) from the config, the task folder and this job's
checkpoint folder, the settings fingerprint, the stored updates it starts from, and the MLflow
run that mirrors it; then the family may run it elsewhere (the LM family re-executes it under
torchrun for DeepSpeed), a closed-form method fits it in one pass, and every other trained method
goes through the loop.
"""

from __future__ import annotations

import time
from pathlib import Path

from codyra.device import use_threads
from codyra.experiment.fingerprints import train_fingerprint
from codyra.experiment.resolve import resolve_job
from codyra.family import family_of
from codyra.methods import method_of
from codyra.store.checkpoints import checkpoint_dir
from codyra.store.io import fingerprint, read_json, require_writable
from codyra.store.model_states import require_updates
from codyra.store.paths import SUMMARY_FILE, task_dir
from codyra.store.updates import placement, previous_digests, stored_state, stored_update
from codyra.tracking.mirror import SETTINGS, JobRun, train_final_metrics, train_run
from codyra.training.loop import TrainedTask, TrainingTask, finish_task, fit, fit_closed_form


def train_task(cfg: dict, method_name: str, seed: int, task_index: int, *, device=None, on_step=None) -> TrainedTask:
    """Train and merge one task; write ``update.safetensors`` + ``summary.json`` (+ MLflow mirror).

    ``on_step(step)`` is called after every optimizer step (tests use it to simulate a kill).
    """
    method_class = method_of(cfg, method_name)  # the job's one lookup of its method
    task = training_task(cfg, method_name, seed, task_index, method_class)
    require_writable(task.out)
    use_threads(task.job["train"]["threads"])
    method = method_class(task.job["method"])
    if method.trains:
        require_updates(cfg, method_name, seed, task_index - 1)
    run = JobRun(cfg, **train_run(cfg, method_name, seed, task_index), params=task.job, system_metrics=True)
    try:
        if not method.trains:
            update, summary = method.finish(None)
            trained = TrainedTask(finish_task(task, update, summary, [], time.time()), None)
        else:
            delegated = family_of(cfg).delegate(cfg, method_name, seed, task_index, run)
            if delegated is not None:
                trained = TrainedTask(delegated, None)
            elif method.closed_form:
                trained = TrainedTask(fit_closed_form(task, method, device), None)
            else:
                trained = fit(task, method, run, device, on_step)
    except BaseException:
        run.fail()
        raise
    run.finish(train_final_metrics(trained.summary), tags={SETTINGS: trained.summary["settings"]})
    return trained


def training_task(cfg: dict, method_name: str, seed: int, task_index: int, method_class=None) -> TrainingTask:
    """Task i of (method, seed) as the loop gets it: settings, folders and stored updates resolved
    (``method_class``: the method's class where the caller has resolved it)."""
    settings = train_fingerprint(cfg, method_name, task_index, method_class)
    return TrainingTask(
        cfg=cfg,
        method_name=method_name,
        seed=seed,
        task_index=task_index,
        job=resolve_job(cfg, method_name, task_index),
        settings=settings,
        out=task_dir(cfg, method_name, seed, task_index),
        checkpoints=task_checkpoint_dir(cfg, method_name, seed, task_index, settings),
        placement=placement(cfg, method_name, seed, task_index),
        stored_state=lambda k: stored_state(cfg, method_name, seed, k),
        stored_update=lambda k: stored_update(cfg, method_name, seed, k),
        run_summary=lambda other: run_summary(cfg, other, seed, task_index),
    )


def run_summary(cfg: dict, method_name: str, seed: int, task_index: int) -> dict:
    """Another method's stored summary of the same task and seed (e.g. a norm-matched target)."""
    path = task_dir(cfg, method_name, seed, task_index) / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: train that task first (snakemake {path})")
    return read_json(path)


def task_checkpoint_dir(cfg: dict, method_name: str, seed: int, task_index: int, settings: str | None = None) -> Path:
    """This job's checkpoint folder: keyed by its settings (``train_fingerprint``, computed here
    where the caller has not) and the updates 1..i-1 it starts from."""
    if settings is None:
        settings = train_fingerprint(cfg, method_name, task_index)
    key = fingerprint([settings, previous_digests(cfg, method_name, seed, task_index)])
    return checkpoint_dir(task_dir(cfg, method_name, seed, task_index), key)
