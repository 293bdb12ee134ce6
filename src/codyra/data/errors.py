"""Errors that tell the user what is wrong with a dataset on disk and how to fix it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# Long listings help nobody; the first few missing paths show the pattern.
SHOWN_MISSING = 10


class DatasetNotFoundError(FileNotFoundError):
    """A dataset is missing, incomplete or unreadable under the data root."""

    def __init__(
        self,
        dataset: str,
        protocol: str,
        directory: Path,
        obtain: str,
        missing: Sequence[str] = (),
        problem: str | None = None,
    ):
        self.dataset = dataset
        self.protocol = protocol
        self.directory = Path(directory)
        self.obtain = obtain
        self.missing = list(missing)
        self.problem = problem
        super().__init__(self._message())

    def __reduce__(self):
        # Process pools and job launchers pickle exceptions; rebuild from the fields.
        args = (self.dataset, self.protocol, self.directory, self.obtain, self.missing, self.problem)
        return type(self), args

    def _message(self) -> str:
        state = "is missing" if not self.directory.exists() else "is incomplete"
        lines = [f"dataset {self.dataset!r} ({self.protocol}) {state}: expected it in {self.directory}"]
        if self.problem:
            lines.append(f"  problem: {self.problem}")
        if self.missing:
            lines.append(f"  missing ({len(self.missing)}):")
            lines += [f"    {path}" for path in self.missing[:SHOWN_MISSING]]
            if len(self.missing) > SHOWN_MISSING:
                lines.append(f"    ... and {len(self.missing) - SHOWN_MISSING} more")
        lines.append(f"  how to obtain it: {self.obtain}")
        return "\n".join(lines)


class DataRootNotFoundError(FileNotFoundError):
    """The configured data root (config key data.root) is not a directory."""

    def __init__(self, root: Path, configured: str, cwd: Path):
        self.root, self.configured, self.cwd = Path(root), configured, Path(cwd)
        relative = "" if Path(configured).expanduser().is_absolute() else f", relative to the working directory {cwd}"
        super().__init__(
            f"data root {self.root} does not exist (config key data.root = {configured!r}{relative}). Put the "
            "datasets there, or set data.root to the directory that holds them; `codyra data check --config "
            "<config>` lists the layout expected there and how to obtain each dataset"
        )

    def __reduce__(self):
        return type(self), (self.root, self.configured, self.cwd)


class ManifestMismatchError(ValueError):
    """A few-shot manifest on disk does not belong to the run or the data asking for it."""
