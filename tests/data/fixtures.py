"""Tiny copies of the 11 CLIP datasets in their real on-disk layouts, plus CoOp split files.

Each `write_<dataset>(root)` writes the files torchvision's class reads (annotation
files, .mat files, pickled CIFAR batches, IDX files, JPEGs) for a few classes with a few
small noise images each, and for X-TAIL datasets the CoOp `split_zhou_*.json` file.
`SIZES[protocol][name]` is what the registry must find in them: (classes, train, test).
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image
from torchvision.datasets import cifar, flowers102

IMAGE_SIZE = (20, 16)  # width, height: not square, so resizing and crops do something
TRAIN_PER_CLASS, TEST_PER_CLASS = 6, 2


def write_image(path: Path, size=IMAGE_SIZE) -> None:
    """A noise JPEG whose pixels depend only on its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(zlib.crc32(path.as_posix().encode()))
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path, "JPEG")


def write_text(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def write_coop_split(path: Path, train, val, test) -> None:
    """CoOp's format: {"train"|"val"|"test": [[relative_path, label, classname], ...]}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"train": train, "val": val, "test": test}, indent=1))


def _coop_parts(items, n_train: int, n_val: int):
    """Split [(path, label, classname)] per class into CoOp-style train/val/test lists."""
    parts = {"train": [], "val": [], "test": []}
    by_label: dict[int, list] = {}
    for item in items:
        by_label.setdefault(item[1], []).append(list(item))
    for members in by_label.values():
        parts["train"] += members[:n_train]
        parts["val"] += members[n_train : n_train + n_val]
        parts["test"] += members[n_train + n_val :]
    return parts["train"], parts["val"], parts["test"]


def write_aircraft(root: Path) -> None:
    data = root / "fgvc-aircraft-2013b" / "data"
    variants = ["707-320", "A300B4", "Cessna 172"]
    write_text(data / "variants.txt", variants)
    image_id = 1_000_000
    for split, per_class in (("train", TRAIN_PER_CLASS), ("test", TEST_PER_CLASS)):
        lines = []
        for variant in variants:
            for _ in range(per_class):
                image_id += 1
                write_image(data / "images" / f"{image_id}.jpg")
                lines.append(f"{image_id} {variant}")
        write_text(data / f"images_variant_{split}.txt", lines)


CALTECH_FOLDERS = (
    "Faces",
    "Faces_easy",
    "Leopards",
    "Motorbikes",
    "accordion",
    "airplanes",
    "anchor",
    "ant",
    "barrel",
    "bass",
    "beaver",
    "binocular",
    "bonsai",
    "brain",
    "brontosaurus",
    "buddha",
    "butterfly",
    "camera",
    "cannon",
    "car_side",
    "ceiling_fan",
    "cellphone",
    "chair",
    "chandelier",
    "cougar_body",
    "cougar_face",
    "crab",
    "crayfish",
    "crocodile",
    "crocodile_head",
    "cup",
    "dalmatian",
    "dollar_bill",
    "dolphin",
    "dragonfly",
    "electric_guitar",
    "elephant",
    "emu",
    "euphonium",
    "ewer",
    "ferry",
    "flamingo",
    "flamingo_head",
    "garfield",
    "gerenuk",
    "gramophone",
    "grand_piano",
    "hawksbill",
    "headphone",
    "hedgehog",
    "helicopter",
    "ibis",
    "inline_skate",
    "joshua_tree",
    "kangaroo",
    "ketch",
    "lamp",
    "laptop",
    "llama",
    "lobster",
    "lotus",
    "mandolin",
    "mayfly",
    "menorah",
    "metronome",
    "minaret",
    "nautilus",
    "octopus",
    "okapi",
    "pagoda",
    "panda",
    "pigeon",
    "pizza",
    "platypus",
    "pyramid",
    "revolver",
    "rhino",
    "rooster",
    "saxophone",
    "schooner",
    "scissors",
    "scorpion",
    "sea_horse",
    "snoopy",
    "soccer_ball",
    "stapler",
    "starfish",
    "stegosaurus",
    "stop_sign",
    "strawberry",
    "sunflower",
    "tick",
    "trilobite",
    "umbrella",
    "watch",
    "water_lilly",
    "wheelchair",
    "wild_cat",
    "windsor_chair",
    "wrench",
    "yin_yang",
)
CALTECH_PER_CLASS = 3


def write_caltech101(root: Path) -> None:
    # torchvision drops BACKGROUND_Google and needs all 101 categories for CLIP's names.
    base = root / "caltech101"
    for folder in ("BACKGROUND_Google", *CALTECH_FOLDERS):
        for index in range(1, CALTECH_PER_CLASS + 1):
            write_image(base / "101_ObjectCategories" / folder / f"image_{index:04d}.jpg")
    # CoOp ignores BACKGROUND_Google and Faces_easy and renames four categories.
    coop = [("Faces", "face"), ("Leopards", "leopard"), ("Motorbikes", "motorbike")]
    items = [
        (f"{folder}/image_{index:04d}.jpg", label, classname)
        for label, (folder, classname) in enumerate(coop)
        for index in range(1, CALTECH_PER_CLASS + 1)
    ]
    write_coop_split(base / "split_zhou_Caltech101.json", *_coop_parts(items, 2, 0))


CIFAR_CLASSES = ["apple", "aquarium_fish", "baby", "bear"]


def write_cifar100(root: Path) -> None:
    base = root / "cifar-100-python"
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(100)
    for split, per_class in (("train", TRAIN_PER_CLASS), ("test", TEST_PER_CLASS)):
        labels = [label for label in range(len(CIFAR_CLASSES)) for _ in range(per_class)]
        batch = {
            "filenames": [f"{split}_{i}.png" for i in range(len(labels))],
            "batch_label": f"{split} batch",
            "fine_labels": labels,
            "coarse_labels": [0] * len(labels),
            "data": rng.integers(0, 256, (len(labels), 3 * 32 * 32), dtype=np.uint8),
        }
        (base / split).write_bytes(pickle.dumps(batch))
    meta = {"fine_label_names": CIFAR_CLASSES, "coarse_label_names": ["fruit", "fish", "people", "mammal"]}
    (base / "meta").write_bytes(pickle.dumps(meta))


def write_dtd(root: Path) -> None:
    data = root / "dtd" / "dtd"
    classes = ["banded", "blotchy", "braided"]
    per_split = {"train": TRAIN_PER_CLASS, "val": 1, "test": TEST_PER_CLASS}
    number = 0
    items = []
    for split, per_class in per_split.items():
        lines = []
        for label, name in enumerate(classes):
            for _ in range(per_class):
                number += 1
                relative = f"{name}/{name}_{number:04d}.jpg"
                write_image(data / "images" / relative)
                lines.append(relative)
                items.append((relative, label, name))
        write_text(data / "labels" / f"{split}1.txt", lines)
    write_coop_split(data / "split_zhou_DescribableTextures.json", *_coop_parts(items, 5, 2))


EUROSAT_FOLDERS = (
    "AnnualCrop",
    "Forest",
    "HerbaceousVegetation",
    "Highway",
    "Industrial",
    "Pasture",
    "PermanentCrop",
    "Residential",
    "River",
    "SeaLake",
)
EUROSAT_COOP_NAMES = (
    "Annual Crop Land",
    "Forest",
    "Herbaceous Vegetation Land",
    "Highway or Road",
    "Industrial Buildings",
    "Pasture Land",
    "Permanent Crop Land",
    "Residential Buildings",
    "River",
    "Sea or Lake",
)
EUROSAT_PER_CLASS = 5


def write_eurosat(root: Path) -> None:
    base = root / "eurosat"
    items = []
    for label, folder in enumerate(EUROSAT_FOLDERS):
        for index in range(1, EUROSAT_PER_CLASS + 1):
            relative = f"{folder}/{folder}_{index}.jpg"
            write_image(base / "2750" / relative)
            items.append((relative, label, EUROSAT_COOP_NAMES[label]))
    write_coop_split(base / "split_zhou_EuroSAT.json", *_coop_parts(items, 3, 1))


FLOWERS_COOP_NAMES = ["pink primrose", "hard-leaved pocket orchid", "canterbury bells"]


def write_flowers(root: Path) -> None:
    base = root / "flowers-102"
    per_split = {"trnid": TRAIN_PER_CLASS, "valid": 1, "tstid": TEST_PER_CLASS}
    labels, ids, items = [], {key: [] for key in per_split}, []
    for key, per_class in per_split.items():
        for label in range(1, len(FLOWERS_COOP_NAMES) + 1):
            for _ in range(per_class):
                labels.append(label)
                image_id = len(labels)
                ids[key].append(image_id)
                write_image(base / "jpg" / f"image_{image_id:05d}.jpg")
                items.append((f"image_{image_id:05d}.jpg", label - 1, FLOWERS_COOP_NAMES[label - 1]))
    scipy.io.savemat(base / "imagelabels.mat", {"labels": np.array([labels])})
    scipy.io.savemat(base / "setid.mat", {key: np.array([value]) for key, value in ids.items()})
    write_coop_split(base / "split_zhou_OxfordFlowers.json", *_coop_parts(items, 5, 2))


def write_food(root: Path) -> None:
    """Food-101."""
    base = root / "food-101"
    classes = ["apple_pie", "baby_back_ribs", "baklava"]
    image_id = 100_000
    items = []
    for split, per_class in (("train", TRAIN_PER_CLASS), ("test", TEST_PER_CLASS)):
        meta = {}
        for label, name in enumerate(classes):
            meta[name] = []
            for _ in range(per_class):
                image_id += 1
                write_image(base / "images" / name / f"{image_id}.jpg")
                meta[name].append(f"{name}/{image_id}")
                items.append((f"{name}/{image_id}.jpg", label, name))
        (base / "meta").mkdir(parents=True, exist_ok=True)
        (base / "meta" / f"{split}.json").write_text(json.dumps(meta))
    write_coop_split(base / "split_zhou_Food101.json", *_coop_parts(items, 4, 2))


def _write_idx(path: Path, array: np.ndarray) -> None:
    # IDX: two zero bytes, type 0x08 (uint8), number of dimensions, then big-endian sizes.
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def write_mnist(root: Path) -> None:
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(10)
    for split, per_class in (("train", TRAIN_PER_CLASS), ("t10k", TEST_PER_CLASS)):
        labels = np.repeat(np.arange(10), per_class)
        _write_idx(raw / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (len(labels), 28, 28)))
        _write_idx(raw / f"{split}-labels-idx1-ubyte", labels)


# (breed, species): the image-name prefix is capitalised for cats, lower case for dogs.
PET_BREEDS = [("Abyssinian", 1), ("american_bulldog", 2), ("american_pit_bull_terrier", 2)]


def write_oxford_pet(root: Path) -> None:
    base = root / "oxford-iiit-pet"
    number, items = 0, []
    for split, per_class in (("trainval", TRAIN_PER_CLASS), ("test", TEST_PER_CLASS)):
        lines = []
        for label, (breed, species) in enumerate(PET_BREEDS, start=1):
            for _ in range(per_class):
                number += 1
                image_id = f"{breed}_{number}"
                write_image(base / "images" / f"{image_id}.jpg")
                # image id, class (1-based), species (1 cat, 2 dog), breed id
                lines.append(f"{image_id} {label} {species} {label}")
                items.append((f"{image_id}.jpg", label - 1, breed.lower()))
        write_text(base / "annotations" / f"{split}.txt", lines)
    write_coop_split(base / "split_zhou_OxfordPets.json", *_coop_parts(items, 5, 2))


CAR_CLASSES = ["AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Acura TL Sedan 2012"]


def _cars_annotations(path: Path, labels) -> None:
    fields = [(name, "O") for name in ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "fname")]
    annotations = np.zeros((1, len(labels)), dtype=fields)
    for index, label in enumerate(labels):
        box = [np.array([[value]]) for value in (0, 0, IMAGE_SIZE[0] - 1, IMAGE_SIZE[1] - 1)]
        name = np.array([f"{index + 1:05d}.jpg"])
        annotations[0, index] = (*box, np.array([[label]], dtype=np.uint8), name)
    scipy.io.savemat(path, {"annotations": annotations})


def write_stanford_cars(root: Path) -> None:
    base = root / "stanford_cars"
    (base / "devkit").mkdir(parents=True, exist_ok=True)
    class_names = np.empty((1, len(CAR_CLASSES)), dtype=object)
    class_names[0, :] = CAR_CLASSES
    scipy.io.savemat(base / "devkit" / "cars_meta.mat", {"class_names": class_names})
    items = []
    for split, per_class, annotation_file in (
        ("cars_train", TRAIN_PER_CLASS, base / "devkit" / "cars_train_annos.mat"),
        ("cars_test", TEST_PER_CLASS, base / "cars_test_annos_withlabels.mat"),
    ):
        labels = [label for label in range(1, len(CAR_CLASSES) + 1) for _ in range(per_class)]
        _cars_annotations(annotation_file, labels)
        for index, label in enumerate(labels):
            write_image(base / split / f"{index + 1:05d}.jpg")
            # CoOp moves the year to the front of the class name.
            *model, year = CAR_CLASSES[label - 1].split(" ")
            items.append((f"{split}/{index + 1:05d}.jpg", label - 1, " ".join([year, *model]), split))
    train_val = [item[:3] for item in items if item[3] == "cars_train"]
    train, val, _ = _coop_parts(train_val, 5, 1)
    test = [list(item[:3]) for item in items if item[3] == "cars_test"]
    write_coop_split(base / "split_zhou_StanfordCars.json", train, val, test)


SUN_CLASSES = ["/a/abbey", "/a/airplane_cabin", "/a/apartment_building/outdoor"]
SUN_PER_CLASS = 10


def write_sun397(root: Path) -> None:
    base = root / "SUN397"
    write_text(base / "ClassName.txt", SUN_CLASSES)
    items = []
    for label, name in enumerate(SUN_CLASSES):
        for index in range(SUN_PER_CLASS):
            relative = f"{name[1:]}/sun_{zlib.crc32(f'{name}{index}'.encode()):08x}.jpg"
            write_image(base / relative)
            # CoOp: drop the letter folder, put indoor/outdoor first.
            coop_name = " ".join(reversed(name.split("/")[2:]))
            items.append((relative, label, coop_name))
    write_coop_split(base / "split_zhou_SUN397.json", *_coop_parts(items, 5, 2))


WRITERS = {
    "Aircraft": write_aircraft,
    "Caltech101": write_caltech101,
    "CIFAR100": write_cifar100,
    "DTD": write_dtd,
    "EuroSAT": write_eurosat,
    "Flowers": write_flowers,
    "Food": write_food,
    "MNIST": write_mnist,
    "OxfordPet": write_oxford_pet,
    "StanfordCars": write_stanford_cars,
    "SUN397": write_sun397,
}


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
    "xtail": {  # CoOp train/test lists of the split files above
        "Aircraft": (3, 18, 6),
        "Caltech101": (3, 6, 3),
        "DTD": (3, 15, 6),
        "EuroSAT": (10, 30, 10),
        "Flowers": (3, 15, 6),
        "Food": (3, 12, 6),
        "MNIST": (10, 60, 20),
        "OxfordPet": (3, 15, 3),
        "StanfordCars": (3, 15, 6),
        "SUN397": (3, 15, 9),
    },
}


def accept_fixture_checksums(monkeypatch) -> None:
    """Fixture files cannot carry the real files' MD5 sums, which torchvision's CIFAR100
    and Flowers102 verify; let those two accept any file that exists."""
    for module in (cifar, flowers102):
        monkeypatch.setattr(module, "check_integrity", lambda fpath, md5=None: os.path.isfile(fpath))
