# Configuration, paths and every helper function the rules use (the rule files hold rules only).
import functools

from codyra.cli import DEFAULT_CONFIG
from codyra.experiment.pretraining import own_pretraining
from codyra.experiment.config import ConfigError, config_from_files, load_config
from codyra.experiment.resolve import resolve_job
from codyra.store.io import fingerprint
from codyra.data.presence import require_benchmark_data
from codyra.experiment.weights import require_weights
from codyra.hub import offline_by_default
from codyra.evaluation.caching import cached_datasets
from codyra.experiment.fingerprints import eval_cache_fingerprint, eval_fingerprint, pretrain_fingerprint, train_fingerprint, untrained_settings
from codyra.experiment.jobs import RUN_GROUP, eval_rule, job_group, job_version, row_group, train_rule
from codyra.experiment.costs import DEFAULT_RECORD
from codyra.experiment.resources import ProfileResources, job_threads, refuse_unfit
from codyra.analysis.probe_files import probe_names
from codyra.analysis.registry import outputs
from codyra.evaluation.table_formats import TABLE_FORMATS
from codyra.methods import method_classes, reference_readers
from codyra.methods.lora import norm_references
from codyra.store.paths import CELL, EVAL_CACHE_IMAGES, EVAL_CACHE_MANIFEST, FAILED_JOBS_DIR, FIGURES_DIR, HELDOUT, LOGS_DIR, PROBE, ROW0_CELL, ROW0_HELDOUT, RUN_DIR, TABLES_DIR, eval_cache_dir

# One gpu_slot per group job, so its GPU members run in series on one member's resources; here, not
# in a profile, as a submitted job reads none (docs/architecture-snakemake.md, "Group jobs").
workflow.global_resources.setdefault("gpu_slot", 1)


resource_scopes:
    gpu_slot="local",


if workflow.remote_exec:  # a submitted job: its group's `run:` members run as threads, as local runs do
    from codyra.experiment.snakemake_compat import run_group_members_as_threads
    from codyra.tracking.mirror import mark_submitted_job

    run_group_members_as_threads()
    mark_submitted_job()  # MLflow: a tracking server only, never the local store (codyra.tracking.mirror)


if workflow.is_main_process:  # a copied project whose environment still imports the original's code
    from codyra.experiment.snakemake_compat import foreign_code
    from snakemake.logging import logger

    if foreign := foreign_code(workflow.basedir):
        logger.warning(foreign)


def _raw_config():
    # A --configfile replaces the default config/config.yaml instead of being deep-merged
    # into it (a merge would leak the mini benchmark's keys into a paper benchmark), so the
    # Snakefile declares no `configfile:` (Snakemake would merge into it, and say so). The
    # files are read by codyra: Snakemake's loader knows nothing of `extends`. A file written
    # as if it were merged is refused with how to extend instead (config.overlay_advice).
    settings = workflow.config_settings
    return config_from_files(settings.configfiles or [DEFAULT_CONFIG], settings.config)


try:
    CFG = load_config(_raw_config())  # schema + semantic checks, before any job runs
except ConfigError as err:
    raise WorkflowError(f"configuration error (nothing was run):\n{err}")
config.update(CFG)  # report captions read snakemake.config: give them the validated values, defaults filled in
CLASSES = method_classes(CFG, CFG["methods"])  # the grid's methods, each looked up once where the DAG is built
if workflow.remote_exec:  # a submitted job: compute nodes read the weights cache, never wait on the network
    offline_by_default()
# Presence checks (stat calls, a cache look-up) where the grid is planned, not again in every submitted job:
# a missing dataset or theta_0 fails here, not when its jobs start.
if CFG["check_data"] and not workflow.remote_exec:
    try:
        require_benchmark_data(CFG, reference_readers(CFG))  # ZSCL's reference data only where a method reads it
        require_weights(CFG)  # in the weights cache; the error names the fetch-weights command
    except (ConfigError, FileNotFoundError) as err:
        raise WorkflowError(
            f"{err}\n(nothing was run; for a dry run without the data or weights: --config check_data=False)"
        )
# What the profile requests per rule, as Snakemake parsed it. A grid submitted to a cluster (--jobs, as a
# cluster profile sets it; dry runs too) is held against it here, before any job is submitted: each job's
# estimated memory, GPU memory and runtime (codyra.experiment.resources; `codyra check-resources` prints them).
REQUESTS = ProfileResources.from_settings(workflow.resource_settings)
if workflow.is_main_process and workflow.resource_settings.nodes is not None:
    try:
        refuse_unfit(CFG, REQUESTS, f"{workflow.basedir}/../{DEFAULT_RECORD}")
    except ConfigError as err:
        raise WorkflowError(f"{err}\n(nothing was submitted)")

RESULTS, BENCHMARK = CFG["results"], CFG["benchmark"]
N = len(CFG["tasks"])
TASK_NAMES = list(CFG["tasks"])
TASKS = range(1, N + 1)
# Path patterns with {method}, {seed}, {i}, {j} left as Snakemake wildcards.
_fixed = dict(results=RESULTS, benchmark=BENCHMARK)
RUN = RUN_DIR.format(**_fixed, method="{method}", seed="{seed}")
CELL_PATTERN = CELL.format(**_fixed, method="{method}", seed="{seed}", i="{i}", j="{j}")
ROW0_FILES = [ROW0_CELL.format(**_fixed, j=j) for j in TASKS]
TABLES = TABLES_DIR.format(**_fixed)
FIGURES = FIGURES_DIR.format(**_fixed)
LOGS = LOGS_DIR.format(**_fixed)
PRETRAINED_WEIGHTS = own_pretraining(CFG)  # the mini benchmarks pretrain their own theta_0
TRACKING = CFG["tracking"]["enabled"]
JOB_GROUP = job_group(CFG)  # one SLURM job per CLIP run, per LM task (codyra.experiment.jobs.job_group)
ROW_GROUP = row_group(CFG)  # a CLIP row in its run's job; an LM row in a 1-GPU job of its own
MLFLOW_MARKER = f"{RESULTS}/{BENCHMARK}/mlflow.ready.json"
FAILED_JOBS = FAILED_JOBS_DIR.format(**_fixed)  # failure records of submitted jobs whose retry would fail again
CACHED = cached_datasets(CFG)  # datasets whose test sets rows read from an evaluation cache (eval.smk)


wildcard_constraints:
    method="|".join(CFG["methods"]),
    seed=r"\d+",
    i=r"\d+",
    j=r"\d+",


def codyra_cli(log_path, *argv, cfg=None):
    """Run one codyra command with this workflow's validated config (or ``cfg``, a single-task
    study's, single_task.smk) and its log. The command runs on the config's thread counts, not
    the scheduler's allotment: on a CPU the thread count changes the numbers, and `--cores`
    below a rule's threads must not (the rule's `threads:` only sizes the scheduling)."""
    from codyra.cli import run
    from codyra.experiment.retries import record_path, run_member
    from codyra.experiment.snakemake_compat import import_libraries

    cfg = CFG if cfg is None else cfg

    def command():
        import_libraries(cfg)  # jobs are threads of this process: their first imports one at a time
        run([*map(str, argv), "--log", str(log_path)], config=cfg)

    if not workflow.remote_exec:
        return command()
    # a submitted job: a retry of one whose failure repeats stops here, before loading anything
    record = record_path(FAILED_JOBS, [(t.rulename, t.wildcards_dict) for t in workflow.dag_settings.target_jobs])
    run_member(record, workflow.attempt, log_path, command)


def run_started():
    """The start of a run (``onstart``, workflow/Snakefile): what a run on a cluster needs settled
    before its first job is submitted. Earlier runs' failure records go (a new run tries every job)."""
    from codyra.experiment.retries import forget_failures
    from codyra.experiment.snakemake_compat import refuse_untested_cluster_run
    from codyra.tracking.mirror import is_remote, tracking_uri

    if workflow.remote_exec:  # a submitted job's Snakemake (its command line has --no-hooks): the run started before
        return
    refuse_untested_cluster_run(workflow.local_exec)
    forget_failures(FAILED_JOBS)
    if TRACKING and not workflow.local_exec and not is_remote(tracking_uri(CFG)):
        print(
            f"MLflow: jobs on the cluster do not write the local store {tracking_uri(CFG)}; this Snakemake process "
            "fills it from the result files as each run finishes (summarize_run, tables). For live curves, point "
            "tracking.uri or MLFLOW_TRACKING_URI at a tracking server (docs/mlflow.md)"
        )


def trains(method):
    return CLASSES[method].trains


def copies_row0(method):
    return CLASSES[method].copies_row0()


def run_path(method, seed, *parts):
    return "/".join([RUN.format(method=method, seed=seed), *map(str, parts)])


def theta_inputs(method, seed, i=N):
    """The inputs of a job that rebuilds theta_i of a run from its updates 1..i: task i's summary
    and update. Task k's training takes task k-1's as inputs, so a changed earlier update reruns
    the run's tasks up to i, and this job with them; listing only task i's keeps the DAG's edges
    linear in the grid (Snakemake matches every input file against the rules' outputs)."""
    return [run_path(method, seed, f"task{i}", f) for f in ("summary.json", "update.safetensors")] if int(i) > 0 else []


def common_inputs():
    """Inputs every model job needs: theta_0 (mini) and, ancient so it never triggers reruns, the MLflow store."""
    inputs = {}
    if PRETRAINED_WEIGHTS:
        inputs["pretrained"] = PRETRAINED_WEIGHTS
    if TRACKING:
        inputs["mlflow"] = ancient(MLFLOW_MARKER)
    return inputs


def cache_files(datasets):
    """The evaluation caches (codyra.data.eval_cache) a job evaluating on ``datasets`` reads: their
    manifests, written after the images and holding a CRC-32 per image, so a rebuilt cache with
    other images changes its manifest."""
    return [cache_manifest(d) for d in datasets if d in CACHED]


@functools.cache  # read by every row's input function
def cache_manifest(dataset):
    return f"{eval_cache_dir(CFG, dataset)}/{EVAL_CACHE_MANIFEST}"


def cache_inputs(datasets):
    return {"eval_caches": cache_files(datasets)} if CACHED else {}


# --- training (train.smk)


def train_inputs(w):
    inputs = common_inputs()
    i = int(w.i)
    # the norm-matched probe's target is the median ||dW||_F of these methods' updates of task i
    references = norm_references(resolve_job(CFG, w.method, i)["method"])
    if references:
        inputs["norm_references"] = [run_path(m, w.seed, f"task{i}", "summary.json") for m in references]
    inputs["previous"] = theta_inputs(w.method, w.seed, i - 1)  # training starts from theta_{i-1}
    return inputs


# --- rows of cells (eval.smk)


@functools.cache  # the same for every row of the workflow: computed once, not once per job
def eval_settings():
    # The row's cells: one fingerprint for the row, of its columns' (codyra.experiment.fingerprints)
    return fingerprint([eval_fingerprint(CFG, j) for j in TASKS])


def row_inputs(w):
    inputs = {**common_inputs(), **cache_inputs(TASK_NAMES)}
    if trains(w.method):  # theta_i's updates too: a changed one must rerun the row
        inputs["updates"] = theta_inputs(w.method, w.seed, w.i)
    return inputs


# --- per-run results, tables and figures in the report (tables.smk, analysis.smk)
# The report shows a benchmark's results in reading order. Snakemake's report sorts a category's
# subcategories by name and the results inside one by their labels' values (the first label first,
# as text): the paper's tables come first, then the figures comparing methods, the analyses and a
# subcategory per method (its heatmap and A table, the mean over seeds, then each seed's matrix).
# A table or figure carries its place in its one label: a second label with two values, one result
# each, would become the report's toggle between the two.
REPORT_TABLES, REPORT_FIGURES, REPORT_ANALYSES = "1. tables", "2. comparison figures", "3. analyses"


def run_result(path, caption, kind):
    return report(path, caption=caption, category=BENCHMARK, subcategory="{method}", labels={"result": kind, "seed": "{seed}"})


def table_result(name, ext, place):
    """A table's file; the HTML one in the report, the ``place``-th of the paper's tables (a method's A table: in its subcategory)."""
    path = f"{TABLES}/{name}.{ext}"
    if ext != "html":  # the report shows each table once, rendered; the other formats sit next to it
        return path
    if name.startswith("A_"):
        method = name.removeprefix("A_")
        return report(path, caption="../report/tables/A_method.rst", category=BENCHMARK, subcategory=method, labels={"result": "A table", "seed": "mean"})
    return report(path, caption=f"../report/tables/{name}.rst", category=BENCHMARK, subcategory=REPORT_TABLES, labels={"table": f"{place}. {name}"})


def heatmap_result(method, name):
    path = f"{FIGURES}/{name}.png"
    return report(path, caption="../report/heatmap.rst", category=BENCHMARK, subcategory=method, labels={"result": "A heatmap", "seed": "mean"})


def comparison_result(name, place):
    path = f"{FIGURES}/{name}.png"
    return report(path, caption=f"../report/{name}.rst", category=BENCHMARK, subcategory=REPORT_FIGURES, labels={"figure": f"{place}. {name}"})


# --- analyses (analysis.smk)


def analysis_files(name, method=None):
    """The tables (4 formats; HTML shown in the report) and figures (PNG shown, PDF beside) of an analysis."""
    tables, figures = outputs(CFG, name, method)
    caption = f"../report/analysis_{name}.rst"
    files = [f"{TABLES}/{t}.{ext}" for t in tables for ext in TABLE_FORMATS if ext != "html"]
    files += [report(f"{TABLES}/{t}.html", caption=caption, category=BENCHMARK, subcategory=REPORT_ANALYSES, labels={"analysis": name, "result": t}) for t in tables]
    files += [report(f"{FIGURES}/{f}.png", caption=caption, category=BENCHMARK, subcategory=REPORT_ANALYSES, labels={"analysis": name, "result": f}) for f in figures]
    return files + [f"{FIGURES}/{f}.pdf" for f in figures]


def update_files(methods):
    """The inputs of a job that reads every update of the methods' runs (theta_inputs of theta_N)."""
    return [f for m in methods for s in CFG["seeds"] for f in theta_inputs(m, s)]


def say_skipped(log_path, analysis, why):
    """An analysis that does not apply to this config: why, on the terminal and in its log."""
    message = f"analysis {analysis} skipped for {BENCHMARK}: {why}"
    print(message)
    with open(log_path, "w") as out:
        print(message, file=out)


# --- single-task studies (single_task.smk: SINGLE, SINGLE_RUN, REFERENCES, PROBED)


def single_files(target, method, seed):
    """The files a single-task run leaves: its cells and held-out files (and its probes, if it is probed)."""
    cfg = SINGLE[target]
    run = SINGLE_RUN.format(target=target, method=method, seed=seed)
    files = [f"{run}/cells/A_{i}_1.json" for i in (0, 1)]
    files += [HELDOUT.format(**_single, method=method, seed=seed, i=i, name=h).format(target=target) for i in (0, 1) for h in REFERENCES]
    if method in PROBED[target]:
        files += [PROBE.format(**_single, method=method, seed=seed, probe=p).format(target=target) for p in probe_names(cfg)]
    return files


def single_update(w):
    return [f"{SINGLE_RUN}/task1/{f}".format(target=w.target, method=w.method, seed=w.seed) for f in ("summary.json", "update.safetensors")]


def single_row0(w):
    return [ROW0_CELL.format(**_single, j=1).format(target=w.target)] + [
        ROW0_HELDOUT.format(**_single, name=h).format(target=w.target) for h in REFERENCES
    ]


def single_train_inputs(w):
    inputs = common_inputs()
    # the norm-matched probe's target: the median ||dW||_F of these runs' updates of the same task
    references = norm_references(resolve_job(SINGLE[w.target], w.method, 1)["method"])
    if references:
        inputs["norm_references"] = [f"{SINGLE_RUN}/task1/summary.json".format(target=w.target, method=m, seed=w.seed) for m in references]
    return inputs
