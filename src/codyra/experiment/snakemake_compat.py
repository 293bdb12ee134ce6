"""Jobs as threads of the Snakemake process: the one place codyra relies on a private part of
Snakemake (a submitted group job runs its ``run:`` members as threads), and the one thing those
threads must not do at once (import the deep-learning libraries for the first time).

Local runs execute ``run:`` jobs as threads (``force-use-threads`` in profiles/default): a job
then costs milliseconds of start-up instead of a new Python process that re-parses the workflow
and re-imports torch (~5 s of CPU). Inside a SLURM job Snakemake does the same for a job
submitted alone (the submitting executor adds ``--force-use-threads`` to its command line), but
not for a group job, and nothing a user sets reaches that command line: the executor writes it
(``RealExecutor.get_job_args`` in snakemake-interface-executor-plugins), the submitted Snakemake
reads no profile, and neither SLURM plugin has a setting for it. A group job would spawn one
process per member: 22 in an MTIL run's job.

So the submitted job's own Snakemake is patched: its local executor's ``use_threads``, which
``Executor.__post_init__`` copies from the execution settings and ``run_single_job`` reads to
choose between a thread and a spawned process, is made always true. The patch applies only to
the Snakemake versions it was checked against (``TESTED_SNAKEMAKE``) and only while the executor
class does not define ``use_threads`` itself. A run that submits jobs to a cluster with any other
Snakemake is refused when it starts (``refuse_untested_cluster_run``, before any job is submitted):
each job would run its members as separate processes, one start and import of torch each, slower
than the grid's runtimes were sized for. Local runs use no group jobs and are not concerned.
tests/workflow/test_snakemake_compat.py fails when any of this stops holding.

Two threads importing torchvision for the first time at once deadlock on its circular imports
(torchvision.ops and torchvision.models import each other): Python raises _DeadlockError in one
thread and a "partially initialized module" ImportError in the other. So every job first imports
its family's libraries under one lock (``import_libraries``, called by ``codyra_cli`` in
workflow/rules/common.smk); once imported, a module is a lookup in sys.modules. The workflow
alone imports this module, so it is in no job's code version (codyra.experiment.codeversions:
a module that imports by name would make its importers depend on all of codyra).

A checkout's workflow runs the codyra its environment imports: after a project is copied or
moved, that is the original's (``foreign_code``: the workflow warns, ``make env`` creates the
environment anew).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import threading
import warnings
from pathlib import Path

import snakemake
from snakemake.executors.local import Executor

TESTED_SNAKEMAKE = ((9, 19), (9, 28))  # (major, minor) [from, below): the executor code read and tested
# always true when read; the assignment in Executor.__post_init__ is ignored
THREADS = property(lambda executor: True, lambda executor, value: None, doc="run jobs as threads (codyra's patch)")


def patch_problem() -> str | None:
    """Why the installed Snakemake cannot take the patch, or None when it can (or already has it)."""
    version = snakemake.__version__
    (low, high), major_minor = TESTED_SNAKEMAKE, tuple(int(n) for n in re.findall(r"\d+", version)[:2])
    if not low <= major_minor < high:
        return (
            f"snakemake {version} is outside the versions the group-job thread patch was checked against "
            f"(>={low[0]}.{low[1]}, <{high[0]}.{high[1]}): read snakemake/executors/local.py "
            "(Executor.__post_init__, run_single_job), then widen TESTED_SNAKEMAKE (codyra.experiment.snakemake_compat)"
        )
    own = vars(Executor).get("use_threads", THREADS)
    if own is not THREADS:
        return f"snakemake's local Executor now defines use_threads itself ({own!r}): the patch would replace it"
    return None


def refuse_untested_cluster_run(local: bool) -> None:
    """At the start of a run (``onstart``): refuse to submit jobs to a cluster (``local`` false)
    with a Snakemake the patch was not checked against, naming the versions and the fix."""
    problem = patch_problem()
    if problem and not local:
        from snakemake.exceptions import WorkflowError

        low, high = TESTED_SNAKEMAKE
        raise WorkflowError(
            f"{problem}. Nothing was submitted: install the tested Snakemake (the environment.yml of this "
            f"checkout, or pip install -c constraints.txt 'snakemake>={low[0]}.{low[1]},<{high[0]}.{high[1]}'), "
            "or run locally"
        )


def run_group_members_as_threads() -> None:
    """In a submitted job: run the ``run:`` members of its group job as threads, as local runs do."""
    problem = patch_problem()
    if problem:
        warnings.warn(f"{problem}; the group's members run as separate processes", stacklevel=2)
        return
    Executor.use_threads = THREADS


_LIBRARY_IMPORTS = threading.Lock()


def import_libraries(cfg: dict) -> None:
    """Import the third-party libraries of ``cfg``'s model family, one thread at a time. A library
    not installed is left to the job, whose own import names the extra that brings it."""
    from codyra.family import family_of

    with _LIBRARY_IMPORTS:
        for name in family_of(cfg).libraries:
            if importlib.util.find_spec(name.partition(".")[0]) is not None:
                importlib.import_module(name)


def foreign_code(workflow_dir: str | Path) -> str | None:
    """Why the workflow in ``workflow_dir`` runs another checkout's codyra, or None: its checkout
    has a source tree (``src/codyra``) and the imported package is not it."""
    import codyra

    own = (Path(workflow_dir).parent / "src" / "codyra").resolve()
    imported = Path(codyra.__file__).resolve().parent
    if not own.is_dir() or imported == own:
        return None
    return (
        f"this checkout's workflow runs codyra from {imported}, not from its own {own}: the environment "
        "is another checkout's (a copied or moved project), so edits here do not run; `make env` in "
        "this checkout creates its own .venv (then use that one)"
    )
