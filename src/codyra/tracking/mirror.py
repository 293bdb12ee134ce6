"""MLflow mirror of the result files (the files are the source of truth).

Layout: one experiment per benchmark (``codyra/<benchmark>``); a parent run per
(method, seed) (``codyra s0``) plus one for the shared pretrained row; child runs per training task
(``codyra s0 task02-shape``) and per evaluated row of the accuracy matrix (``codyra s0 row02``, its
cells are the row's metrics ``Accuracy/<j>_<task>``); a summary run per method (mean and std over its
seeds, ``codyra.tracking.sync``); a run of the tables. Per-task names carry the task's zero-padded
index (``task_labels``): alphabetical order is stream order. Every
run carries the tag ``codyra.key`` (e.g. ``row/mini/codyra/seed0/A_2``)
that identifies it, ``codyra.complete = true`` once everything it mirrors is logged, and
``codyra.settings``, the settings fingerprint its result files record. ``sync`` uses the
key to fill in what live logging missed without ever duplicating a run, and replaces a
run whose settings are not those of the file (a rerun after a config change).
Every job attempt starts a new run for its key (a resumed training run first logs the
checkpoint's history, so the curve is whole). Artifacts go to the experiment's artifact
location: ``results/mlartifacts`` for a local store (at a location relative to that folder, so
the results folder can be copied or moved: ``codyra.tracking.artifacts``), the server's
``--artifacts-destination`` for a tracking server.

For browsing: every experiment is of the model-training kind, carries a description and saved
views of the runs table (``codyra.tracking.views``), every run of a method has the method's colour,
and runs are tagged kind / benchmark / method / seed (the UI's filters and "Group by"). An
experiment written with other names (an earlier ``LAYOUT``) is set aside under another name, never
mixed with this layout's runs (``Store._experiment``).

Live logging is best-effort: a job first probes the store (an HTTP server must answer
``/health`` within seconds); if the store is down, or any call fails later, the job carries on
without MLflow and says so in its log and on the terminal, naming the store and
``codyra sync-mlflow``, which fills in what is missing from the result files.

A job submitted to a cluster (``mark_submitted_job``: the workflow's job processes on the nodes)
logs live to a tracking server only, never to a local store: a SQLite file in the results folder
sits on the shared filesystem, where up to a hundred jobs writing at once can lock it or corrupt
it. Its runs are made from its result files by the Snakemake process, whose local jobs
(``summarize_run`` per finished run, ``tables``) sync them.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

from codyra.progress import job_stream
from codyra.store.paths import PRETRAINED, TIME

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # no store-migration chatter in job output
# Fail fast on an unreachable server instead of retrying with backoff for minutes.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")

log = logging.getLogger(__name__)
KEY, COMPLETE, SETTINGS = "codyra.key", "codyra.complete", "codyra.settings"
# the experiment's layout of runs and names: an experiment of another layout is set aside, not mixed
# (2: per-task names with the task's index, run names with method and seed, summary runs)
LAYOUT, LAYOUT_VERSION = "codyra.layout", "2"
# MLflow's experiment tag for the experiment's kind (its UI opens a model-training experiment in
# the training runs view) and its run tag for a run's colour in the runs table and charts
EXPERIMENT_KIND, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"
RUN_COLOR = "mlflow.runColor"
# one colour per method, in the grid's order: matplotlib's tab20 without its greys (grey: the pretrained row)
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#aec7e8",
    "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
)  # fmt: skip
PRETRAINED_COLOR = "#7f7f7f"
METRIC_FLUSH_SECONDS = 10.0
# set in the processes of jobs submitted to a cluster (and inherited by what they start): no local store there
SUBMITTED_JOB = "CODYRA_SUBMITTED_JOB"


def tracking_uri(cfg: dict) -> str:
    uri = cfg["tracking"]["uri"] or os.environ.get("MLFLOW_TRACKING_URI")
    return uri or f"sqlite:///{Path(cfg['results']).absolute() / 'mlflow.db'}"


def artifact_root(cfg: dict) -> Path:
    """Where a local store's artifacts are: in the results folder, wherever it is."""
    return Path(cfg["results"]).absolute() / "mlartifacts"


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def method_color(cfg: dict, method: str) -> str:
    """The method's colour: by its place in the grid (methods outside it after, by name)."""
    if method == PRETRAINED:
        return PRETRAINED_COLOR
    names = [*cfg["methods"], *sorted(set(cfg["method_configs"]) - set(cfg["methods"]))]
    return PALETTE[names.index(method) % len(PALETTE)] if method in names else PRETRAINED_COLOR


def experiment_name(cfg: dict) -> str:
    return f"codyra/{cfg['benchmark']}"


def task_labels(tasks: list[str]) -> list[str]:
    """Each task as a metric or run name holds it: its index in the stream, zero-padded to the
    stream's length, then its name (``03_position``), so alphabetical order is stream order."""
    width = index_width(len(tasks))
    return [f"{j:0{width}d}_{task}" for j, task in enumerate(tasks, start=1)]


def index_width(n: int) -> int:
    """Digits of a task or row index in names, for a stream of ``n`` tasks (at least two)."""
    return max(2, len(str(n)))


def config_task_labels(cfg: dict) -> list[str]:
    return task_labels(list(cfg["tasks"]))


def run_name(method: str, seed: int | None) -> str:
    """The name that starts every run of a (method, seed): ``codyra s0`` (the shared pretrained row: ``pretrained``)."""
    return method if seed is None else f"{method} s{seed}"


# The names of the runs that are no method's: they sort apart from every method's (which start with a
# letter or a digit)
PRETRAINED_RUN, TABLES_RUN = "(benchmark) pretrained", "(benchmark) tables"


def parent_name(method: str, seed: int | None) -> str:
    return PRETRAINED_RUN if method == PRETRAINED else run_name(method, seed)


def run_key(cfg: dict, method: str, seed: int | None) -> str:
    return f"run/{cfg['benchmark']}/{method}" + ("" if seed is None else f"/seed{seed}")


def train_key(cfg: dict, method: str, seed: int, i: int) -> str:
    return f"train/{cfg['benchmark']}/{method}/seed{seed}/task{i}"


def row_key(cfg: dict, method: str, seed: int | None, i: int) -> str:
    return f"row/{cfg['benchmark']}/{method}" + ("" if seed is None else f"/seed{seed}") + f"/A_{i}"


PACKAGES = ("torch", "open_clip_torch", "transformers", "peft", "deepspeed", "mlflow", "snakemake", "numpy")


@functools.lru_cache(maxsize=1)
def provenance() -> dict:
    """Tags every run carries: the code (codyra version, git commit) and the key package versions."""
    from codyra import __version__
    from codyra.checkout import git_commit

    tags = {"codyra.version": __version__, "codyra.git_commit": git_commit() or "unknown"}
    for name in PACKAGES:
        try:
            tags[f"version.{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return tags


def parent_params(cfg: dict, method: str) -> dict:
    """A method's hyperparameters as resolved for the whole run (per-task layers are on the training runs)."""
    base = cfg["method_configs"][method]
    return {
        "method": {k: v for k, v in base.items() if k != "train"},
        "train": {**cfg["train"], **base.get("train", {})},
    }


def store_answers(uri: str) -> bool:
    """Cheap reachability probe (no MLflow retries): an HTTP server's /health, or a local store's folder."""
    if is_remote(uri):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=3) as response:
                return response.status == 200
        except OSError:
            return False
    if uri.startswith("sqlite:///"):  # a local file: its folder is all it needs
        folder = Path(uri.removeprefix("sqlite:///")).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return True
    return True


class Store:
    """An MLflow experiment of one benchmark, addressed by ``codyra.key`` tags."""

    def __init__(self, cfg: dict):
        from codyra.extras import require_extra

        require_extra("mlflow", "workflow", "MLflow tracking (config key tracking.enabled)")
        from mlflow import MlflowClient

        from codyra.tracking.artifacts import ResultsClient

        self.cfg, self.uri = cfg, tracking_uri(cfg)
        self.client = MlflowClient(self.uri) if is_remote(self.uri) else ResultsClient(self.uri, artifact_root(cfg))
        self.experiment_id = self._experiment()

    def _experiment(self) -> str:
        from mlflow.exceptions import MlflowException

        from codyra.tracking.artifacts import proxied_location

        name = experiment_name(self.cfg)
        found = self.client.get_experiment_by_name(name)
        if found is not None and found.tags.get(LAYOUT) != LAYOUT_VERSION:
            found = self._set_aside(found)
        if found is not None:
            return found.experiment_id
        # a server stores artifacts where its --artifacts-destination says (None: its default location)
        artifacts = None if is_remote(self.uri) else proxied_location(self.cfg["benchmark"])
        tags = {"codyra.benchmark": self.cfg["benchmark"], EXPERIMENT_KIND: MODEL_TRAINING, LAYOUT: LAYOUT_VERSION}
        try:
            experiment_id = self.client.create_experiment(name, artifact_location=artifacts, tags=tags)
        except MlflowException:  # created concurrently by another job
            return self.client.get_experiment_by_name(name).experiment_id
        self.describe(experiment_id)
        return experiment_id

    def _set_aside(self, found):
        """An experiment of another layout: renamed ``<name> (layout <n>)`` if it holds runs (its names
        are not this layout's; a new experiment is filled from the result files), else adopted (None:
        set aside, create the new one)."""
        from mlflow.exceptions import MlflowException

        if not self.client.search_runs([found.experiment_id], max_results=1):
            self.client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
            self.client.set_experiment_tag(found.experiment_id, LAYOUT, LAYOUT_VERSION)
            self.describe(found.experiment_id)
            return found
        aside = f"{found.name} (layout {found.tags.get(LAYOUT, '1')})"
        try:
            self.client.rename_experiment(found.experiment_id, aside)
        except MlflowException:  # another process set it aside first
            return self.client.get_experiment_by_name(found.name)
        log.warning(
            "MLflow: experiment %s was written with the names of an earlier layout; it is kept as %r and a new "
            "%s is filled from the result files (`codyra sync-mlflow --config <config>`, or the tables job)",
            found.name,
            aside,
            found.name,
        )
        return None

    def describe(self, experiment_id: str) -> None:
        """The experiment's description and saved views (``codyra.tracking.views``), as this code writes them."""
        from codyra.tracking.views import NOTE, experiment_note, view_tags

        for key, value in {NOTE: experiment_note(self.cfg, experiment_id), **view_tags(self.cfg)}.items():
            self.client.set_experiment_tag(experiment_id, key, value)

    def runs_by_key(self, prefix: str = "") -> dict:
        """Active runs whose key starts with ``prefix`` (one search, paged)."""
        runs, token = {}, None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=f"tags.`{KEY}` LIKE '{prefix}%'", max_results=5000, page_token=token
            )
            runs.update({r.data.tags[KEY]: r for r in page})
            token = page.token
            if not token:
                return runs

    def find(self, key: str):
        found = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{KEY}` = '{key}'", order_by=["attributes.start_time ASC"]
        )
        for duplicate in found[1:]:  # two jobs raced to create the same run: keep the first
            self.client.delete_run(duplicate.info.run_id)
        return found[0] if found else None

    def ensure_parent(self, method: str, seed: int | None, start_time: int | None = None):
        """The (method, seed) parent, created by the first job of its work (so its start time is
        that work's start; ``start_time`` in ms: when sync rebuilds it from files)."""
        key = run_key(self.cfg, method, seed)
        run = self.find(key)
        if run is None:
            tags = {
                KEY: key,
                "kind": "pretrained" if method == PRETRAINED else "run",
                "benchmark": self.cfg["benchmark"],
                "method": method,
                "seed": "" if seed is None else str(seed),
                RUN_COLOR: method_color(self.cfg, method),
                **provenance(),
            }
            created = self.client.create_run(
                self.experiment_id, start_time=start_time, tags=tags, run_name=parent_name(method, seed)
            )
            run = self.find(key)  # two jobs may have raced to create it: both go on with the survivor
            if run.info.run_id == created.info.run_id and method in self.cfg["method_configs"]:
                self.log_params(run.info.run_id, parent_params(self.cfg, method))
        return run.info.run_id

    def benchmark_run(self) -> str:
        """The one run of the benchmark itself: the tables attach here (once, not to every parent)."""
        key = f"tables/{self.cfg['benchmark']}"
        run = self.find(key)
        if run is None:
            tags = {KEY: key, "benchmark": self.cfg["benchmark"], "kind": "tables", **provenance()}
            run = self.client.create_run(self.experiment_id, tags=tags, run_name=TABLES_RUN)
            run = self.find(key)
        return run.info.run_id

    def end_parent(self, run_id: str) -> None:
        """Finish a parent at the end of its last child, so its duration is that of its own work."""
        last = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'",
            order_by=["attributes.end_time DESC"],
            max_results=1,
        )
        end = last[0].info.end_time if last and last[0].info.end_time else None
        self.client.set_terminated(run_id, "FINISHED", end_time=end)

    def open_child(self, key: str, parent: str, name: str, tags: dict) -> str:
        """A new run for ``key``, replacing any earlier attempt's (whose result files this job replaces)."""
        while (old := self.find(key)) is not None:
            self.client.delete_run(old.info.run_id)
        all_tags = {
            KEY: key,
            COMPLETE: "false",
            "mlflow.parentRunId": parent,
            **provenance(),
            **{k: str(v) for k, v in tags.items()},
        }
        run_id = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name).info.run_id
        self.find(key)
        return run_id

    def complete(self, run_id: str, status: str = "FINISHED", end_time: int | None = None) -> None:
        self.client.set_tag(run_id, COMPLETE, "true")
        self.client.set_terminated(run_id, status, end_time=end_time)

    def log_metrics(self, run_id: str, rows: list[dict], step_key: str = "step") -> None:
        """Rows of metrics at their ``step``; a row's ``_time`` (seconds) is when it was measured (default: now)."""
        from mlflow.entities import Metric

        now = time.time()
        metrics = [
            Metric(name, float(value), int(row.get(TIME, now) * 1000), int(row.get(step_key, 0)))
            for row in rows
            for name, value in row.items()
            if name not in (step_key, TIME) and isinstance(value, (int, float)) and value is not None
        ]
        for start in range(0, len(metrics), 1000):  # MLflow's per-request limit
            self.client.log_batch(run_id, metrics=metrics[start : start + 1000])

    def log_params(self, run_id: str, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])


def flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def mark_submitted_job() -> None:
    """Declare this process (and those it starts) a job submitted to a cluster: it logs live to a
    tracking server only, a local store is filled from its result files by the workflow."""
    os.environ[SUBMITTED_JOB] = "1"


def local_store_refused(uri: str) -> bool:
    """Whether this process must not write the store ``uri``: a local one, from a job on a cluster node."""
    return not is_remote(uri) and os.environ.get(SUBMITTED_JOB) == "1"


def _warn(uri: str, problem: str) -> None:
    """A tracking failure, in the job's log and on the terminal: never silent, never fatal."""
    message = (
        f"MLflow store {uri}: {problem}; this job's results are in its result files, from which "
        "`codyra sync-mlflow --config <config>` fills MLflow in later (the tables job does at the end of the grid)"
    )
    log.warning(message)
    if job_stream() is not sys.stderr:  # a job with its own log file: the terminal sees it too
        print(f"WARNING: {message}", file=sys.stderr, flush=True)


def _store_if_answering(cfg: dict) -> bool:
    if not cfg["tracking"]["enabled"]:
        return False
    uri = tracking_uri(cfg)
    if local_store_refused(uri):
        log.info(
            "MLflow: this job on a cluster node does not write the local store %s (one file on the shared "
            "filesystem for every job); the workflow's summarize and tables jobs fill it from the result files. "
            "Live logging from the nodes needs a tracking server (docs/mlflow.md)",
            uri,
        )
        return False
    if store_answers(uri):
        return True
    _warn(uri, "the store does not answer")
    return False


def with_store(cfg: dict, action) -> bool:
    """Best-effort ``action(store)``; False (with a warning) if tracking is off or failing."""
    if not _store_if_answering(cfg):
        return False
    try:
        action(Store(cfg))
    except Exception as err:  # noqa: BLE001 (tracking must never fail a job)
        _warn(tracking_uri(cfg), f"logging stopped ({type(err).__name__}: {err})")
        return False
    return True


class JobRun:
    """Best-effort live logging of one job; every method is a no-op once tracking is off."""

    def __init__(
        self,
        cfg: dict,
        key: str,
        parent: tuple[str, int | None],
        name: str,
        tags: dict,
        params: dict | None = None,
        system_metrics: bool = False,
    ):
        self.store = self.run_id = self.monitor = None
        self.uri = tracking_uri(cfg)
        self.pending: list[dict] = []
        self.last_step = 0  # final metrics go at the last step, not at step 0 before the curves
        self.flushed = time.monotonic()
        if not _store_if_answering(cfg):
            return
        self._guard(lambda: self._open(cfg, key, parent, name, tags, params, system_metrics))

    def _open(self, cfg, key, parent, name, tags, params, system_metrics):
        self.store = Store(cfg)
        parent_id = self.store.ensure_parent(*parent)
        self.run_id = self.store.open_child(key, parent_id, name, tags)
        if params:
            self.store.log_params(self.run_id, params)
        if system_metrics:  # CPU, memory, GPU utilisation sampled by MLflow in a background thread
            from mlflow.system_metrics.system_metrics_monitor import (
                SystemMetricsMonitor,
            )

            self.monitor = SystemMetricsMonitor(self.run_id, sampling_interval=5, tracking_uri=self.store.uri)
            self.monitor.start()

    def _guard(self, call) -> None:
        try:
            call()
        except Exception as err:  # noqa: BLE001 (tracking must never fail a job)
            _warn(self.uri, f"logging stopped ({type(err).__name__}: {err})")
            self.store = self.run_id = None

    @property
    def active(self) -> bool:
        return self.run_id is not None

    def metrics(self, row: dict) -> None:
        """Queue a metrics row (with its ``step``); sent in batches every few seconds."""
        if self.active:
            self.pending.append({TIME: time.time(), **row})
            self.last_step = max(self.last_step, int(row.get("step", 0)))
            if time.monotonic() - self.flushed > METRIC_FLUSH_SECONDS:
                self.flush()

    def flush(self) -> None:
        if self.active and self.pending:
            rows, self.pending = self.pending, []
            self._guard(lambda: self.store.log_metrics(self.run_id, rows))
        self.flushed = time.monotonic()

    def _stop_monitor(self) -> None:
        if self.monitor is not None:
            monitor, self.monitor = self.monitor, None
            self._guard(monitor.finish)

    def finish(self, final: dict | None = None, artifacts: list[Path] = (), tags: dict | None = None) -> None:
        self.flush()
        self._stop_monitor()
        if self.active:
            self._guard(lambda: self._finish(final, artifacts, tags or {}))

    def _finish(self, final, artifacts, tags):
        for name, value in tags.items():
            self.store.client.set_tag(self.run_id, name, str(value))
        if final:
            self.store.log_metrics(self.run_id, [{"step": self.last_step, **final}])
        for path in artifacts:
            self.store.client.log_artifact(self.run_id, str(path))
        self.store.complete(self.run_id)

    def fail(self) -> None:
        self.flush()
        self._stop_monitor()
        if self.active:
            self._guard(lambda: self.store.client.set_terminated(self.run_id, "FAILED"))


# What a training task and a cell look like in MLflow: shared by live logging and sync.
SUMMARY_METRICS = (
    "seconds",
    "final_loss",
    "trainable_params",
    "stored_params",
    "active_rank_total",
    "active_rank_mean",
    "dW_fro_total",
)


def train_run(cfg: dict, method: str, seed: int, i: int) -> dict:
    task = cfg["tasks"][i - 1]
    return {
        "key": train_key(cfg, method, seed, i),
        "parent": (method, seed),
        "name": f"{run_name(method, seed)} task{i:0{index_width(len(cfg['tasks']))}d}-{task}",
        "tags": {
            "kind": "train",
            "benchmark": cfg["benchmark"],
            "method": method,
            "seed": seed,
            "task": task,
            "i": i,
            RUN_COLOR: method_color(cfg, method),
        },
    }


def train_final_metrics(summary: dict) -> dict:
    return {k: summary[k] for k in SUMMARY_METRICS if isinstance(summary.get(k), (int, float))}


def row_run(cfg: dict, method: str, seed: int | None, i: int) -> dict:
    return {
        "key": row_key(cfg, method, seed, i),
        "parent": (method, seed),
        "name": f"{run_name(method, seed)} row{i:0{index_width(len(cfg['tasks']))}d}",
        "tags": {
            "kind": "row",
            "benchmark": cfg["benchmark"],
            "method": method,
            "seed": "" if seed is None else seed,
            "i": i,
            RUN_COLOR: method_color(cfg, method),
        },
    }


DECIMALS = 2  # metrics in % points: 21.85, not 21.849999999999998 (the result files keep every digit)


def rounded(value: float) -> float:
    return round(float(value), DECIMALS)


def cell_metric(cfg: dict, cell: dict) -> dict:
    """A cell A[i, j] as a metric of row i's run: ``Accuracy/<j>_<task>``, its accuracy (one column per
    task j across the rows' runs: the runs table of a run's rows is its matrix)."""
    return {f"Accuracy/{config_task_labels(cfg)[cell['j'] - 1]}": rounded(cell["accuracy"])}


def cell_seconds(cell: dict) -> float:
    """The time a cell's job took: a copied cell (row 0 of a run, a method that never trains) none."""
    return 0.0 if "copied_from" in cell else float(cell.get("seconds", 0.0))


def row_seconds(cells: list[dict]) -> dict:
    return {"seconds": rounded(sum(cell_seconds(cell) for cell in cells))}


def row_metrics(cfg: dict, cells: list[dict]) -> dict:
    """A row's metrics: its cells and the seconds they took."""
    return {name: value for cell in cells for name, value in cell_metric(cfg, cell).items()} | row_seconds(cells)


def row_settings(cells: list[dict]) -> str:
    """The settings of a row's run: those of its cells (a row with other cells or settings is another run)."""
    from codyra.store.io import fingerprint

    return fingerprint({str(cell["j"]): cell.get("settings") for cell in cells})
