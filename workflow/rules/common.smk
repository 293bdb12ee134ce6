# Configuration, paths and the helpers every rule uses.
from codyra.benchmarks import own_pretraining
from codyra.config import ConfigError, config_from_files, fingerprint, load_config, resolve_job
from codyra.data.presence import require_benchmark_data
from codyra.fingerprints import eval_fingerprint, pretrain_fingerprint, train_fingerprint, untrained_settings
from codyra.jobs import job_version, train_rule
from codyra.methods import method_class
from codyra.paths import CELL, ROW0_CELL, RUN_DIR, TABLES_DIR


def _raw_config():
    # A --configfile replaces the default config/config.yaml instead of being deep-merged
    # into it (a merge would leak the mini benchmark's keys into a paper benchmark). The
    # files are read again by codyra: Snakemake's loader knows nothing of `extends`.
    settings = workflow.config_settings
    return config_from_files(settings.configfiles or workflow.configfiles, settings.config)


try:
    CFG = load_config(_raw_config())  # schema + semantic checks, before any job runs
except ConfigError as err:
    raise WorkflowError(f"configuration error (nothing was run):\n{err}")
if CFG["check_data"]:  # cheap presence checks: a missing dataset fails here, not when its jobs start
    try:
        require_benchmark_data(CFG)
    except (ConfigError, FileNotFoundError) as err:
        raise WorkflowError(f"{err}\n(nothing was run; for a dry run without the data: --config check_data=False)")

RESULTS, BENCHMARK = CFG["results"], CFG["benchmark"]
N = len(CFG["tasks"])
TASKS = range(1, N + 1)
LOGS = f"{RESULTS}/logs/{BENCHMARK}"
# Path patterns with {method}, {seed}, {i}, {j} left as Snakemake wildcards.
_fixed = dict(results=RESULTS, benchmark=BENCHMARK)
RUN = RUN_DIR.format(**_fixed, method="{method}", seed="{seed}")
CELL_PATTERN = CELL.format(**_fixed, method="{method}", seed="{seed}", i="{i}", j="{j}")
ROW0_PATTERN = ROW0_CELL.format(**_fixed, j="{j}")
TABLES = TABLES_DIR.format(**_fixed)
PRETRAINED_WEIGHTS = own_pretraining(CFG)  # the mini benchmarks pretrain their own theta_0
TRACKING = CFG["tracking"]["enabled"]
# On a cluster, training task i of a run and evaluating row i share one job (see eval.smk).
TASK_GROUP = "task-{method}-seed{seed}-{i}"
MLFLOW_MARKER = f"{RESULTS}/{BENCHMARK}/mlflow.ready.json"


wildcard_constraints:
    method="|".join(CFG["methods"]),
    seed=r"\d+",
    i=r"\d+",
    j=r"\d+",


def codyra_cli(log_path, *argv, threads=None):
    """Run one codyra command with this workflow's validated config, its log and (compute commands) the job's threads."""
    from codyra.cli import run

    run([*map(str, argv), "--log", str(log_path), *(["--threads", str(threads)] if threads else [])], config=CFG)


def trains(method):
    return method_class(CFG["method_configs"][method]["kind"]).trains


def copies_row0(method):
    return method_class(CFG["method_configs"][method]["kind"]).copies_row0()


def run_path(method, seed, *parts):
    return "/".join([RUN.format(method=method, seed=seed), *map(str, parts)])


def common_inputs():
    """Inputs every model job needs: theta_0 (mini) and, ancient so it never triggers reruns, the MLflow store."""
    inputs = {}
    if PRETRAINED_WEIGHTS:
        inputs["pretrained"] = PRETRAINED_WEIGHTS
    if TRACKING:
        inputs["mlflow"] = ancient(MLFLOW_MARKER)
    return inputs
