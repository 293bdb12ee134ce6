"""Retries that can help: a job submitted to a cluster whose failure would repeat is not run again.

The SLURM profile resubmits a failed job (``retries``). A failure that follows from the job's own
settings, inputs or code (a config error, a shape or dtype mismatch, a ValueError from bad input,
a CUDA out-of-memory at the same batch shape) fails the same way on every attempt, each after a
full start and model load: 16 h on 4 GPUs for a TRACE job. Failures that a second attempt may
pass are retried as before: a node failure, a timeout or a preemption, an NCCL or network error,
a host out-of-memory kill (the process dies without a Python error, so nothing is recorded), a
file the shared filesystem had not shown yet, any error not known to repeat.

When a member of a submitted job (a group job's training or row, or a job of its own) fails with
an error that repeats, the job's failure record (``record_path``: one per job, named by its
members) keeps the error and the member's log. A later attempt of that job, and the job's other
members in the same attempt, stop at their start, before loading anything, naming that first
failure and its log. The workflow removes the records when a new Snakemake run starts: a fixed
cause gets a fresh try.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from pathlib import Path

from codyra.errors import ConfigError, MissingExtraError
from codyra.store.io import fingerprint, read_json, write_json

# one per process: the members of one attempt of a submitted job run as threads of one process
PROCESS = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
REPEATS = (ConfigError, MissingExtraError, ValueError, TypeError, KeyError, IndexError, AttributeError)
REPEATS += (NotImplementedError, AssertionError, ZeroDivisionError)
# errors torch raises as RuntimeError that come from the computation's shapes and types (repeat) ...
SHAPE_OR_TYPE = ("shape", "size mismatch", "must match the size", "dtype", "expected scalar type", "same device")
SHAPE_OR_TYPE += ("cannot be multiplied", "out of memory")
# ... and from the node, its GPUs or the network between ranks (may pass on another node or later)
NODE_OR_NETWORK = ("nccl", "gloo", "c10d", "processgroup", "connection", "socket", "timed out", "timeout", "ecc")
NODE_OR_NETWORK += ("cuda driver", "no cuda-capable device", "busy or unavailable", "launch failure")


class NotRetried(RuntimeError):
    """An attempt of a job whose earlier failure repeats: stopped before loading anything."""


def repeats(error: BaseException) -> bool:
    """Whether ``error`` would fail the job the same way again (not worth a retry)."""
    if type(error).__name__ == "OutOfMemoryError":  # torch's CUDA out-of-memory: the same shapes need the same memory
        return True
    if isinstance(error, REPEATS):
        return True
    if isinstance(error, RuntimeError) and type(error) is not NotRetried:
        message = str(error).lower()
        if any(word in message for word in NODE_OR_NETWORK):
            return False
        if any(word in message for word in SHAPE_OR_TYPE):
            return True
    cause = error.__cause__ or error.__context__
    return cause is not None and cause is not error and repeats(cause)


def record_path(folder: str | Path, members: list[tuple[str, dict]]) -> Path:
    """The failure record of a submitted job in ``folder``, named by its members (rule, wildcards):
    the same for every attempt of the job, another for any other job."""
    key = fingerprint(sorted([rule, sorted(wildcards.items())] for rule, wildcards in members))
    return Path(folder) / f"{key}.json"


def check_attempt(record: Path, attempt: int) -> None:
    """Stop attempt ``attempt`` of a job at its start when an earlier attempt (or a member of this
    one) failed with an error that repeats."""
    if not record.is_file():
        return
    failed = read_json(record)
    if failed.get("attempt", attempt) < attempt or failed.get("process") == PROCESS:
        raise NotRetried(
            f"not run again: attempt {failed['attempt']} of this job failed at {failed['time']} with an error that "
            f"an attempt {attempt} would repeat ({failed['error']}); its log: {failed['log']}. Fix the cause, then "
            "run snakemake again (a new run tries the job afresh)"
        )


def record_failure(record: Path, attempt: int, log: str | Path, error: BaseException) -> None:
    """Keep ``error`` of a member (its ``log``) as the job's failure, if it repeats and is the job's first."""
    if isinstance(error, NotRetried) or not repeats(error) or record.is_file():
        return
    write_json(
        record,
        {
            "attempt": attempt,
            "process": PROCESS,
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "log": str(log),
            "error": f"{type(error).__name__}: {error}",
        },
    )


def run_member(record: Path, attempt: int, log: str | Path, run) -> None:
    """``run()``, one member of attempt ``attempt`` of a submitted job, under the job's failure record."""
    try:
        check_attempt(record, attempt)
    except NotRetried as err:  # the member's log says why (the profile shows a failed job's log)
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as out:
            print(f"codyra: {err}", file=out)
        raise
    try:
        run()
    except Exception as err:
        record_failure(record, attempt, log, err)
        raise


def forget_failures(folder: str | Path) -> None:
    """A new Snakemake run: every job of the workflow may be tried again."""
    folder = Path(folder)
    for path in folder.glob("*.json") if folder.is_dir() else ():
        path.unlink(missing_ok=True)
