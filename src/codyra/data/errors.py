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


class ManifestMismatchError(ValueError):
    """A few-shot manifest on disk does not belong to the run or the data asking for it."""
