"""The SLURM profile names only options that the installed SLURM executor plugin has (set or
shown commented out): a renamed option fails here, not on the cluster."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "slurm" / "config.yaml"


def test_every_slurm_option_of_the_profile_exists_in_the_plugin():
    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    fields = {f.name.replace("_", "-") for f in dataclasses.fields(plugin.ExecutorSettings)}
    named = set(re.findall(r"^#? ?slurm-([a-z-]+):", PROFILE.read_text(), re.MULTILINE))
    assert {"efficiency-report", "efficiency-report-path", "efficiency-threshold", "partition-config"} <= named
    assert named - fields == set()


@pytest.mark.parametrize("profile", ["slurm", "slurm-local"])
def test_retries_get_more_time_and_the_causal_lms_more_memory(profile):
    """The profile read as `snakemake --profile` reads it (its parser, Resources.parse): each rule's runtime is
    an expression of the attempt that Snakemake evaluates to whole minutes, growing with every retry."""
    from codyra.experiment.resources import ProfileResources

    resources = ProfileResources.read(PROFILE.parents[1] / profile)
    for rule in ["a rule of the defaults", *resources.named_rules()]:
        runtimes = [resources.request(rule, 4, attempt=attempt).runtime for attempt in (1, 2, 3)]
        assert all(isinstance(r, int) for r in runtimes) and runtimes[0] < runtimes[1] < runtimes[2], (rule, runtimes)
    if profile == "slurm":
        for rule in ("train_lm_task", "eval_lm_row", "eval_row0"):  # what could run out of host memory
            memory = [resources.request(rule, 4, attempt=attempt).mem_mb for attempt in (1, 2, 3)]
            assert memory[0] < memory[1] < memory[2], (rule, memory)


@pytest.mark.parametrize("profile", ["slurm", "slurm-local"])
def test_cpu_only_rules_go_to_the_cpu_partition_and_every_job_to_one_node(profile):
    from codyra.experiment.resources import ProfileResources

    resources = ProfileResources.read(PROFILE.parents[1] / profile)
    cpu, gpu = resources.value("any", "cpu_partition"), resources.value("any", "slurm_partition")
    for rule in resources.named_rules():
        request = resources.request(rule, 4)
        assert request.partition == (cpu if request.gpus == 0 else gpu), rule
        assert request.nodes == 1, rule
    assert {"pretrain_mini", "eval_cache", "analysis_drift"} <= {
        rule for rule in resources.named_rules() if resources.request(rule, 4).gpus == 0
    }
    if profile == "slurm":
        assert cpu != gpu
