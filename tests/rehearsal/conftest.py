"""The rehearsals of the paper configs (``codyra rehearse``): minutes each, so they run only when asked.

``CODYRA_REHEARSAL_TESTS=1 pytest -m rehearsal``. The ones that go through SLURM are marked
``slurm`` and need the local cluster (``scripts/local-slurm.sh start``). Without the variable they
are skipped; with it and no cluster, the SLURM ones fail instead of skipping.

A model family's rehearsals are one file (``test_<family>_configs.py``) and share one folder in a
pytest process; the families share nothing, so their files can run in separate processes at once.
CI runs them beside the suite, as a rehearsal's local jobs take turns on about one core; TRACE's
SLURM rehearsal, whose jobs fill the local cluster's 8 GPUs, in a process of its own after the
suite's SLURM tests.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from codyra.evaluation.tables import table_names
from codyra.experiment.config import load_config
from codyra.methods import method_of
from codyra.rehearsal.run import Rehearsal, rehearse
from codyra.store.paths import tables_dir

REPO = Path(__file__).resolve().parents[2]
ENABLED = os.environ.get("CODYRA_REHEARSAL_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent  # the rehearsals' files, beside the rehearsal package's own tests
    for item in items:
        path = Path(str(item.fspath))
        if path.parent == here and path.name.endswith("_configs.py"):
            item.add_marker(pytest.mark.rehearsal)
            if not ENABLED:
                item.add_marker(pytest.mark.skip(reason="rehearsals run with CODYRA_REHEARSAL_TESTS=1 (CI does)"))


@pytest.fixture(scope="session")
def folders(tmp_path_factory):
    """One rehearsal folder per model family: the configs of a family share a world (stand-ins,
    fixture data) and a results folder, as one site's grids do (runs of one benchmark are shared)."""
    root = tmp_path_factory.mktemp("rehearsals")
    return {family: root / family for family in ("clip", "blip", "trace")}


def run(config: str, folder: Path, *sets: str, slurm: bool = False) -> dict:
    if slurm and subprocess.run(["sinfo"], capture_output=True, check=False).returncode != 0:
        pytest.fail("this rehearsal goes through SLURM: start the local cluster (scripts/local-slurm.sh start)")
    return rehearse(Rehearsal(config=REPO / "config" / config, sets=list(sets), folder=folder, local=not slurm))


def submitted(folder: Path) -> dict[str, list[str]]:
    """The SLURM jobs of the folder's last Snakemake run: their group or rule -> job ids."""
    jobs: dict[str, list[str]] = {}
    log = (folder / "snakemake.log").read_text()
    for job_id, where in re.findall(r"SLURM jobid (\d+) \(log: \S*/logs/slurm/([^/]+)/", log):
        jobs.setdefault(where, []).append(job_id)
    return jobs


def slurm_job(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields (finished jobs stay visible: the local cluster's MinJobAge)."""
    text = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\w+(?:/\w+)?)=(\S+)", text))


def rehearsed(folder: Path) -> dict:
    return load_config(folder / "rehearsal.yaml")


def check_tables(folder: Path, record: dict) -> dict:
    """The rehearsal wrote every table of its config; returns its validated config."""
    cfg = rehearsed(folder)
    assert record["exit_code"] == 0 and record["benchmark"] == cfg["benchmark"]
    tables = folder / tables_dir(cfg)
    assert all((tables / f"{name}.md").is_file() for name in table_names(cfg))
    return cfg


def megabytes(memory: str) -> int:
    """scontrol's memory field (``64000M``, ``62.50G``) in MB."""
    return round(float(memory[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[memory[-1]])


def trained(cfg: dict) -> list[str]:
    return [m for m in cfg["methods"] if method_of(cfg, m).trains]
