"""Cheap presence checks that run before anything reads a dataset."""

from __future__ import annotations

from pathlib import Path

from .catalog import requirement
from .errors import DatasetNotFoundError


def missing_required(name: str, protocol: str, root: Path) -> list[str]:
    """Required files and folders of one dataset that are absent, as absolute paths."""
    missing = []
    for relative in requirement(name, protocol).required:
        path = root / relative
        present = path.is_dir() if relative.endswith("/") else path.is_file()
        if not present:
            missing.append(str(path) + ("/" if relative.endswith("/") else ""))
    return missing


def dataset_error(name: str, protocol: str, root: Path, **details) -> DatasetNotFoundError:
    req = requirement(name, protocol)
    obtain = req.obtain.replace("<root>", str(root))
    return DatasetNotFoundError(name, protocol, root / req.folder, obtain, **details)


def require_present(name: str, protocol: str, root: Path) -> None:
    missing = missing_required(name, protocol, root)
    if missing:
        raise dataset_error(name, protocol, root, missing=missing)
