"""Live tests against the local one-node SLURM cluster (``scripts/local-slurm.sh start``).

These drive a REAL slurmctld/slurmd (Debian's slurm 22.05): plain ``sbatch --wrap`` jobs, the
fake GPU GRES (``--gpus=1`` / ``--gres=gpu:1`` must get ``CUDA_VISIBLE_DEVICES``), submitit
launches (CPU and 1-GPU) and a requeue (``scontrol requeue``) that must run the job twice.

Run:   scripts/local-slurm.sh start && CODYRA_SLURM_TESTS=1 pytest -m slurm tests/slurm -v

Skipped unless ``CODYRA_SLURM_TESTS=1`` or a cluster answers ``sinfo`` (``CODYRA_SLURM_TESTS=0``
always skips). With ``CODYRA_SLURM_TESTS=1`` and no cluster the tests fail instead of skipping,
so CI cannot silently pass without SLURM. Every test waits with an explicit deadline and
cancels the jobs it submitted on teardown.

The cluster has no accounting (no slurmdbd), so job states come from ``squeue -t all``
(slurm.conf keeps finished jobs visible for ``MinJobAge=600`` s), never from ``sacct``.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from .conftest import (  # noqa: F401
    REPO,
    SCRIPT,
    TERMINAL_STATES,
    _run,
    job_info,
    job_state,
    sbatch,
    wait_for,
    wait_state,
)

pytestmark = pytest.mark.slurm


# ---------------------------------------------------------------------------------------------
# the script itself


def test_status_script_reports_usable():
    r = _run(["bash", str(SCRIPT), "status"], timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(usable)" in r.stdout


def test_generated_config_is_reproducible():
    if os.geteuid() != 0 and not os.access("/etc/slurm/slurm.conf", os.R_OK):
        pytest.skip("needs to read /etc/slurm")
    a = _run(["bash", str(SCRIPT), "config"], timeout=60).stdout
    b = _run(["bash", str(SCRIPT), "config"], timeout=60).stdout
    assert a == b
    for needle in (
        "MinJobAge=600",
        "AuthInfo=cred_expire=10",
        "sched_interval=5",
        "NodeName=localhost NodeAddr=127.0.0.1",
        "PartitionName=debug Nodes=localhost Default=YES",
        "PartitionName=gpu ",
        "PartitionName=cpu ",
        "AutoDetect=off",
        "SlurmdParameters=config_overrides",
    ):
        assert needle in a, needle
    # the node is declared as a GPU node of a real cluster (profiles/slurm's requests fit it), never
    # smaller than this machine
    node = re.search(r"^NodeName=localhost .*$", a, re.MULTILINE).group(0)
    cpus, memory = (int(re.search(rf"\b{key}=(\d+)", node).group(1)) for key in ("CPUs", "RealMemory"))
    assert cpus == max(64, os.cpu_count()) and memory >= 1024000 and "Gres=gpu:h100:8" in node
    # the running cluster uses exactly this config
    installed = Path("/etc/slurm/slurm.conf").read_text()
    assert installed in a


# ---------------------------------------------------------------------------------------------
# sbatch


def test_sbatch_wrap_completes(tmp_path, jobs):
    out = tmp_path / "out.txt"
    job_id = sbatch(
        jobs,
        "-p", "debug", "-t", "2", "-J", "codyra-test-wrap", "--chdir", str(tmp_path), "-o", str(out),
        "--wrap", 'echo "hello from $SLURM_JOB_ID on $SLURM_JOB_PARTITION"',
    )  # fmt: skip
    seconds = wait_state(job_id, "COMPLETED", timeout=60, output=out)
    wait_for(out.exists, 10, f"{out} to appear")
    assert out.read_text().strip() == f"hello from {job_id} on debug"
    print(f"job {job_id}: submit -> COMPLETED in {seconds:.2f} s")


@pytest.mark.parametrize("request_args", [["--gpus=1"], ["--gres=gpu:1"]], ids=["gpus", "gres"])
def test_gpu_job_gets_cuda_visible_devices(tmp_path, jobs, request_args):
    out = tmp_path / "out.txt"
    job_id = sbatch(
        jobs,
        "-p", "gpu", *request_args, "-t", "2", "-J", "codyra-test-gpu", "--chdir", str(tmp_path),
        "-o", str(out), "--wrap", 'echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"',
    )  # fmt: skip
    wait_state(job_id, "COMPLETED", timeout=60, output=out)
    wait_for(out.exists, 10, f"{out} to appear")
    text = out.read_text().strip()
    assert re.fullmatch(r"CUDA_VISIBLE_DEVICES=\d+", text), text


# ---------------------------------------------------------------------------------------------
# submitit


def _submitit_result(job, jobs: list[str], timeout: float):
    jobs.append(str(job.job_id))
    wait_for(
        job.done,
        timeout,
        f"submitit job {job.job_id}",
        interval=0.5,
        on_fail=lambda: job_info(str(job.job_id)) + "\n--- stderr ---\n" + (job.stderr() or ""),
    )
    return job.result()


def test_submitit_function_returns_value(tmp_path, jobs):
    submitit = pytest.importorskip("submitit")
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
    executor.update_parameters(
        slurm_partition="debug", timeout_min=5, cpus_per_task=1, mem_gb=1, name="codyra-test-submitit"
    )

    def add(a, b):  # nested: cloudpickle ships it by value (the test module is not importable there)
        import os

        return {"sum": a + b, "job_id": os.environ.get("SLURM_JOB_ID")}

    job = executor.submit(add, 20, 22)
    result = _submitit_result(job, jobs, timeout=120)
    assert result == {"sum": 42, "job_id": str(job.job_id)}


def test_submitit_gpu_job(tmp_path, jobs):
    submitit = pytest.importorskip("submitit")
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
    executor.update_parameters(
        slurm_partition="gpu",
        gpus_per_node=1,
        timeout_min=5,
        cpus_per_task=1,
        mem_gb=1,
        name="codyra-test-submitit-gpu",
    )

    def visible_gpus():
        import os

        return os.environ.get("CUDA_VISIBLE_DEVICES")

    job = executor.submit(visible_gpus)
    cvd = _submitit_result(job, jobs, timeout=120)
    assert cvd is not None and re.fullmatch(r"\d+", cvd), cvd


# ---------------------------------------------------------------------------------------------
# requeue


@pytest.mark.slow
def test_scontrol_requeue_runs_job_twice(tmp_path, jobs):
    """A requeued job starts again from scratch (the fast-requeue settings make this ~10-30 s)."""
    counter = tmp_path / "counter"
    out = tmp_path / "out.txt"
    script = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {counter}; "
        f'echo "run $n restart_count=${{SLURM_RESTART_COUNT:-0}}"; sleep 600'
    )
    job_id = sbatch(
        jobs,
        "-p", "debug", "-t", "15", "--requeue", "--open-mode=append", "-J", "codyra-test-requeue",
        "--chdir", str(tmp_path), "-o", str(out), "--wrap", script,
    )  # fmt: skip

    def counter_is(n: int):
        return lambda: counter.exists() and counter.read_text().strip() == str(n) and job_state(job_id) == "RUNNING"

    def details() -> str:
        return job_info(job_id) + (f"\n--- {out} ---\n{out.read_text()}" if out.exists() else "")

    wait_for(counter_is(1), 60, "first run to start", on_fail=details)
    t0 = time.monotonic()
    _run(["scontrol", "requeue", job_id])
    wait_for(counter_is(2), 180, "requeued job to run a second time", interval=0.5, on_fail=details)
    print(f"job {job_id}: requeue -> running again in {time.monotonic() - t0:.1f} s")
    assert re.search(r"\bRestarts=1\b", job_info(job_id)), job_info(job_id)
    text = out.read_text()
    runs = [line for line in text.splitlines() if line.startswith("run ")]
    assert runs == ["run 1 restart_count=0", "run 2 restart_count=1"], text
    assert "DUE TO JOB REQUEUE" in text, text
