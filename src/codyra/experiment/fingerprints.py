"""Settings fingerprints: what determines each result, hashed by one function and compared everywhere.

The workflow puts them into rule params (a change reruns exactly the affected jobs); a
training checkpoint carries its job's, a task summary and a cell record theirs, the tables
job compares every cell's with the config, and MLflow runs are tagged with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codyra.experiment.resolve import resolve_job
from codyra.family import family_of
from codyra.store.io import fingerprint

if TYPE_CHECKING:
    from codyra.methods.base import Method

# Left out: DeepSpeed's ranks (a ZeRO-2 checkpoint resumes in a plain process and vice versa) and
# the thread counts. Threads change nothing on a GPU; on a CPU they change a reduction's order,
# so every job runs the config's counts (codyra.device.use_threads), whatever cores the scheduler
# allots; editing a count does not rerun finished jobs.
# eval.cache reads the same pixels as decoding the JPEGs (tests/data/test_eval_cache.py): no setting either.
NOT_SETTINGS = {"threads", "pretrain_threads", "deepspeed", "cache"}


def _settings(obj):
    if isinstance(obj, dict):
        return {k: _settings(v) for k, v in obj.items() if k not in NOT_SETTINGS}
    if isinstance(obj, list):
        return [_settings(v) for v in obj]
    return obj


def _model(cfg: dict) -> dict:
    """The model block; ``revision`` only where set: the weights a revision names are others (a changed
    revision reruns every result), while the main branch keeps the fingerprints from before the key."""
    return {k: v for k, v in cfg["model"].items() if k != "revision" or v is not None}


def _family(cfg: dict) -> dict:
    """Settings only one model family reads."""
    return family_of(cfg).settings(cfg)


def _data(cfg: dict, reads_reference: bool = False) -> dict:
    """The data settings; the reference data only where the method trains on it (ZSCL): evaluations
    and every other method read none, and hold it as null (the default), so a grid that adds ZSCL
    (config/mini_baselines.yaml) shares the default grid's runs and cells."""
    return {**cfg["data"], "reference": cfg["data"]["reference"] if reads_reference else None}


def _version(rule: str, kinds: list[str] | tuple[str, ...] = ()) -> str:
    # Code changes are invisible to Snakemake: the code version of the job (with that of the
    # method kinds it runs) is part of its fingerprint.
    from codyra.experiment.jobs import job_version

    return job_version(rule, kinds)


def train_fingerprint(cfg: dict, method: str, i: int, method_class: type[Method] | None = None) -> str:
    """Everything that determines task i's update given theta_{i-1}; ``method_class``: the method's
    class where the caller has resolved it (looked up here otherwise)."""
    from codyra.experiment.jobs import method_kinds, train_rule
    from codyra.experiment.pretraining import own_pretraining
    from codyra.methods import method_of

    if method_class is None:
        method_class = method_of(cfg, method)

    return fingerprint(
        _settings(
            {
                "job": resolve_job(cfg, method, i),
                "task": cfg["tasks"][i - 1],
                "model": _model(cfg),
                "data": _data(cfg, method_class.reads_reference_data),
                "mini": cfg["mini"] if own_pretraining(cfg) else None,
                "family": _family(cfg),
                "version": _version(train_rule(cfg), method_kinds(cfg, [method])),
            }
        )
    )


def eval_fingerprint(cfg: dict, j: int) -> str:
    """Everything besides the model state that determines a cell of column j."""
    union = cfg["data"]["label_space"] == "union"
    tasks = list(cfg["tasks"]) if union else cfg["tasks"][j - 1]
    return fingerprint(_settings([cfg["eval"], _data(cfg), _model(cfg), _family(cfg), tasks, _version("eval_row")]))


def heldout_fingerprint(cfg: dict) -> str:
    """Everything besides the model state that determines a row of held-out accuracies."""
    return fingerprint(_settings([cfg["eval"], _data(cfg), _model(cfg), cfg["heldout_tasks"], _version("heldout")]))


def eval_cache_fingerprint(cfg: dict, dataset: str) -> str:
    """An evaluation cache of ``dataset``'s test split: the model (its input resolution), the
    dataset's required files as they are now (a new download rebuilds it; an image edited in place
    is caught when a row opens the cache, :mod:`codyra.data.eval_cache`) and the code."""
    from pathlib import Path

    from codyra.data.presence import dataset_stamp

    kind, root = cfg["data"]["kind"], cfg["data"]["root"]
    # not data_root(cfg): a dry run without the data (check_data: false) plans the job all the same
    stamp = dataset_stamp(dataset, kind, Path(root).expanduser().absolute()) if root else None
    return fingerprint([kind, dataset, _model(cfg), stamp, _version("eval_cache")])


def pretrain_fingerprint(cfg: dict) -> str:
    """A mini benchmark's own pretraining of theta_0."""
    from codyra.experiment.jobs import pretrain_version

    return fingerprint(_settings([cfg["mini"], _model(cfg), _family(cfg), pretrain_version(cfg)]))


def untrained_settings(method_class: type[Method], spec: dict) -> list[str]:
    """What stands in for the updates in a cell of a method that never trains (``method_class`` its class,
    ``spec`` its config): its config and its code where they change what the model is shown
    (FIX(ICL)'s demonstrations), else nothing."""
    from codyra.experiment.codeversions import code_version

    if not method_class.rewrites_prompts:
        return []
    return [fingerprint([_settings(spec), code_version(methods=(spec["kind"],))])]


def cell_fingerprint(eval_settings: str, update_settings: list[str]) -> str:
    """A cell A[i,j]: its column's evaluation settings and the settings of the updates 1..i it used."""
    return fingerprint([eval_settings, update_settings])


def expected_cell_fingerprints(cfg: dict, method: str, method_class: type[Method]) -> list[list[str]]:
    """The fingerprints the cells ``A[i][j-1]`` of ``method`` (of class ``method_class``) record when
    computed from ``cfg`` as it stands."""
    n = len(cfg["tasks"])
    updates = (
        [train_fingerprint(cfg, method, k, method_class) for k in range(1, n + 1)]
        if method_class.trains
        else untrained_settings(method_class, cfg["method_configs"][method]) * n
    )
    columns = [eval_fingerprint(cfg, j) for j in range(1, n + 1)]
    return [[cell_fingerprint(column, updates[:i]) for column in columns] for i in range(n + 1)]
