"""theta_0's digest check costs a stat once a file was hashed: its sha256 is remembered with its stat
beside the digest record, and a file is read again only when the stat changed."""

from __future__ import annotations

import os
import time

import pytest

from codyra.store import theta0
from codyra.store.io import ResultError, read_json
from codyra.store.paths import WEIGHTS_DIGEST, results_path
from codyra.store.theta0 import STAT_FILE, record_first_use, record_written, verify_first_use, verify_own

HOUR_NS = 3600 * 10**9
NAME = "org/model: model.safetensors"


@pytest.fixture
def hashed(monkeypatch):
    """The files whose bytes were hashed, in order."""
    read = []
    real = theta0.file_sha256

    def counting(path):
        read.append(path)
        return real(path)

    monkeypatch.setattr(theta0, "file_sha256", counting)
    return read


def settled(path, content: bytes):
    """Write ``path``, dated an hour ago: past the filesystem's timestamp granularity."""
    path.write_bytes(content)
    old = time.time_ns() - HOUR_NS
    os.utime(path, ns=(old, old))
    return old


def first_use(cfg, weights):
    """A verification at first use or later, recording what it saw first."""
    record_first_use(cfg, verify_first_use(cfg, {NAME: weights}, "fetch it again"))


@pytest.fixture
def cfg(tmp_path):
    return {"results": str(tmp_path / "results"), "benchmark": "b"}


def test_a_second_verification_reads_no_bytes(cfg, tmp_path, hashed):
    weights = tmp_path / "model.safetensors"
    settled(weights, b"weights v1")
    first_use(cfg, weights)
    assert hashed == [weights]
    memo = read_json(results_path(cfg, WEIGHTS_DIGEST).parent / STAT_FILE)
    assert memo[NAME]["sha256"] == read_json(results_path(cfg, WEIGHTS_DIGEST))[NAME]
    assert memo[NAME]["stat"][:2] == [len(b"weights v1"), os.stat(weights).st_mtime_ns]

    first_use(cfg, weights)
    first_use(cfg, weights)
    assert hashed == [weights]  # the stat matched: the digest is the remembered one


def test_a_touched_file_is_hashed_again_and_kept_when_its_bytes_are_the_same(cfg, tmp_path, hashed):
    weights = tmp_path / "model.safetensors"
    settled(weights, b"weights v1")
    first_use(cfg, weights)
    os.utime(weights, ns=(time.time_ns() - HOUR_NS // 2,) * 2)
    first_use(cfg, weights)
    assert hashed == [weights, weights]
    first_use(cfg, weights)
    assert hashed == [weights, weights]  # remembered again with the new stat


@pytest.mark.parametrize("restore_mtime", [False, True])
def test_a_rewritten_file_is_hashed_again_and_refused(cfg, tmp_path, hashed, restore_mtime):
    weights = tmp_path / "model.safetensors"
    old = settled(weights, b"weights v1")
    first_use(cfg, weights)
    weights.write_bytes(b"weights v2")  # same size, same inode
    if restore_mtime:  # what `touch -d` or a copy keeping times would leave: the ctime still moves
        os.utime(weights, ns=(old, old))
    with pytest.raises(ResultError, match=rf"pretrained weights {weights} \({NAME}\) changed since this benchmark"):
        first_use(cfg, weights)
    assert hashed == [weights, weights]


def test_a_replaced_file_is_hashed_again(cfg, tmp_path, hashed):
    weights = tmp_path / "model.safetensors"
    old = settled(weights, b"weights v1")
    first_use(cfg, weights)
    replacement = tmp_path / "new.safetensors"
    settled(replacement, b"weights v2")
    os.utime(replacement, ns=(old, old))
    os.replace(replacement, weights)  # another inode under the same name and mtime
    with pytest.raises(ResultError, match="changed since this benchmark first used them"):
        first_use(cfg, weights)


def test_a_file_written_just_before_its_check_is_hashed_every_time(cfg, tmp_path, hashed):
    # a second write within the filesystem's timestamp granularity could keep the stat: not remembered
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"weights v1")
    first_use(cfg, weights)
    first_use(cfg, weights)
    assert hashed == [weights, weights]
    assert NAME not in read_json(results_path(cfg, WEIGHTS_DIGEST).parent / STAT_FILE)


def test_a_mini_theta_0_is_checked_at_the_cost_of_a_stat_too(tmp_path, hashed):
    weights = tmp_path / "pretrain" / "model.safetensors"
    weights.parent.mkdir()
    settled(weights, b"mini weights")
    record_written([weights])
    verify_own([weights], "rerun the pretraining")
    verify_own([weights], "rerun the pretraining")
    assert hashed == [weights, weights]  # the pretraining's record, then the first check only
    weights.write_bytes(b"mini weightz")
    with pytest.raises(ResultError, match=rf"theta_0 {weights} changed since its pretraining wrote it"):
        verify_own([weights], "rerun the pretraining")
