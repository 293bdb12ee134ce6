"""Every dataset a config names, written small in its real on-disk layout.

Each ``write_<dataset>(root, train_per_class)`` writes the files the real reader reads (annotation
files, .mat files, CIFAR's pickled batches, IDX files, JPEGs; the layouts of
each dataset's module of :mod:`codyra.data.datasets`) for a few classes of small noise images, and CoOp's
``split_zhou_*.json`` file where X-TAIL reads one, so one folder serves both protocols. Every
class has at least ``train_per_class`` training images (a k-shot draw needs k) and
``TEST_PER_CLASS`` test images under each protocol's split: where ZSCL's 80/20 random split
divides a dataset (Caltech101, EuroSAT, SUN397 under MTIL), each class gets the fewest images for
which that split leaves it both. The held-out ImageNet and Places365 name all their classes (1,000
and 365, as the readers require) with a few images; TRACE's task folders are the mini TRACE's
tasks (:mod:`codyra.mini.trace.tasks`) in TRACE's format.

:func:`write_datasets` writes all of a config's; the readers of the paper grid read them
(``codyra data check`` passes on them).
"""

from __future__ import annotations

import json
import pickle
import struct
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

from codyra.data.catalog import PROTOCOLS
from codyra.data.presence import benchmark_datasets
from codyra.data.reference import CC_CAPTION_COLUMN, CC_CAPTIONS, IMAGENET_TRAIN
from codyra.data.samples import ImageFiles, Samples, random_split_80_20

IMAGE_SIZE = (20, 16)  # width, height: not square, so resizing and crops do something
TEST_PER_CLASS = 2
VAL_PER_CLASS = 1  # the splits that have a validation part (DTD, Flowers): one image per class
DEFAULT_TRAIN_PER_CLASS = 6  # enough for a 5-shot draw


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


def _coop_parts(items, train_per_class: int):
    """[(path, label, classname)] split per class as CoOp's files are: its first
    ``train_per_class`` items train, its last ``TEST_PER_CLASS`` test, any between validate."""
    parts = {"train": [], "val": [], "test": []}
    by_label: dict[int, list] = {}
    for item in items:
        by_label.setdefault(item[1], []).append(list(item))
    for members in by_label.values():
        if len(members) < train_per_class + TEST_PER_CLASS:
            raise ValueError(f"class {members[0][2]!r} has {len(members)} images, fewer than its splits need")
        parts["train"] += members[:train_per_class]
        parts["val"] += members[train_per_class:-TEST_PER_CLASS]
        parts["test"] += members[-TEST_PER_CLASS:]
    return parts["train"], parts["val"], parts["test"]


def _images_per_class(root: Path, classes: int, train_per_class: int, key: Callable[[int, int], str]) -> int:
    """The fewest images per class (``key(label, index)`` their paths under ``root``, the reader's
    keys) for which ZSCL's 80/20 split leaves every class ``train_per_class`` training and
    ``TEST_PER_CLASS`` test images; the split is a function of the keys alone, so no file is needed."""
    per_class = train_per_class + TEST_PER_CLASS
    while True:
        labels = [label for label in range(classes) for _ in range(per_class)]
        keys = [key(label, index) for label in range(classes) for index in range(per_class)]
        train, test = random_split_80_20(Samples(ImageFiles(root), tuple(keys), tuple(labels)))
        counts = Counter(train.labels), Counter(test.labels)
        if all(counts[0][c] >= train_per_class and counts[1][c] >= TEST_PER_CLASS for c in range(classes)):
            return per_class
        per_class += 1


def write_aircraft(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    data = root / "fgvc-aircraft-2013b" / "data"
    variants = ["707-320", "A300B4", "Cessna 172"]
    write_text(data / "variants.txt", variants)
    image_id = 1_000_000
    for split, per_class in (("train", train_per_class), ("test", TEST_PER_CLASS)):
        lines = []
        for variant in variants:
            for _ in range(per_class):
                image_id += 1
                write_image(data / "images" / f"{image_id}.jpg")
                lines.append(f"{image_id} {variant}")
        write_text(data / f"images_variant_{split}.txt", lines)


# torchvision's categories (the folders of 101_ObjectCategories but BACKGROUND_Google, sorted):
# all 101, as CLIP's class-name list names them.
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
CALTECH_IMAGES = "caltech101/101_ObjectCategories"


def write_caltech101(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    def key(label: int, index: int) -> str:
        return f"{CALTECH_IMAGES}/{CALTECH_FOLDERS[label]}/image_{index + 1:04d}.jpg"

    per_class = _images_per_class(root, len(CALTECH_FOLDERS), train_per_class, key)
    for label in range(len(CALTECH_FOLDERS)):
        for index in range(per_class):
            write_image(root / key(label, index))
    write_image(root / CALTECH_IMAGES / "BACKGROUND_Google" / "image_0001.jpg")  # torchvision skips it
    # CoOp ignores BACKGROUND_Google and Faces_easy and renames four categories.
    coop = [("Faces", "face"), ("Leopards", "leopard"), ("Motorbikes", "motorbike")]
    items = [
        (f"{folder}/image_{index:04d}.jpg", label, classname)
        for label, (folder, classname) in enumerate(coop)
        for index in range(1, per_class + 1)
    ]
    write_coop_split(root / "caltech101" / "split_zhou_Caltech101.json", *_coop_parts(items, train_per_class))


CIFAR_CLASSES = ["apple", "aquarium_fish", "baby", "bear"]


def write_cifar100(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    base = root / "cifar-100-python"
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(100)
    for split, per_class in (("train", train_per_class), ("test", TEST_PER_CLASS)):
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


def write_dtd(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    data = root / "dtd" / "dtd"
    classes = ["banded", "blotchy", "braided"]
    per_split = {"train": train_per_class, "val": VAL_PER_CLASS, "test": TEST_PER_CLASS}
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
    write_coop_split(data / "split_zhou_DescribableTextures.json", *_coop_parts(items, train_per_class))


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


def write_eurosat(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    def relative(label: int, index: int) -> str:
        folder = EUROSAT_FOLDERS[label]
        return f"{folder}/{folder}_{index + 1}.jpg"

    per_class = _images_per_class(
        root, len(EUROSAT_FOLDERS), train_per_class, lambda c, i: f"eurosat/2750/{relative(c, i)}"
    )
    items = []
    for label in range(len(EUROSAT_FOLDERS)):
        for index in range(per_class):
            write_image(root / "eurosat" / "2750" / relative(label, index))
            items.append((relative(label, index), label, EUROSAT_COOP_NAMES[label]))
    write_coop_split(root / "eurosat" / "split_zhou_EuroSAT.json", *_coop_parts(items, train_per_class))


FLOWERS_COOP_NAMES = ["pink primrose", "hard-leaved pocket orchid", "canterbury bells"]


def write_flowers(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    base = root / "flowers-102"
    per_split = {"trnid": train_per_class, "valid": VAL_PER_CLASS, "tstid": TEST_PER_CLASS}
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
    write_coop_split(base / "split_zhou_OxfordFlowers.json", *_coop_parts(items, train_per_class))


def write_food(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    """Food-101."""
    base = root / "food-101"
    classes = ["apple_pie", "baby_back_ribs", "baklava"]
    image_id = 100_000
    items = []
    for split, per_class in (("train", train_per_class), ("test", TEST_PER_CLASS)):
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
    write_coop_split(base / "split_zhou_Food101.json", *_coop_parts(items, train_per_class))


def _write_idx(path: Path, array: np.ndarray) -> None:
    # IDX: two zero bytes, type 0x08 (uint8), number of dimensions, then big-endian sizes.
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def write_mnist(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(10)
    for split, per_class in (("train", train_per_class), ("t10k", TEST_PER_CLASS)):
        labels = np.repeat(np.arange(10), per_class)
        _write_idx(raw / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (len(labels), 28, 28)))
        _write_idx(raw / f"{split}-labels-idx1-ubyte", labels)


# (breed, species): the image-name prefix is capitalised for cats, lower case for dogs.
PET_BREEDS = [("Abyssinian", 1), ("american_bulldog", 2), ("american_pit_bull_terrier", 2)]


def write_oxford_pet(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    base = root / "oxford-iiit-pet"
    number, items = 0, []
    for split, per_class in (("trainval", train_per_class), ("test", TEST_PER_CLASS)):
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
    write_coop_split(base / "split_zhou_OxfordPets.json", *_coop_parts(items, train_per_class))


CAR_CLASSES = ["AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Acura TL Sedan 2012"]


def _cars_annotations(path: Path, labels) -> None:
    fields = [(name, "O") for name in ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "fname")]
    annotations = np.zeros((1, len(labels)), dtype=fields)
    for index, label in enumerate(labels):
        box = [np.array([[value]]) for value in (0, 0, IMAGE_SIZE[0] - 1, IMAGE_SIZE[1] - 1)]
        name = np.array([f"{index + 1:05d}.jpg"])
        annotations[0, index] = (*box, np.array([[label]], dtype=np.uint8), name)
    scipy.io.savemat(path, {"annotations": annotations})


def write_stanford_cars(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    base = root / "stanford_cars"
    (base / "devkit").mkdir(parents=True, exist_ok=True)
    class_names = np.empty((1, len(CAR_CLASSES)), dtype=object)
    class_names[0, :] = CAR_CLASSES
    scipy.io.savemat(base / "devkit" / "cars_meta.mat", {"class_names": class_names})
    coop = {"cars_train": [], "cars_test": []}
    for split, per_class, annotation_file in (
        ("cars_train", train_per_class, base / "devkit" / "cars_train_annos.mat"),
        ("cars_test", TEST_PER_CLASS, base / "cars_test_annos_withlabels.mat"),
    ):
        labels = [label for label in range(1, len(CAR_CLASSES) + 1) for _ in range(per_class)]
        _cars_annotations(annotation_file, labels)
        for index, label in enumerate(labels):
            write_image(base / split / f"{index + 1:05d}.jpg")
            # CoOp moves the year to the front of the class name.
            *model, year = CAR_CLASSES[label - 1].split(" ")
            coop[split].append([f"{split}/{index + 1:05d}.jpg", label - 1, " ".join([year, *model])])
    # CoOp: train (and val) from cars_train, test = cars_test
    write_coop_split(base / "split_zhou_StanfordCars.json", coop["cars_train"], [], coop["cars_test"])


SUN_CLASSES = ["/a/abbey", "/a/airplane_cabin", "/a/apartment_building/outdoor"]


def write_sun397(root: Path, train_per_class: int = DEFAULT_TRAIN_PER_CLASS) -> None:
    base = root / "SUN397"
    write_text(base / "ClassName.txt", SUN_CLASSES)

    def relative(label: int, index: int) -> str:
        name = SUN_CLASSES[label]
        return f"{name[1:]}/sun_{zlib.crc32(f'{name}{index}'.encode()):08x}.jpg"

    per_class = _images_per_class(root, len(SUN_CLASSES), train_per_class, lambda c, i: f"SUN397/{relative(c, i)}")
    items = []
    for label, name in enumerate(SUN_CLASSES):
        for index in range(per_class):
            write_image(base / relative(label, index))
            # CoOp: drop the letter folder, put indoor/outdoor first.
            items.append((relative(label, index), label, " ".join(reversed(name.split("/")[2:]))))
    write_coop_split(base / "split_zhou_SUN397.json", *_coop_parts(items, train_per_class))


# Places365's real category file names 365 scenes ("/a/airfield 0", ...); these stand in for them.
PLACES_CATEGORIES = tuple(f"/s/scene_{k:03d}" for k in range(365))
PLACES_WITH_IMAGES = 3  # categories with test images


def write_places365(root: Path, categories=PLACES_CATEGORIES) -> None:
    """Places365's validation split (256 px images), ``TEST_PER_CLASS`` images for each of its
    first ``PLACES_WITH_IMAGES`` categories."""
    base = root / "places365"
    write_text(base / "categories_places365.txt", [f"{name} {k}" for k, name in enumerate(categories)])
    labels = [label for label in range(min(PLACES_WITH_IMAGES, len(categories))) for _ in range(TEST_PER_CLASS)]
    files = [f"Places365_val_{k:08d}.jpg" for k in range(1, len(labels) + 1)]
    write_text(base / "places365_val.txt", [f"{name} {label}" for name, label in zip(files, labels, strict=True)])
    for name in files:
        write_image(base / "val_256" / name)


def imagenet_wnid(label: int) -> str:
    """A stand-in WordNet id; sorted, they are in label order, as the real ones are."""
    return f"n{label:08d}"


def write_imagenet(root: Path, classes: int = 1000) -> None:
    """ImageNet's validation split sorted into WordNet-id folders, one image each (the reader
    requires all 1,000 class folders, and a folder with an image)."""
    for label in range(classes):
        write_image(root / "imagenet" / "val" / imagenet_wnid(label) / f"ILSVRC2012_val_{label + 1:08d}.JPEG")


REFERENCE_CLASSES = 3
CAPTIONS = ("a dog on a beach", "a red car parked in a street", "two birds on a branch", "a bowl of soup")


def write_reference(root: Path) -> None:
    """ZSCL's reference data (data.reference kind zscl): ImageNet training images in WordNet-id
    folders, and Conceptual Captions' validation captions as ZSCL reads them (tab-separated, a
    ``title`` column)."""
    for label in range(REFERENCE_CLASSES):
        wnid = imagenet_wnid(label)
        for index in range(TEST_PER_CLASS):
            write_image(root / IMAGENET_TRAIN / wnid / f"{wnid}_{index + 1}.JPEG")
    rows = [f"{CC_CAPTION_COLUMN}\tfilepath", *(f"{text}\t{k}.jpg" for k, text in enumerate(CAPTIONS))]
    write_text(root / CC_CAPTIONS, rows)


def write_trace(root: Path, tasks, train_examples: int) -> None:
    """The mini TRACE's task folders, in TRACE's format: ``train_examples`` training examples and
    ``TEST_PER_CLASS`` evaluation and test examples per task."""
    from codyra.mini.trace.tasks import MINI_TRACE_TASKS, write_mini_trace

    unknown = [task for task in tasks if task not in MINI_TRACE_TASKS]
    if unknown:
        raise ValueError(f"no fixture for the TRACE tasks {unknown}; the fixtures are TRACE's tasks {MINI_TRACE_TASKS}")
    write_mini_trace(root, seed=0, sizes={"train": train_examples, "eval": TEST_PER_CLASS, "test": TEST_PER_CLASS})


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
HELDOUT_WRITERS = {"Places365": write_places365, "ImageNet": write_imagenet}


def write_datasets(cfg: dict, root: Path, *, train_per_class: int) -> None:
    """Write under ``root`` (the data root) every dataset ``cfg`` (a validated config) names, each
    with at least ``train_per_class`` training images per class (TRACE: training examples per task):
    mtil / xtail: its tasks, held-out tasks and single-task studies' tasks and reference tasks, and
    ZSCL's reference data when data.reference is of kind zscl; trace: its task folders."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    kind = cfg["data"]["kind"]
    if kind == "trace":
        write_trace(root, list(cfg["tasks"]), train_per_class)
        return
    if kind not in PROTOCOLS:
        raise ValueError(f"data.kind {kind!r} reads no datasets from disk; fixtures exist for {PROTOCOLS} and trace")
    for name in benchmark_datasets(cfg):
        if name in WRITERS:
            WRITERS[name](root, train_per_class)
        else:
            HELDOUT_WRITERS[name](root)
    reference = cfg["data"]["reference"]
    if reference is not None and reference["kind"] == "zscl":
        write_reference(root)
