# Configuration, paths and the helpers every rule uses.
from codyra.experiment.pretraining import own_pretraining
from codyra.experiment.config import ConfigError, config_from_files, load_config, resolve_job
from codyra.store.io import fingerprint
from codyra.data.presence import require_benchmark_data
from codyra.experiment.fingerprints import eval_fingerprint, pretrain_fingerprint, train_fingerprint, untrained_settings
from codyra.experiment.jobs import RUN_GROUP, eval_rule, job_group, job_version, train_rule
from codyra.methods import method_of
from codyra.store.paths import CELL, ROW0_CELL, RUN_DIR, TABLES_DIR

# One gpu_slot per group job, so its GPU members run in series on one member's resources; here, not
# in a profile, as a submitted job reads none (docs/architecture-snakemake.md, "Group jobs").
workflow.global_resources.setdefault("gpu_slot", 1)


resource_scopes:
    gpu_slot="local",


if workflow.remote_exec:  # a submitted job: its group's `run:` members run as threads, as local runs do
    from codyra.experiment.snakemake_compat import run_group_members_as_threads

    run_group_members_as_threads()


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
config.update(CFG)  # report captions read snakemake.config: give them the validated values, defaults filled in
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
JOB_GROUP = job_group(CFG)  # one SLURM job per CLIP run, per LM task (codyra.experiment.jobs.job_group)
MLFLOW_MARKER = f"{RESULTS}/{BENCHMARK}/mlflow.ready.json"


wildcard_constraints:
    method="|".join(CFG["methods"]),
    seed=r"\d+",
    i=r"\d+",
    j=r"\d+",


def codyra_cli(log_path, *argv, threads=None, cfg=None):
    """Run one codyra command with this workflow's validated config (or ``cfg``, a single-task
    study's, single_task.smk), its log and (compute commands) the job's threads."""
    from codyra.cli import run

    argv = [*map(str, argv), "--log", str(log_path), *(["--threads", str(threads)] if threads else [])]
    run(argv, config=CFG if cfg is None else cfg)


def trains(method):
    return method_of(CFG, method).trains


def copies_row0(method):
    return method_of(CFG, method).copies_row0()


def run_path(method, seed, *parts):
    return "/".join([RUN.format(method=method, seed=seed), *map(str, parts)])


def run_updates(method, seed, upto=N):
    """The stored files theta_upto of a run is rebuilt from: its tasks' updates and summaries."""
    return [run_path(method, seed, f"task{k}", f) for k in range(1, int(upto) + 1) for f in ("summary.json", "update.safetensors")]


def common_inputs():
    """Inputs every model job needs: theta_0 (mini) and, ancient so it never triggers reruns, the MLflow store."""
    inputs = {}
    if PRETRAINED_WEIGHTS:
        inputs["pretrained"] = PRETRAINED_WEIGHTS
    if TRACKING:
        inputs["mlflow"] = ancient(MLFLOW_MARKER)
    return inputs
