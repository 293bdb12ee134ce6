"""Which CLIP datasets each of the paper's protocols reads, and what each needs on disk.

Pure data, no torch: the `codyra data check` command and the error messages use it.

Each dataset is one record in its own module of :mod:`codyra.data.datasets` (its layout, split
sizes, templates, class names and reader); this module lists the names each protocol reads, in
the paper's order, and derives the views other modules read. One data root holds every dataset in
the sub-layout torchvision's dataset class expects (`download=True` of that class creates exactly
this layout); each dataset module's docstring shows its paths. X-TAIL also needs CoOp's
`split_zhou_<Dataset>.json` files; each lives inside its dataset's folder and lists
`[relative_path, label, classname]` triples under "train", "val" and "test", with paths
relative to the image folder its record names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from codyra.data.datasets import MTIL, XTAIL, Dataset, Expected, discover

PROTOCOLS = (MTIL, XTAIL)

MTIL_DATASETS = (
    "Aircraft",
    "Caltech101",
    "CIFAR100",
    "DTD",
    "EuroSAT",
    "Flowers",
    "Food",
    "MNIST",
    "OxfordPet",
    "StanfordCars",
    "SUN397",
)
XTAIL_DATASETS = (
    "Aircraft",
    "Caltech101",
    "DTD",
    "EuroSAT",
    "Flowers",
    "Food",
    "MNIST",
    "OxfordPet",
    "StanfordCars",
    "SUN397",
)
DATASETS = {MTIL: MTIL_DATASETS, XTAIL: XTAIL_DATASETS}
# Held-out datasets (evaluated, never trained on; config key heldout_tasks): only their test split
# is read. X-TAIL's are the paper's "zero-shot retention on unseen data" sets (CIFAR100, Places365,
# ImageNet-1k); the paper tracks none for MTIL, whose stream contains CIFAR100, but the other two
# may be listed there.
HELDOUT_DATASETS = {MTIL: ("Places365", "ImageNet"), XTAIL: ("CIFAR100", "Places365", "ImageNet")}


def protocol_datasets(protocol: str) -> tuple[str, ...]:
    """Every dataset a protocol reads: its stream, then its held-out sets."""
    return DATASETS[protocol] + HELDOUT_DATASETS[protocol]


def check_records(
    records: Mapping[str, Dataset],
    datasets: Mapping[str, tuple[str, ...]] = DATASETS,
    heldout: Mapping[str, tuple[str, ...]] = HELDOUT_DATASETS,
) -> None:
    """Raise if a protocol lists a dataset without a record, or whose record lacks that protocol's
    split sizes or templates."""
    gaps = []
    for protocol in PROTOCOLS:
        for name in datasets[protocol] + heldout[protocol]:
            record = records.get(name)
            if record is None:
                gaps.append(f"{protocol} lists {name!r}, which no module of codyra.data.datasets declares")
                continue
            gaps += [
                f"{protocol} lists {name!r}, whose record has no {part} for {protocol!r}"
                for part, table in (("expected sizes", record.expected), ("templates", record.templates))
                if protocol not in table
            ]
    if gaps:
        raise ValueError("; ".join(gaps))


RECORDS = discover()
check_records(RECORDS)

# protocol -> dataset -> its record's Expected, in the protocol's order
EXPECTED: dict[str, dict[str, Expected]] = {
    protocol: {name: RECORDS[name].expected[protocol] for name in protocol_datasets(protocol)} for protocol in PROTOCOLS
}

COOP_SPLIT_SOURCE = (
    "download {file} from the Google Drive link for this dataset in CoOp's DATASETS.md "
    "(https://github.com/KaiyangZhou/CoOp/blob/main/DATASETS.md) and place it at {path}"
)


@dataclass(frozen=True)
class Requirement:
    """Everything one dataset needs under one protocol, for presence checks and messages."""

    folder: str
    required: tuple[str, ...]
    obtain: str


def requirement(name: str, protocol: str) -> Requirement:
    check_name(name, protocol)
    record = RECORDS[name]
    layout = record.layout
    if protocol == XTAIL and record.coop is not None:
        split = record.coop
        return Requirement(
            layout.folder,
            (split.images + "/", split.json),
            f"images: {layout.obtain}; split file: "
            + COOP_SPLIT_SOURCE.format(file=split.json.rsplit("/", 1)[1], path=f"<root>/{split.json}"),
        )
    return Requirement(layout.folder, layout.required, layout.obtain)


def check_name(name: str, protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    known = protocol_datasets(protocol)
    if name not in known:
        raise ValueError(f"unknown dataset {name!r} for protocol {protocol!r}; choose from {', '.join(known)}")
