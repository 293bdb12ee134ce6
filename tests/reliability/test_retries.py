"""A retry of a submitted job whose failure repeats stops at its start; one that may pass runs again."""

from __future__ import annotations

import subprocess

import pytest

from codyra.errors import ConfigError
from codyra.experiment import retries
from codyra.experiment.retries import NotRetried, forget_failures, record_path, repeats, run_member
from codyra.store.io import ResultError


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError, by name (a CUDA allocation that fails at the same shapes again)."""


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("config key train.lr: must be > 0"),
        ResultError("cell file x.json is not valid JSON"),
        ValueError("unknown method 'x'"),
        KeyError("task"),
        TypeError("unsupported operand"),
        RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x64 and 32x64)"),
        RuntimeError("expected scalar type Float but found BFloat16"),
        OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    ],
    ids=repr,
)
def test_errors_of_the_job_s_own_settings_inputs_and_code_repeat(error):
    assert repeats(error)


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"),
        RuntimeError("[c10d] The client socket has timed out after 1800s"),
        RuntimeError("CUDA error: uncorrectable ECC error encountered"),
        RuntimeError("torchrun: 2 of 4 ranks exited"),  # not known to repeat: a rank may have died with its node
        ConnectionError("connection reset by peer"),
        FileNotFoundError("results/x/task1/summary.json"),  # the shared filesystem may show it later
        OSError(28, "No space left on device"),
        MemoryError(),
        subprocess.CalledProcessError(1, ["torchrun"]),
    ],
    ids=repr,
)
def test_errors_a_second_attempt_may_pass_are_retried(error):
    assert not repeats(error)


def test_an_error_raised_from_one_that_repeats_repeats():
    try:
        try:
            raise ConfigError("config key eval.batch_size: must be >= 1")
        except ConfigError as err:
            raise RuntimeError("the row failed") from err
    except RuntimeError as err:
        assert repeats(err)


def failing(error):
    def run():
        raise error

    return run


def test_the_retry_of_a_job_whose_failure_repeats_stops_before_running(tmp_path, monkeypatch):
    record = record_path(tmp_path / "failed-jobs", [("eval_lm_row", {"method": "codyra", "seed": "0", "i": "3"})])
    log = tmp_path / "row3.log"
    with pytest.raises(ValueError):
        run_member(record, 1, log, failing(ValueError("prompt longer than llm.max_prompt_len")))
    monkeypatch.setattr(retries, "PROCESS", "the retry's process on another node")
    ran = []
    with pytest.raises(NotRetried) as stopped:
        run_member(record, 2, log, lambda: ran.append(True))
    assert ran == []  # nothing started: no model loaded
    message = str(stopped.value)
    assert "attempt 1 of this job failed" in message and "ValueError: prompt longer than llm.max_prompt_len" in message
    assert f"its log: {log}" in message
    assert "not run again" in log.read_text()  # the stopped attempt says why in the member's log too


def test_other_members_of_the_failed_attempt_stop_too(tmp_path):
    record = record_path(tmp_path, [("train_task", {"i": "1"}), ("eval_row", {"i": "1"})])
    with pytest.raises(ConfigError):
        run_member(record, 1, tmp_path / "task1.log", failing(ConfigError("bad")))
    with pytest.raises(NotRetried):  # the group job fails anyway: its row computes nothing Snakemake would delete
        run_member(record, 1, tmp_path / "row1.log", lambda: None)


def test_a_failure_that_may_pass_is_retried(tmp_path, monkeypatch):
    record = record_path(tmp_path, [("train_lm_task", {"method": "codyra", "seed": "0", "i": "2"})])
    with pytest.raises(RuntimeError):
        run_member(record, 1, tmp_path / "task2.log", failing(RuntimeError("NCCL communicator was aborted")))
    monkeypatch.setattr(retries, "PROCESS", "the retry's process")
    ran = []
    run_member(record, 2, tmp_path / "task2.log", lambda: ran.append(True))
    assert ran == [True]


def test_a_requeued_attempt_runs_and_a_new_run_forgets_the_failures(tmp_path, monkeypatch):
    folder = tmp_path / "failed-jobs"
    record = record_path(folder, [("eval_row0", {})])
    with pytest.raises(KeyError):
        run_member(record, 1, tmp_path / "row0.log", failing(KeyError("task")))
    # SLURM requeued the same attempt (a preemption) in a new process: it runs
    monkeypatch.setattr(retries, "PROCESS", "the requeued process")
    run_member(record, 1, tmp_path / "row0.log", lambda: None)
    forget_failures(folder)  # a new snakemake run: its attempt 2 is a fresh try's
    run_member(record, 2, tmp_path / "row0.log", lambda: None)


def test_the_record_is_the_job_s_own(tmp_path):
    one = record_path(tmp_path, [("eval_row", {"method": "codyra", "seed": "0", "i": "1"})])
    assert one == record_path(tmp_path, [("eval_row", {"i": "1", "seed": "0", "method": "codyra"})])
    assert one != record_path(tmp_path, [("eval_row", {"method": "codyra", "seed": "0", "i": "2"})])
