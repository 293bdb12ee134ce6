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
