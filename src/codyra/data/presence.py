"""Cheap presence checks that run before anything reads a dataset."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from codyra.data.catalog import requirement
from codyra.data.errors import DatasetNotFoundError
from codyra.data.root import data_root


def missing_required(name: str, protocol: str, root: Path) -> list[str]:
    """Required files and folders of one dataset that are absent, as absolute paths."""
    missing = []
    for relative in requirement(name, protocol).required:
        path = root / relative
        present = path.is_dir() if relative.endswith("/") else path.is_file()
        if not present:
            missing.append(str(path) + ("/" if relative.endswith("/") else ""))
    return missing


def dataset_stamp(name: str, protocol: str, root: Path) -> list:
    """The size and modification time of each required file and folder of a dataset (a few stats):
    a download or an extraction over it changes them."""
    stamp = []
    for relative in requirement(name, protocol).required:
        try:
            info = (root / relative).stat()
        except FileNotFoundError:
            stamp.append([relative, None])
        else:
            stamp.append([relative, info.st_size, info.st_mtime_ns])
    return stamp


def dataset_error(name: str, protocol: str, root: Path, **details) -> DatasetNotFoundError:
    req = requirement(name, protocol)
    obtain = req.obtain.replace("<root>", str(root))
    return DatasetNotFoundError(name, protocol, root / req.folder, obtain, **details)


def require_present(name: str, protocol: str, root: Path) -> None:
    missing = missing_required(name, protocol, root)
    if missing:
        raise dataset_error(name, protocol, root, missing=missing)


def benchmark_datasets(cfg: dict) -> list[str]:
    """Every dataset an mtil / xtail config reads, once each in order: its tasks, its held-out
    tasks, the single-task studies' tasks and their reference tasks (config key single_task)."""
    single = cfg["single_task"]
    names = list(cfg["tasks"]) + cfg["heldout_tasks"]
    names += [study["task"] for study in single.get("studies", {}).values()] + single.get("reference_tasks", [])
    return list(dict.fromkeys(names))


def require_benchmark_data(cfg: dict, reference_readers: Sequence[str] | None = None) -> None:
    """Fail (before any job runs) if a dataset the benchmark reads is absent: stat calls only.

    mtil / xtail: each dataset's required files under data.root; TRACE (unless the mini
    TRACE, whose data the workflow writes): each task's train/eval/test.json; the reference
    data of data.reference (ZSCL's) where a method distils on it. ``reference_readers``: the
    grid's methods that do (their class's ``reads_reference_data``, resolved by the caller: the
    data layer knows no methods); None: not resolved, so data.reference is required wherever set.
    """
    from codyra.data.reference import require_reference

    if reference_readers is None and cfg["data"]["reference"] is not None:
        require_reference(cfg)
    for method in reference_readers or ():
        require_reference(cfg, method)
    kind, names = cfg["data"]["kind"], list(cfg["tasks"])
    if kind in ("mtil", "xtail"):
        root = data_root(cfg)
        missing = {name: missing_required(name, kind, root) for name in names}
        hint = "`codyra data check --config <config>` lists what each needs and how to obtain it"
    elif kind == "trace" and cfg["llm"]["mini"] is None:
        from codyra.trace.data import SPLITS

        root = data_root(cfg)
        missing = {
            name: [str(root / name / f"{s}.json") for s in SPLITS if not (root / name / f"{s}.json").is_file()]
            for name in names
        }
        hint = "each TRACE task folder needs train.json, eval.json and test.json"
    else:
        return
    absent = {name: paths for name, paths in missing.items() if paths}
    if absent:
        first = next(iter(absent.values()))[0]
        raise FileNotFoundError(
            f"{len(absent)} of the {len(names)} datasets of benchmark {cfg['benchmark']} are missing under data.root "
            f"{root}: {', '.join(absent)} (e.g. {first} is absent); {hint}"
        )
