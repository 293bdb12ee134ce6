"""Result paths (docs/getting-started.md, "What a grid computes"), in one place for the library and the workflow."""

from __future__ import annotations

import os
from pathlib import Path

from codyra.errors import ConfigError

PRETRAINED = "pretrained"  # the shared row 0: results/{benchmark}/pretrained/cells/A_0_{j}.json
FEWSHOT = "fewshot"  # few-shot manifests: results/{benchmark}/fewshot/[seed{seed}/]{dataset}.json
PRETRAIN = "pretrain"  # the mini benchmark's theta_0
RESERVED_NAMES = {PRETRAINED, FEWSHOT, PRETRAIN, "data"}  # folders beside the method folders
FEWSHOT_MANIFEST = "{results}/{benchmark}/" + FEWSHOT + "/{dataset}.json"
FEWSHOT_SEED_MANIFEST = "{results}/{benchmark}/" + FEWSHOT + "/seed{seed}/{dataset}.json"  # data.fewshot_seed: per_seed
RUN_DIR = "{results}/{benchmark}/{method}/seed{seed}"
# files of a task folder ({RUN_DIR}/task{i}/) and of a run folder ({RUN_DIR}/)
UPDATE_FILE = "update.safetensors"
METHOD_STATE_FILE = "method_state.safetensors"  # a method's tensors kept for the next task and evaluation
SUMMARY_FILE = "summary.json"  # written last: its presence means the task is done
HISTORY_FILE = "history.jsonl"  # per-step training metrics, one JSON object per line
TIME = "_time"  # a history record's (a metrics row's) measurement time, seconds since the epoch
MATRIX_FILE = "matrix.json"
HEATMAP_FILE = "A_heatmap.png"
CELL = RUN_DIR + "/cells/A_{i}_{j}.json"
# a row's finished cells kept outside its job's outputs until the row is whole (codyra.evaluation.evaluate),
# beside the cells folder (of a run, or the shared pretrained row's); {key}: the row's settings and updates
PARTIAL_ROW = "partial/row{i}/{key}"
ROW0_CELL = "{results}/{benchmark}/" + PRETRAINED + "/cells/A_0_{j}.json"
TABLES_DIR = "{results}/tables/{benchmark}"
FIGURES_DIR = "{results}/figures/{benchmark}"
LOGS_DIR = "{results}/logs/{benchmark}"  # every job's log, <stage>/<method>/seed<seed>[/<name>].log
FAILED_JOBS_DIR = LOGS_DIR + "/failed-jobs"  # failure records of submitted jobs whose retry would fail again
# held-out accuracy of theta_i (config key heldout_tasks); i = 0 is shared like row 0
HELDOUT = RUN_DIR + "/heldout/H_{i}_{name}.json"
ROW0_HELDOUT = "{results}/{benchmark}/" + PRETRAINED + "/heldout/H_0_{name}.json"
# forward probes of a run's final model (interpolation, module removal): codyra.analysis.probes
PROBE = RUN_DIR + "/probes/{probe}.json"
# the gradient-conflict probe at theta_0, shared by the benchmark's methods
GRAD_CONFLICT = "{results}/{benchmark}/" + PRETRAINED + "/grad_conflict.json"
# a test set decoded once for evaluation (codyra.data.eval_cache): shared by every benchmark of a results folder
# ({model}: the model name, "/" as "--"; the cache holds the images at its input resolution)
EVAL_CACHE = "{results}/eval_cache/{protocol}/{model}/{dataset}"
EVAL_CACHE_IMAGES = "images.npy"  # uint8 [N, 3, S, S]
EVAL_CACHE_MANIFEST = "manifest.json"  # written last: its presence means the cache is complete
MINI_DATA = "{results}/{benchmark}/data"
MINI_PRETRAINED = "{results}/{benchmark}/pretrain/model.safetensors"
# sha256 of theta_0's weights files: written by the mini's pretraining, else at their first use (codyra.store.theta0)
WEIGHTS_DIGEST = "{results}/{benchmark}/pretrain/weights-digest.json"


def results_path(cfg: dict, template: str, **fields) -> Path:
    """``template`` filled in for ``cfg``, checked to stay inside its results folder.

    Names that become path components are validated by the config schema; this is the last
    line: nothing is written outside ``results``. The check is lexical (``..`` resolved, links
    not followed), so a results subfolder may be a symlink to scratch space.
    """
    path = Path(template.format(results=cfg["results"], benchmark=cfg["benchmark"], **fields))
    root = os.path.abspath(cfg["results"])
    if os.path.commonpath([root, os.path.abspath(path)]) != root:
        raise ConfigError(
            f"result path {path} leaves the results folder {root}; "
            "a benchmark, method or task name must not contain '..' or '/'"
        )
    return path


def eval_cache_dir(cfg: dict, dataset: str) -> Path | None:
    """Where the evaluation cache of ``dataset``'s test split for the config's model lives (shared
    by every benchmark of the results folder); None when config key eval.cache is off."""
    if not cfg["eval"]["cache"]:
        return None
    model = cfg["model"]["name"].replace("/", "--")  # a hub id's owner/name, as Hugging Face's cache writes it
    protocol = cfg["data"]["kind"]
    if cfg["data"]["sun397_order"] != "sorted":  # another SUN397 test split: caches of their own
        protocol = f"{protocol}-sun397-{cfg['data']['sun397_order']}"
    return results_path(cfg, EVAL_CACHE, protocol=protocol, model=model, dataset=dataset)


def run_dir(cfg: dict, method: str, seed: int) -> Path:
    return results_path(cfg, RUN_DIR, method=method, seed=seed)


def task_dir(cfg: dict, method: str, seed: int, i: int) -> Path:
    return run_dir(cfg, method, seed) / f"task{i}"


def cell_path(cfg: dict, method: str, seed: int, i: int, j: int) -> Path:
    return run_dir(cfg, method, seed) / "cells" / f"A_{i}_{j}.json"


def row0_cell_path(cfg: dict, j: int) -> Path:
    return results_path(cfg, ROW0_CELL, j=j)


def heldout_path(cfg: dict, method: str, seed: int, i: int, name: str) -> Path:
    return results_path(cfg, HELDOUT, method=method, seed=seed, i=i, name=name)


def row0_heldout_path(cfg: dict, name: str) -> Path:
    return results_path(cfg, ROW0_HELDOUT, name=name)


def probe_path(cfg: dict, method: str, seed: int, probe: str) -> Path:
    return results_path(cfg, PROBE, method=method, seed=seed, probe=probe)


def mini_data_dir(cfg: dict) -> Path:
    return results_path(cfg, MINI_DATA)


def tables_dir(cfg: dict) -> Path:
    return results_path(cfg, TABLES_DIR)


def figures_dir(cfg: dict) -> Path:
    return results_path(cfg, FIGURES_DIR)
