"""Snakemake's own conventions: `snakemake --lint` is clean for every shipped config, and a
--configfile replaces the default config without Snakemake announcing a merge."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codyra.yaml_loader import load_yaml

from .conftest import REPO, SNAKEMAKE, grid_config, job_counts, snakemake

CONFIGS = sorted(p.name for p in (REPO / "config").glob("*.yaml"))


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, check=False, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_snakemake_lint_is_clean(config):
    # every config, as each switches rules on or off (single-task studies, held-out tasks, families)
    result = run([*SNAKEMAKE, "--lint", "--configfile", f"config/{config}", "--config", "check_data=False"], REPO)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Lints for" not in output
    assert "Congratulations, your workflow is in a good condition!" in output


def test_lint_reports_a_rule_without_log(tmp_path):
    # the check above can fail: a rule that breaks a lint makes --lint say so and exit 1
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text('rule unlogged:\n    output: "x.txt"\n    shell: "touch {output}"\n')
    result = run([*SNAKEMAKE[:-2], "-s", str(snakefile), "--lint"], tmp_path)
    assert result.returncode == 1
    assert "No log directive defined" in result.stdout + result.stderr


@pytest.mark.slow
def test_bare_snakemake_reads_the_default_config_and_a_configfile_replaces_it(tmp_path):
    default = load_yaml((REPO / "config" / "config.yaml").read_text())
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((REPO / "config" / "config.yaml").read_text())
    bare = run([*SNAKEMAKE, "-n", "all_tables"], tmp_path)
    assert bare.returncode == 0, bare.stderr[-4000:]
    assert job_counts(bare.stdout)["summarize_run"] == len(default["methods"]) * len(default["seeds"])

    given = snakemake(tmp_path, grid_config(tmp_path, methods=["zeroshot"], seeds=[3]), "-n", "all_tables")
    assert job_counts(given.stdout)["summarize_run"] == 1  # the given file alone: one method, one seed
    # Snakemake's notice of a merge into a workflow's `configfile:`; there is no merge to announce
    assert "by additional config" not in given.stdout + given.stderr
