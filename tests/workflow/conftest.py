"""Run the real Snakemake workflow on tiny configs in temporary directories."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import TINY

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile")]


def grid_config(tmp: Path, **overrides) -> dict:
    cfg = copy.deepcopy(TINY)
    cfg.update(methods=["zeroshot", "codyra", "full-ft"], seeds=[0, 1], results=str(tmp / "results"))
    cfg.update(overrides)
    return cfg


def snakemake(
    workdir: Path, cfg: dict, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """snakemake in ``workdir`` with ``cfg`` as its only config file and the repo's default profile."""
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [
        *SNAKEMAKE,
        "--directory",
        str(workdir),
        "--configfile",
        str(path),
        "--workflow-profile",
        str(REPO / "profiles" / "default"),
        *args,
    ]
    result = subprocess.run(
        cmd, check=False, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def job_counts(output: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table."""
    table = output.split("Job stats:")[-1]
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)
        if m.group(1) != "total"
    }


@pytest.fixture(scope="session")
def finished_grid(tmp_path_factory):
    """The tiny grid run once by a bare `snakemake --cores 2` (default target all_tables; shared by several tests),
    mirrored to MLflow as a user's grid is."""
    workdir = tmp_path_factory.mktemp("grid")
    cfg = grid_config(workdir, tracking={"enabled": True})
    result = snakemake(workdir, cfg, "--cores", "2")
    return workdir, cfg, result
