"""Two configs that read the same evaluation caches, run side by side in one working directory.

Snakemake locks the inputs of every job of a run and the outputs of those it will run, for the
whole run. A run that would build a shared cache locks it, and another config whose rows read it
cannot start until that run ends. Built first (`snakemake eval_caches`), the caches are inputs
only, and both configs run at once."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest
import yaml

from codyra.rehearsal.datasets import write_dtd, write_eurosat, write_mnist
from tests.conftest import TINY

from .conftest import REPO, SNAKEMAKE, job_counts, snakemake

pytestmark = pytest.mark.slow
LOCKED = "Directory cannot be locked"  # what Snakemake says of a working directory another run holds


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("clip-data")
    for write in (write_dtd, write_eurosat, write_mnist):
        write(root)
    return root


def mtil_config(results, root, pretrained) -> dict:
    """A tiny MTIL grid on fixture datasets in their on-disk layouts, with the tiny mini CLIP."""
    return {
        "benchmark": "fixture-mtil",
        "results": str(results / "results"),
        "seeds": [0],
        "methods": ["zeroshot", "codyra"],
        "model": {"name": "codyra-mini", "pretrained": str(pretrained)},
        "data": {"kind": "mtil", "root": str(root), "fewshot": 2, "label_space": "task"},
        "tasks": ["DTD", "EuroSAT", "MNIST"],
        "train": {"iterations": 3, "batch_size": 4, "lr": 0.003, "checkpoint_every": 2},
        "eval": {"batch_size": 16},
        "method_configs": {"zeroshot": {"kind": "zeroshot"}, "codyra": copy.deepcopy(TINY["method_configs"]["codyra"])},
    }


def two_configs(results, root, pretrained) -> tuple[dict, dict]:
    """Two MTIL benchmarks over the same test sets, at the same model, in one results folder."""
    first = mtil_config(results, root, pretrained)
    second = {**mtil_config(results, root, pretrained), "benchmark": "fixture-mtil-order2"}
    second["tasks"] = list(reversed(first["tasks"]))
    return first, second


@contextmanager
def running(workdir, cfg):
    """A real run of ``cfg`` (all_tables) in ``workdir``, held still once it has locked the working
    directory (as a long grid holds it for days); killed at the end."""
    path = workdir / "running.yaml"
    path.write_text(yaml.safe_dump(cfg))
    command = [*SNAKEMAKE, "--directory", str(workdir), "--configfile", str(path)]
    command += ["--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "1", "all_tables"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    locks = workdir / ".snakemake" / "locks"
    try:
        deadline = time.monotonic() + 300
        while not (locks / "0.output.lock").is_file():
            assert run.poll() is None and time.monotonic() < deadline, "the run never locked its working directory"
            time.sleep(0.05)
        time.sleep(0.5)  # its lock files written
        os.killpg(run.pid, signal.SIGSTOP)  # the run and any process it started
        yield
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()


def test_a_second_config_waits_for_a_run_that_builds_the_shared_caches(tmp_path, fixture_root, tiny_pretrained):
    first, second = two_configs(tmp_path, fixture_root, tiny_pretrained)
    with running(tmp_path, first):
        planned = snakemake(tmp_path, second, "-n", "all_tables")
    assert LOCKED in planned.stdout + planned.stderr


def test_configs_run_side_by_side_once_the_shared_caches_are_built(tmp_path, fixture_root, tiny_pretrained):
    first, second = two_configs(tmp_path, fixture_root, tiny_pretrained)
    built = snakemake(tmp_path, first, "--cores", "2", "eval_caches")
    assert job_counts(built.stdout + built.stderr) == {"eval_cache": 3, "eval_caches": 1}
    with running(tmp_path, first):
        planned = snakemake(tmp_path, second, "-n", "all_tables")
    output = planned.stdout + planned.stderr
    assert LOCKED not in output
    counts = job_counts(output)
    assert "eval_cache" not in counts and counts["eval_row"] == 3  # it reads the caches, builds none
