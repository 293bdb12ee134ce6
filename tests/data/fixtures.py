"""The fixture datasets (codyra.rehearsal.datasets) as the data tests write them, and what the
registry must find in them: `SIZES[protocol][name]` = (classes, train, test)."""

from __future__ import annotations

from pathlib import Path

from codyra.rehearsal.datasets import WRITERS

# The writers' default: 6 training and 2 test images per class. Images per class of the datasets
# ZSCL's 80/20 split divides: the fewest that leave every class 6 training and 2 test images.
CALTECH_PER_CLASS, EUROSAT_PER_CLASS, SUN_PER_CLASS = 29, 17, 10


def write_all(root: Path) -> Path:
    for write in WRITERS.values():
        write(root)
    return root


def _split_80_20(n: int) -> tuple[int, int]:
    return int(0.8 * n), n - int(0.8 * n)


SIZES = {
    "mtil": {
        "Aircraft": (3, 18, 6),
        "Caltech101": (101, *_split_80_20(101 * CALTECH_PER_CLASS)),
        "CIFAR100": (4, 24, 8),
        "DTD": (3, 18, 6),
        "EuroSAT": (10, *_split_80_20(10 * EUROSAT_PER_CLASS)),
        "Flowers": (102, 18, 6),  # labels come from the .mat; CLIP's list names all 102
        "Food": (3, 18, 6),
        "MNIST": (10, 60, 20),
        "OxfordPet": (3, 18, 6),
        "StanfordCars": (3, 18, 6),
        "SUN397": (3, *_split_80_20(3 * SUN_PER_CLASS)),
    },
    "xtail": {  # CoOp train/test lists of the split files: 6 and 2 images per class
        "Aircraft": (3, 18, 6),
        "Caltech101": (3, 18, 6),
        "DTD": (3, 18, 6),
        "EuroSAT": (10, 60, 20),
        "Flowers": (3, 18, 6),
        "Food": (3, 18, 6),
        "MNIST": (10, 60, 20),
        "OxfordPet": (3, 18, 6),
        "StanfordCars": (3, 18, 6),
        "SUN397": (3, 18, 6),
    },
}
