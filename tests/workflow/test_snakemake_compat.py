"""codyra's one patch of Snakemake's internals (codyra.experiment.snakemake_compat) against the
installed Snakemake: what it patches is still there, still needed, and does what it claims. A
failure here means Snakemake changed under the patch: re-read the code it names before widening
TESTED_SNAKEMAKE or removing the patch."""

from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from types import SimpleNamespace

import pytest
import snakemake
from snakemake.executors import local
from snakemake_executor_plugin_slurm_jobstep import Executor as JobstepExecutor
from snakemake_interface_executor_plugins.utils import TargetSpec

from codyra.experiment.snakemake_compat import THREADS, import_libraries, patch_problem, run_group_members_as_threads
from codyra.family import family_of


@pytest.fixture
def executor_class(monkeypatch):
    """snakemake's local Executor, restored after the test whatever the test patched."""
    monkeypatch.setattr(local.Executor, "use_threads", None, raising=False)
    monkeypatch.delattr(local.Executor, "use_threads")
    return local.Executor


def workflow(use_threads: bool) -> SimpleNamespace:
    """What an executor reads of the workflow when it is built and formats a job's command line."""
    return SimpleNamespace(
        dag=SimpleNamespace(get_unneeded_temp_files=lambda job: []),
        executor_settings=None,
        main_snakefile="workflow/Snakefile",
        execution_settings=SimpleNamespace(use_threads=use_threads, keep_incomplete=False),
        resource_settings=SimpleNamespace(cores=2),
    )


def submitted_function(executor) -> object:
    """The function run_single_job hands to the executor's pool for a `run:` job."""
    submitted = []
    executor.pool = SimpleNamespace(submit=lambda *args: submitted.append(args))
    executor.job_args_and_prepare = lambda job: ()
    executor.run_single_job(SimpleNamespace(is_shadow=False, is_run=True, is_template_engine=False))
    [(_, _, function, *_)] = submitted
    return function


def job_args(is_group: bool) -> str:
    """The Snakemake arguments the SLURM job step gives the Snakemake it starts for a job."""
    executor = JobstepExecutor(workflow(use_threads=False), SimpleNamespace(debug=lambda message: None))
    job = SimpleNamespace(
        get_target_spec=lambda: [TargetSpec("train_task", {"method": "codyra", "seed": "0", "i": "1"})],
        rules=["train_task"],
        is_updated=False,
        is_group=lambda: is_group,
        jobid="4c1f",
        attempt=1,
    )
    return executor.get_job_args(job)


def test_the_installed_snakemake_is_one_the_patch_was_checked_against(executor_class):
    assert patch_problem() is None


def test_a_group_job_is_not_told_to_use_threads_so_the_patch_is_still_needed():
    assert "--force-use-threads" in job_args(is_group=False).split()
    assert "--force-use-threads" not in job_args(is_group=True).split(), (
        "Snakemake now runs a group job's members as threads by itself: remove codyra.experiment.snakemake_compat"
    )


def test_without_the_patch_a_run_job_is_spawned_and_with_it_runs_in_a_thread(executor_class):
    plain = executor_class(workflow(use_threads=False), None)
    assert plain.use_threads is False
    assert submitted_function(plain) == plain.spawn_job

    run_group_members_as_threads()
    patched = executor_class(workflow(use_threads=False), None)
    assert executor_class.use_threads is THREADS
    assert patched.use_threads is True
    assert submitted_function(patched) is local.run_wrapper


def test_applying_the_patch_twice_changes_nothing(executor_class):
    run_group_members_as_threads()
    run_group_members_as_threads()
    assert executor_class.use_threads is THREADS
    assert patch_problem() is None


def test_outside_the_tested_versions_the_patch_is_left_out_with_a_warning(executor_class, monkeypatch):
    monkeypatch.setattr(snakemake, "__version__", "9.28.0")
    outside = r"snakemake 9\.28\.0 is outside .*\(>=9\.19, <9\.28\).*widen TESTED_SNAKEMAKE.*separate processes"
    with pytest.warns(UserWarning, match=outside):
        run_group_members_as_threads()
    assert "use_threads" not in vars(executor_class)


def test_an_executor_that_defines_use_threads_itself_is_left_alone(executor_class, monkeypatch):
    own = property(lambda executor: False)
    monkeypatch.setattr(executor_class, "use_threads", own, raising=False)
    with pytest.warns(UserWarning, match="now defines use_threads itself"):
        run_group_members_as_threads()
    assert vars(executor_class)["use_threads"] is own


@pytest.mark.parametrize("family", ["clip", "causal_lm", "blip"])
def test_each_family_names_libraries_that_exist(family):
    for name in family_of(family).libraries:
        assert importlib.util.find_spec(name) is not None, name


def test_jobs_running_as_threads_import_the_libraries_one_thread_at_a_time(monkeypatch):
    """Two threads importing torchvision at once deadlock on its circular imports; the lock
    must let only one thread import at a time, and each thread finds every library imported."""
    active, most, imported = [0], [0], []
    counting = threading.Lock()

    def slow_import(name):
        with counting:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.02)  # long enough for the other threads to arrive while this one imports
        imported.append(name)
        with counting:
            active[0] -= 1

    monkeypatch.setattr(importlib, "import_module", slow_import)
    threads = [threading.Thread(target=import_libraries, args=({"model": {"family": "clip"}},)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
    assert imported == ["torchvision", "open_clip"] * 4


def test_a_library_that_is_not_installed_is_left_to_the_job(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "open_clip" else real_find_spec(name))
    imported = []
    monkeypatch.setattr(importlib, "import_module", imported.append)
    import_libraries({"model": {"family": "clip"}})
    assert imported == ["torchvision"]
