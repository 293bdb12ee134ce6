# Configuration, paths and the helpers every rule uses.
from codyra.experiment.pretraining import own_pretraining
from codyra.experiment.config import ConfigError, config_from_files, load_config, resolve_job
from codyra.store.io import fingerprint
from codyra.data.presence import require_benchmark_data
from codyra.experiment.fingerprints import eval_fingerprint, pretrain_fingerprint, train_fingerprint, untrained_settings
from codyra.experiment.jobs import RUN_GROUP, eval_rule, job_group, job_version, train_rule
from codyra.methods import method_class
from codyra.store.paths import CELL, ROW0_CELL, RUN_DIR, TABLES_DIR

# Group jobs on a cluster (JOB_GROUP below). Snakemake sizes a group by layers: members that could
# run side by side (row i beside task i+1) share a layer and their resources add up, unless a
# constraint splits the layer; layers run in series, so the group requests the max over layers
# and the sum of their runtimes. The profiles give each member that uses the job's GPUs one
# gpu_slot, and a job has one: its members then run one after another and it requests one
# member's GPUs, CPUs and memory. Declared here, not in a profile, because the processes inside
# a submitted job (which size the srun step and run the members) read no profile and get no
# --resources. Scope local: the limit holds per job, never across jobs. Local runs are
# unaffected: no rule carries gpu_slot without a cluster profile.
workflow.global_resources.setdefault("gpu_slot", 1)


resource_scopes:
    gpu_slot="local",


if workflow.remote_exec:
    # In a submitted job, run the `run:` jobs as threads of its Snakemake process, as local runs
    # do (profiles/default). Snakemake does so for a single-job submission (--force-use-threads)
    # but has no option for a group job: it would spawn one process per member, re-parsing the
    # workflow and re-importing torch (~5 s of CPU each, 22 members in an MTIL run's job).
    from snakemake.executors.local import Executor as _LocalExecutor

    _LocalExecutor.use_threads = property(lambda self: True, lambda self, value: None)


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
