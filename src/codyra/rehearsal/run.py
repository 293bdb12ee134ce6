"""``codyra rehearse``: a paper config's grid run end to end on a CPU, with only sizes shrunk.

The rehearsal folder holds everything it makes, so it can be deleted or rerun (Snakemake then
runs only what is missing):

- ``world/models``: theta_0 stand-ins of the config's architecture family at tiny width, written
  as the real loaders read them (:mod:`codyra.rehearsal.models`);
- ``world/data``: every dataset the config names, in its real on-disk layout
  (:mod:`codyra.rehearsal.datasets`), checked by ``codyra data check`` against the config as it is;
- ``rehearsal.yaml``: ``extends:`` the paper config, then what the rehearsal changes: the shrunk
  sizes (:mod:`codyra.rehearsal.plan`), the stand-in weights and the fixture data root;
- ``profile/``: the SLURM profile as a site sets it for the local one-node cluster (its values
  marked SITE, the status command and the account; every rule's resources as the profile states
  them), so the real ``sbatch`` lines are submitted (``--local``: jobs run in this machine's
  Snakemake process instead);
- ``results/``: the grid's results, through the ``paper`` target (and ``all_heldout``);
- ``rehearsal.json``: what ran, how long it took, and where the tables are.

Before anything is written, the paper config's own jobs are checked against the profile
(:func:`codyra.experiment.resources.check_profile`): a job that would not fit on the cluster is
refused here as it would be there.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from codyra.experiment.config import ConfigError, apply_sets, load_config, overlay, read_config_file
from codyra.rehearsal.plan import changes, shrink
from codyra.store.io import write_json, write_text
from codyra.yaml_loader import load_yaml

REPO = Path(__file__).resolve().parents[3]
SNAKEFILE = REPO / "workflow" / "Snakefile"
DEFAULT_PROFILE = REPO / "profiles" / "slurm"
WORKFLOW_PROFILE = REPO / "profiles" / "default"
# Training images per class of every fixture dataset: the largest few-shot draw of the paper configs
# (X-TAIL's 16), so one world serves every config; TRACE: training examples per task.
TRAIN_PER_CLASS = 16
# What a site sets in profiles/slurm (its values marked SITE), as scripts/local-slurm.sh's cluster has them.
LOCAL_SITE = {"slurm_partition": "gpu", "cpu_partition": "cpu", "gpu_model": "h100", "gpu_mem_mb": 81559}
# The local cluster has no accounting (no slurmdbd): job states from squeue, no account to charge.
LOCAL_CLUSTER = {
    "slurm-status-command": "squeue",
    "slurm-no-account": True,
    "slurm-init-seconds-before-status-checks": 5,
    "latency-wait": 10,
}


@dataclass
class Rehearsal:
    """One rehearsal: the paper config and its ``--set`` overrides, where it runs and how big it is."""

    config: Path
    sets: list[str] = field(default_factory=list)
    folder: Path | None = None
    full: bool = False
    local: bool = False
    profile: Path = DEFAULT_PROFILE
    jobs: int = 2

    def raw(self) -> dict:
        """The config as written (``extends`` resolved) with the ``--set`` overrides."""
        return apply_sets(read_config_file(self.config), self.sets)

    def where(self, benchmark: str) -> Path:
        return self.folder or Path("rehearsals") / (benchmark + ("-full" if self.full else ""))


def targets(cfg: dict) -> list[str]:
    """The rehearsal's targets: the paper's tables and analyses, and the held-out rows if any."""
    return ["paper", *(["all_heldout"] if cfg["heldout_tasks"] else [])]


def write_world(cfg: dict, world: Path) -> dict:
    """theta_0's stand-in and the fixture datasets of ``cfg`` under ``world``, each written once: a
    folder's rehearsals share them (configs of one benchmark share its runs; theta_0's digest is
    recorded at its first use, so a stand-in is never rewritten under them). Returns the config
    overrides and the job environment that point the real loaders at them."""
    from codyra.rehearsal.datasets import write_datasets
    from codyra.rehearsal.models import write_standin

    model = world / "models" / f".{slug(cfg['model']['name'], cfg['model']['revision'])}.json"
    if not model.is_file():
        standin = write_standin(cfg, world / "models")
        write_json(model, {"overrides": standin.overrides, "env": standin.env})
    record = json.loads(model.read_text())
    if cfg["data"]["kind"] != "mini":
        data = world / "data"
        written = data / f".{cfg['benchmark']}.written"
        if not written.is_file():
            with tempfile.TemporaryDirectory(dir=world) as staging:
                write_datasets(cfg, Path(staging), train_per_class=TRAIN_PER_CLASS)
                add_missing_files(Path(staging), data)
            write_text(written, "")
        record["overrides"] = overlay(record["overrides"], {"data": {"root": str(data)}})
    return record


def add_missing_files(source: Path, target: Path) -> None:
    """Move into ``target`` the files of ``source`` it lacks; files it has stay untouched (an
    evaluation cache built from them refuses images whose modification time changed)."""
    for path in sorted(source.rglob("*")):
        if path.is_file():
            moved = target / path.relative_to(source)
            if not moved.exists():
                moved.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, moved)


def slug(*parts: str | None) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9.]+", "-", p) for p in parts if p)


def site_profile(profile: Path, out: Path, jobs: int) -> Path:
    """``profile`` as a site would set it for the local one-node cluster: every value marked SITE
    replaced with the local cluster's (:data:`LOCAL_SITE`), squeue for job status, no account,
    ``jobs`` at once; every rule's resources as ``profile`` states them."""
    source = profile / "config.yaml" if profile.is_dir() else profile
    text = source.read_text()
    settings = load_yaml(text)
    site_keys = set(re.findall(r"^\s*#?\s*([A-Za-z_]+):.*#\s*SITE\b", text, re.MULTILINE))
    unknown = site_keys - set(LOCAL_SITE) - {"slurm_account"}
    if unknown:
        raise ConfigError(
            f"profile {source} marks {sorted(unknown)} as SITE values the rehearsal does not know: "
            "add the local cluster's value to codyra.rehearsal.run.LOCAL_SITE"
        )
    defaults = settings.setdefault("default-resources", {})
    for key in site_keys & set(LOCAL_SITE):
        _replace_everywhere(settings, key, defaults.get(key), LOCAL_SITE[key])
    defaults.pop("slurm_account", None)
    settings.update(LOCAL_CLUSTER, jobs=jobs)
    out.mkdir(parents=True, exist_ok=True)
    header = f"# {source} as a site sets it for the local one-node cluster (codyra rehearse); do not edit\n"
    write_text(out / "config.yaml", header + yaml.safe_dump(settings, sort_keys=False))
    return out


def _replace_everywhere(settings: dict, key: str, old, new) -> None:
    """Replace the site's value of ``key`` in default-resources and wherever a rule repeats it (a
    partition's name also where a rule requests it as its ``slurm_partition``)."""
    keys = {key, "slurm_partition"} if key.endswith("_partition") else {key}
    for resources in [settings["default-resources"], *(settings.get("set-resources") or {}).values()]:
        for name in keys & set(resources):
            if resources[name] == old or (resources is settings["default-resources"] and name == key):
                resources[name] = new


def job_stats(output: str) -> dict[str, int]:
    """Snakemake's last 'Job stats' table: rule -> jobs."""
    table = output.split("Job stats:")[-1]
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)
        if m.group(1) != "total"
    }


def run_snakemake(command: list[str], folder: Path, env: dict) -> tuple[int, str]:
    """Run ``command``, its output shown as it comes and kept in ``folder/snakemake.log``."""
    lines = []
    with (
        open(folder / "snakemake.log", "w") as log,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=folder
        ) as process,
    ):
        for line in process.stdout:
            sys.stdout.write(line)
            log.write(line)
            lines.append(line)
    return process.returncode, "".join(lines)


def rehearse(rehearsal: Rehearsal) -> dict:
    """Run the rehearsal; returns its record (also written to ``rehearsal.json``). Raises
    ``ConfigError`` for a config or profile that would fail on the cluster, ``RuntimeError`` when
    the grid fails (its log is in the folder)."""
    from codyra.experiment.resources import check_profile

    raw = rehearsal.raw()
    cfg = load_config(copy.deepcopy(raw))
    check_profile(cfg, rehearsal.profile)  # the paper grid's jobs against what the profile requests
    folder = rehearsal.where(cfg["benchmark"]).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    world = write_world(cfg, folder / "world")

    as_written = read_config_file(rehearsal.config)
    shrunk = overlay(shrink(raw, full=rehearsal.full), {**world["overrides"], "results": "results"})
    # Every dataset of the config as it is, in its fixture layout: the readers of the real grid.
    if cfg["data"]["kind"] != "mini":
        check_data(overlay(raw, world["overrides"]))
    rehearsal_file = folder / "rehearsal.yaml"
    header = (
        f"# {rehearsal.config} rehearsed (codyra rehearse{' --full' if rehearsal.full else ''}): the config itself, "
        "then only sizes shrunk (codyra.rehearsal.plan), theta_0's stand-in and the fixture data\n"
    )
    diff = {"extends": str(Path(rehearsal.config).absolute()), **changes(as_written, shrunk)}
    write_text(rehearsal_file, header + yaml.safe_dump(diff, sort_keys=False))
    rehearsed = load_config(rehearsal_file)

    command = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(folder)]
    command += ["--configfile", str(rehearsal_file), "--workflow-profile", str(WORKFLOW_PROFILE)]
    if rehearsal.local:  # as the SLURM profile: a job killed mid-write is rerun
        command += ["--cores", "2", "--rerun-incomplete"]
    else:
        command += ["--profile", str(site_profile(rehearsal.profile, folder / "profile", rehearsal.jobs))]
    command += targets(rehearsed)
    env = {**os.environ, **world["env"]}
    began = time.monotonic()
    code, output = run_snakemake(command, folder, env)
    record = {
        "config": str(rehearsal.config),
        "set": rehearsal.sets,
        "benchmark": rehearsed["benchmark"],
        "size": "full" if rehearsal.full else "small",
        "executor": "local" if rehearsal.local else f"slurm ({rehearsal.profile})",
        "seconds": round(time.monotonic() - began, 1),
        "jobs": job_stats(output),
        "slurm_jobs": len(re.findall(r"SLURM jobid", output)),
        "exit_code": code,
    }
    if code == 0:
        from codyra.evaluation.tables import table_names
        from codyra.store.paths import tables_dir

        tables = tables_dir(rehearsed)
        missing = [n for n in table_names(rehearsed) if not (folder / tables / f"{n}.md").is_file()]
        if missing:
            code = record["exit_code"] = 1
            output += f"\nthe grid finished without the tables {missing}"
        record["tables"] = str(folder / tables)
    write_json(folder / "rehearsal.json", record)
    if code != 0:
        raise RuntimeError(
            f"the rehearsal of {rehearsal.config} failed (Snakemake exit code {code}); "
            f"its log: {folder / 'snakemake.log'}, the jobs' logs: {folder / 'results' / 'logs'}"
        )
    return record


def check_data(raw: dict) -> None:
    """``codyra data check`` on every dataset of ``raw`` (the config as it is, on the fixture data)."""
    from codyra.data.check import check_config
    from codyra.methods import reference_readers

    cfg = load_config(raw)
    problems = check_config(cfg, reference_readers=reference_readers(cfg))
    if problems:
        raise RuntimeError("the fixture datasets do not pass codyra data check:\n  " + "\n  ".join(problems))
