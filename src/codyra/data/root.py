"""Where a benchmark's datasets live (config key data.root): below the presence checks and the
reference data, which both need it."""

from __future__ import annotations

from pathlib import Path

from codyra.data.errors import DataRootNotFoundError


def data_root(cfg: dict) -> Path:
    """The directory holding a benchmark's datasets (config key data.root), checked to exist."""
    from codyra.errors import ConfigError

    data = cfg["data"]
    if data["root"] is None:
        raise ConfigError(
            f"config key data.root is not set: the {data['kind']} benchmark reads its datasets from it. "
            "Set it to the directory that holds (or will hold) the datasets, in the config or with "
            "--set data.root=/path/to/datasets; `codyra data check --config <config>` then lists what is "
            "expected there and how to obtain each dataset"
        )
    root = Path(data["root"]).expanduser().absolute()
    if not root.is_dir():
        raise DataRootNotFoundError(root, data["root"], Path.cwd())
    return root
