"""Shared helpers of the SLURM tests: the live-cluster gate, job bookkeeping and waiting.

Skipped unless ``CODYRA_SLURM_TESTS=1`` or a cluster answers ``sinfo`` (``CODYRA_SLURM_TESTS=0``
always skips). With ``CODYRA_SLURM_TESTS=1`` and no cluster the tests fail instead of skipping,
so CI cannot silently pass without SLURM.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ..conftest import LOCAL_CONTROLLER_DOWN

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "local-slurm.sh"

TERMINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


def _run(cmd: list[str], timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check)


def _cluster_answers() -> tuple[bool, str]:
    if shutil.which("sinfo") is None:
        return False, "sinfo not found (slurm-client not installed)"
    if LOCAL_CONTROLLER_DOWN:  # known without sinfo's retries
        return False, "slurmctld is not running on this machine"
    try:
        r = _run(["sinfo", "-h", "-o", "%P %a %T"], timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return False, "sinfo did not answer within 20 s (slurmctld down?)"
    if r.returncode != 0:
        return False, f"sinfo failed: {r.stderr.strip() or r.stdout.strip()}"
    if not r.stdout.strip():
        return False, "sinfo shows no partitions"
    return True, r.stdout.strip()


_ENV = os.environ.get("CODYRA_SLURM_TESTS", "")
_SKIP_HINT = "start it with: scripts/local-slurm.sh start (then CODYRA_SLURM_TESTS=1 to require it)"


@pytest.fixture(scope="module", autouse=True)
def cluster() -> str:
    """Skip (or, with CODYRA_SLURM_TESTS=1, fail) unless the local cluster answers sinfo."""
    if _ENV == "0":
        pytest.skip("CODYRA_SLURM_TESTS=0: SLURM tests disabled")
    ok, detail = _cluster_answers()
    if not ok:
        if _ENV == "1":
            pytest.fail(f"CODYRA_SLURM_TESTS=1 but no SLURM cluster answers: {detail}; {_SKIP_HINT}")
        pytest.skip(f"no local SLURM cluster: {detail}; {_SKIP_HINT}")
    return detail


@pytest.fixture
def jobs():
    """Job ids a test submitted; all are cancelled on teardown (finished ones are a no-op)."""
    ids: list[str] = []
    yield ids
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30, check=False)


def sbatch(jobs: list[str], *args: str) -> str:
    r = _run(["sbatch", "--parsable", *args])
    job_id = r.stdout.strip().split(";")[0]
    assert job_id.isdigit(), f"unexpected sbatch output: {r.stdout!r} {r.stderr!r}"
    jobs.append(job_id)
    return job_id


def job_state(job_id: str) -> str:
    r = _run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"], check=False)
    state = r.stdout.strip().splitlines()
    return state[0].strip() if state else "UNKNOWN"


def job_info(job_id: str) -> str:
    r = _run(["scontrol", "show", "job", job_id], check=False)
    return r.stdout + r.stderr


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2, on_fail=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{on_fail()}")
        time.sleep(interval)


def wait_state(job_id: str, want: str, timeout: float, output: Path | None = None) -> float:
    """Wait until squeue shows `want`; fail early on another terminal state. Returns seconds."""
    t0 = time.monotonic()

    def details() -> str:
        text = job_info(job_id)
        if output is not None and output.exists():
            text += f"\n--- {output} ---\n" + output.read_text()[-2000:]
        return text

    def reached() -> bool:
        state = job_state(job_id)
        if state == want:
            return True
        if state in TERMINAL_STATES:
            pytest.fail(f"job {job_id} ended {state}, expected {want}\n{details()}")
        return False

    wait_for(reached, timeout, f"job {job_id} to reach {want}", on_fail=details)
    return time.monotonic() - t0
