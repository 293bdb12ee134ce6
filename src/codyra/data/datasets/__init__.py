"""The CLIP datasets, one module each: its record ``DATASET`` holds everything about it.

A record names the dataset's torchvision layout (its folder, the paths a reader needs, how to obtain
them), the CoOp split file X-TAIL reads where it reads one, the split sizes and the prompt templates
under each protocol, CLIP's hand-written class names where MTIL uses them, and its reader. Every
module of this package is a dataset's: :func:`discover` imports them all, and
:mod:`codyra.data.catalog` lists which of them each protocol reads.

Pure data, no torch: a reader imports torchvision, numpy and PIL when it runs, so the catalog
holds every record without them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codyra.data.samples import Samples

MTIL = "mtil"
XTAIL = "xtail"

# CLIP's 80 ImageNet prompts, which open_clip holds: `codyra.data.templates` resolves this name
# when asked, as open_clip pulls in torch.
OPENAI_IMAGENET_TEMPLATES = "openai-imagenet"


@dataclass(frozen=True)
class Expected:
    """Split sizes and class count of the real dataset under one protocol."""

    num_classes: int
    train: int
    test: int


@dataclass(frozen=True)
class TorchvisionLayout:
    """The folder torchvision's class reads, the paths it needs and how to obtain them."""

    folder: str
    required: tuple[str, ...]  # relative to the data root; a trailing "/" marks a directory
    obtain: str


@dataclass(frozen=True)
class CoopSplit:
    """Where a CoOp split file lives and which folder its image paths are relative to."""

    json: str
    images: str
    classname_suffix: str = ""  # appended to each of CoOp's class names


@dataclass(frozen=True)
class DatasetSplits:
    """What a reader lists: the class names in label order and the train and test samples."""

    classnames: tuple[str, ...]
    train: Samples
    test: Samples


@dataclass(frozen=True)
class ReadRequest:
    """What a reader is asked for: the data root, the protocol and SUN397's split order."""

    root: Path
    protocol: str
    sun397_order: str  # a key of codyra.data.sources.SUN397_ORDERS (config key data.sun397_order)


@dataclass(frozen=True)
class Dataset:
    """One CLIP dataset; ``expected`` and ``templates`` are keyed by protocol.

    ``expected``: under MTIL the split sizes of ZSCL's MTIL; under X-TAIL the test sizes of RAIL's
    protocol and CoOp's train splits (Aircraft and MNIST: their official train splits).
    """

    name: str
    layout: TorchvisionLayout
    expected: Mapping[str, Expected]
    templates: Mapping[str, tuple[str, ...] | str]  # or OPENAI_IMAGENET_TEMPLATES
    reader: Callable[[ReadRequest], DatasetSplits]  # lists the splits; X-TAIL reads `coop` instead where set
    coop: CoopSplit | None = None
    classnames: tuple[str, ...] | None = None  # CLIP's hand-written list, in the reader's label order


def download_hint(torchvision_class: str) -> str:
    return (
        f'run once on a machine with internet: python -c "import torchvision; '
        f"torchvision.datasets.{torchvision_class}(root='<root>', download=True)\""
    )


def discover(package: str = __name__) -> dict[str, Dataset]:
    """The ``DATASET`` of every module of ``package``, by name."""
    records: dict[str, Dataset] = {}
    declared_in: dict[str, str] = {}
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        record = getattr(module, "DATASET", None)
        if not isinstance(record, Dataset):
            raise TypeError(f"{module.__name__} declares no DATASET record; every module of {package} is a dataset's")
        if record.name in records:
            raise ValueError(
                f"{declared_in[record.name]} and {module.__name__} both declare the dataset {record.name!r}"
            )
        records[record.name] = record
        declared_in[record.name] = module.__name__
    return records
