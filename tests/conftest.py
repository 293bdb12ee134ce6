"""Shared fixtures: a tiny mini-benchmark config whose jobs take a fraction of a second."""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def local_controller_down(conf: Path, proc: Path = Path("/proc")) -> bool:
    """Whether SLURM's config ``conf`` names this machine as its controller and no slurmctld runs
    here (``scripts/local-slurm.sh stop``): SLURM's commands then retry for about 9 s before failing."""
    try:
        text = conf.read_text()
    except OSError:
        return False
    host = re.search(r"^\s*SlurmctldHost\s*=\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
    if not host or not re.match(r"(localhost|127\.0\.0\.1)\b", host.group(1)):
        return False
    for comm in proc.glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "slurmctld":
                return False
        except OSError:
            continue
    return True


# Every Snakemake start imports the SLURM executor plugin, whose import asks `scontrol show config`
# for a default; with the local controller down each start would wait for its timeout (about 9 s,
# half the fast tier's time). An empty config makes SLURM's commands fail at once instead; the
# tests that need the cluster skip in that state (tests/slurm), and no other test reaches SLURM.
LOCAL_CONTROLLER_DOWN = local_controller_down(Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")))
if LOCAL_CONTROLLER_DOWN:
    os.environ["SLURM_CONF"] = os.devnull

TINY = {
    "benchmark": "tiny",
    "seeds": [0],
    "methods": ["zeroshot", "lora-r4", "codyra", "full-ft"],
    "model": {"name": "codyra-mini"},
    "data": {"kind": "mini"},
    "tasks": ["colour", "digits", "count"],
    "train": {"iterations": 6, "batch_size": 16, "lr": 0.003, "checkpoint_every": 2},
    "eval": {"batch_size": 64},
    "method_configs": {
        "zeroshot": {"kind": "zeroshot"},
        "lora-r4": {"kind": "lora", "rank": 4},
        "seqlora-r4": {"kind": "seqlora", "rank": 4},  # not in the grid: tests train it directly
        "codyra": {"kind": "codyra", "rank": 4, "dense_ratio": 0.5, "kappa_max": 0.05},
        "full-ft": {"kind": "full", "train": {"lr": 0.0005}},
    },
    # no MLflow store: a 6-step training job takes a fraction of a second without a fresh SQLite
    # store and seconds with one; the tests of the mirror turn it on
    "tracking": {"enabled": False},
    "mini": {
        "corpus_size": 256,
        "pretrain_steps": 4,
        "pretrain_batch_size": 32,
        "train_per_task": 64,
        "test_per_task": 40,
    },
}


@pytest.fixture
def tiny_cfg_dict(tmp_path):
    cfg = copy.deepcopy(TINY)
    cfg["results"] = str(tmp_path / "results")
    return cfg


def with_train(cfg: dict, train: dict, family: str = "clip") -> dict:
    """``cfg`` with ``train`` over its train block and ``family`` as its model family."""
    return {**cfg, "train": {**cfg["train"], **train}, "model": {**cfg["model"], "family": family}}


@pytest.fixture
def tiny_cfg(tiny_cfg_dict):
    from codyra.experiment.config import load_config

    return load_config(tiny_cfg_dict)


@pytest.fixture(scope="session")
def tiny_pretrained(tmp_path_factory):
    """A pretrained tiny mini model (4 steps: enough for a valid theta_0, not for accuracy)."""
    from codyra.experiment.config import load_config
    from codyra.mini.clip.pretrain import pretrain_mini

    path = tmp_path_factory.mktemp("pretrained") / "model.safetensors"
    pretrain_mini(load_config(copy.deepcopy({**TINY, "results": str(path.parent)})), path)
    return path


@pytest.fixture
def tiny_run(tiny_cfg, tiny_pretrained):
    """tiny_cfg whose theta_0 is the session's pretrained tiny model."""
    tiny_cfg["model"]["pretrained"] = str(tiny_pretrained)
    return tiny_cfg


def load_script(name: str):
    """``scripts/<name>.py`` as a module (its file name holds dashes, so it cannot be imported)."""
    path = os.path.join(ROOT, "scripts", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as a module, its sibling modules importable as it imports them."""
    folder = os.path.join(ROOT, "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", os.path.join(folder, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clear_code_version_caches() -> None:
    """Forget what ``codeversions`` computed in this process (as a later process would start)."""
    from codyra.experiment import codeversions

    for cached in vars(codeversions).values():
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    importlib.invalidate_caches()


def write_yaml(path, obj) -> str:
    path.write_text(yaml.safe_dump(obj))
    return str(path)


@pytest.fixture(autouse=True, scope="session")
def _code_version_cache(tmp_path_factory):
    """Code versions cache what modules yield (``codeversions.cache_folder``): in the session's
    temporary folder, not the user's, for this process and the Snakemake runs it starts."""
    before = os.environ.get("CODYRA_CACHE_DIR")
    os.environ["CODYRA_CACHE_DIR"] = str(tmp_path_factory.mktemp("codyra-cache"))
    yield
    if before is None:
        del os.environ["CODYRA_CACHE_DIR"]
    else:
        os.environ["CODYRA_CACHE_DIR"] = before


@pytest.fixture(autouse=True)
def _tracking_uri_stays_in_its_test(monkeypatch):
    """``mlflow.set_tracking_uri`` (the docs' example calls it) also sets MLFLOW_TRACKING_URI for the
    whole process, and every later run and Snakemake subprocess would log into that store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield
    if "mlflow" in sys.modules:
        sys.modules["mlflow"].set_tracking_uri(None)
