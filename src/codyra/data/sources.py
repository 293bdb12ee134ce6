"""Each dataset's class names and train/test samples under a protocol, without decoding images.

MTIL reads every dataset through torchvision's class (download=False). X-TAIL reads CoOp's
split files, except for Aircraft (CoOp uses the official split, as torchvision does) and
MNIST (torchvision).

No reader verifies a file's MD5 sum, as torchvision's CIFAR100, Flowers102 and Places365 would:
a dataset is any copy in the layout (converted, relinked, a rehearsal's fixture), and
`codyra data check` compares what it holds with the paper's sizes and classes. CIFAR100's batches
are pickles: they are read with numpy's array reconstruction as the only callable a file may
name (:class:`_ArrayUnpickler`), so an unverified file cannot run code.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from torchvision import datasets

from codyra.data import classnames as names
from codyra.data.catalog import COOP_SPLITS, XTAIL, check_name
from codyra.data.errors import DatasetNotFoundError
from codyra.data.presence import dataset_error, require_present
from codyra.data.samples import ImageFiles, Samples, TorchvisionImages, random_split_80_20

SUN397_ORDERS = {"sorted": "sorted", "filesystem": "listed"}  # data.sun397_order -> random_split_80_20's order


@dataclass(frozen=True)
class DatasetSplits:
    classnames: tuple[str, ...]
    train: Samples
    test: Samples


def load_splits(name: str, protocol: str, root: str | Path, sun397_order: str = "sorted") -> DatasetSplits:
    """Enumerate one dataset (SUN397's random split over its files in ``sun397_order``: config key
    data.sun397_order); raises DatasetNotFoundError when it is absent or unreadable."""
    check_name(name, protocol)
    if sun397_order not in SUN397_ORDERS:
        raise ValueError(f"SUN397's split order is one of {', '.join(SUN397_ORDERS)}, got {sun397_order!r}")
    root = Path(root).expanduser().absolute()
    require_present(name, protocol, root)
    try:
        if protocol == XTAIL and name in COOP_SPLITS:
            splits = _coop(name, root)
        elif name == "SUN397":
            splits = _sun397(root, sun397_order)
        else:
            splits = _TORCHVISION[name](root, protocol)
        _check_labels(splits)
    except DatasetNotFoundError:
        raise
    except (RuntimeError, KeyError, OSError, ValueError, EOFError, pickle.UnpicklingError) as error:
        # torchvision's "not found", a malformed annotation, split or batch file, ...
        raise dataset_error(name, protocol, root, problem=f"could not be read: {error}") from error
    return splits


def _check_labels(splits: DatasetSplits) -> None:
    for part, samples in (("train", splits.train), ("test", splits.test)):
        stray = sorted({label for label in samples.labels if not 0 <= label < len(splits.classnames)})
        if stray:
            raise ValueError(f"{part} labels {stray[:5]} fall outside the {len(splits.classnames)} classes")


def _path_only(path):
    """A torchvision `loader` that hands back the path, so listing a dataset decodes nothing."""
    return path


def _file_samples(root: Path, dataset) -> Samples:
    pairs = [dataset[i] for i in range(len(dataset))]
    return _files(root, [path for path, _ in pairs], [label for _, label in pairs])


def _files(root: Path, paths, labels) -> Samples:
    keys = tuple(Path(path).relative_to(root).as_posix() for path in paths)
    return Samples(ImageFiles(root), keys, tuple(int(label) for label in labels))


def _same_classes(train, test) -> list[str]:
    # These classes derive the class list from the split file itself; labels only agree
    # between splits when both splits contain the same classes.
    if train.classes != test.classes:
        raise ValueError(f"train and test splits list different classes ({len(train.classes)} vs {len(test.classes)})")
    return train.classes


def _mtil_names(classes) -> tuple[str, ...]:
    return names.underscores_to_spaces(classes)


def _hand_written(dataset: str, found: int) -> tuple[str, ...]:
    expected = names.HAND_WRITTEN[dataset]
    if found != len(expected):
        raise ValueError(f"found {found} classes, CLIP's class-name list has {len(expected)}")
    return expected


def _aircraft(root: Path, protocol: str) -> DatasetSplits:
    train, test = (datasets.FGVCAircraft(str(root), split=split, loader=_path_only) for split in ("train", "test"))
    classes = tuple(train.classes) if protocol == XTAIL else _mtil_names(train.classes)
    return DatasetSplits(classes, _file_samples(root, train), _file_samples(root, test))


def _caltech101(root: Path, protocol: str) -> DatasetSplits:
    dataset = datasets.Caltech101(str(root))
    # torchvision's own file naming: image_0001.jpg ... per category folder.
    paths = [
        root / "caltech101" / "101_ObjectCategories" / dataset.categories[label] / f"image_{index:04d}.jpg"
        for index, label in zip(dataset.index, dataset.y, strict=True)
    ]
    train, test = random_split_80_20(_files(root, paths, dataset.y))
    return DatasetSplits(_hand_written("Caltech101", len(dataset.categories)), train, test)


def _in_memory(dataset) -> Samples:
    labels = dataset.targets  # a tensor for MNIST, a list for CIFAR100
    labels = labels.tolist() if hasattr(labels, "tolist") else list(labels)
    return Samples(TorchvisionImages(dataset), tuple(range(len(dataset))), tuple(labels))


# The globals of CIFAR's batch files: numpy's array reconstruction, which pickles name
# numpy.core.multiarray._reconstruct (numpy 1.x) or numpy._core.multiarray._reconstruct (2.x).
_RECONSTRUCT = np.empty(0).__reduce__()[0]
_CIFAR_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class _ArrayUnpickler(pickle.Unpickler):
    """Reads a pickle that may name numpy's array reconstruction and nothing else callable (a
    pickle can name any callable, which loading would run)."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR batch file never does")
        return _CIFAR_GLOBALS[module, name]


def _unpickle_arrays(path: Path) -> dict:
    with open(path, "rb") as file:
        content = _ArrayUnpickler(file, encoding="latin1").load()  # CIFAR's files are Python 2 pickles
    if not isinstance(content, dict):
        raise pickle.UnpicklingError(f"{path} holds a {type(content).__name__}, not a CIFAR batch (a dict)")
    return content


@dataclass(frozen=True, eq=False)
class _CifarImages:
    """A CIFAR split as torchvision's CIFAR100 holds it: ``data`` [N, 32, 32, 3] uint8, ``targets``."""

    data: np.ndarray
    targets: list[int]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        return Image.fromarray(self.data[index]), self.targets[index]


def _cifar_split(base: Path, split: str) -> _CifarImages:
    batch = _unpickle_arrays(base / split)
    # torchvision's reshape: rows of 3 x 32 x 32 channel planes, to height x width x channel
    data = np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
    labels = [int(label) for label in batch["fine_labels"]]
    if len(labels) != len(data):
        raise ValueError(f"{base / split} holds {len(data)} images but {len(labels)} labels")
    return _CifarImages(data, labels)


def _cifar100(root: Path, protocol: str) -> DatasetSplits:
    base = root / "cifar-100-python"
    train, test = _cifar_split(base, "train"), _cifar_split(base, "test")
    classes = [str(name) for name in _unpickle_arrays(base / "meta")["fine_label_names"]]
    return DatasetSplits(_mtil_names(classes), _in_memory(train), _in_memory(test))


def _dtd(root: Path, protocol: str) -> DatasetSplits:
    train, test = (datasets.DTD(str(root), split=split, partition=1, loader=_path_only) for split in ("train", "test"))
    classes = _mtil_names(_same_classes(train, test))
    return DatasetSplits(classes, _file_samples(root, train), _file_samples(root, test))


def _eurosat(root: Path, protocol: str) -> DatasetSplits:
    dataset = datasets.EuroSAT(str(root), loader=_path_only)
    samples = _files(root, [path for path, _ in dataset.samples], dataset.targets)
    train, test = random_split_80_20(samples)
    return DatasetSplits(_hand_written("EuroSAT", len(dataset.classes)), train, test)


class _Flowers102(datasets.Flowers102):
    """torchvision's reader, its files checked to exist instead of their MD5 sums (module doc)."""

    def _check_integrity(self) -> bool:
        files = (self._base_folder / self._file_dict[key][0] for key in ("label", "setid"))
        return self._images_folder.is_dir() and all(path.is_file() for path in files)


def _flowers(root: Path, protocol: str) -> DatasetSplits:
    # Labels come from imagelabels.mat (1..102); CLIP's list names all 102 of them.
    train, test = (_Flowers102(str(root), split=split, loader=_path_only) for split in ("train", "test"))
    return DatasetSplits(names.FLOWERS, _file_samples(root, train), _file_samples(root, test))


def _food(root: Path, protocol: str) -> DatasetSplits:
    train, test = (datasets.Food101(str(root), split=split, loader=_path_only) for split in ("train", "test"))
    classes = _mtil_names(_same_classes(train, test))
    return DatasetSplits(classes, _file_samples(root, train), _file_samples(root, test))


def _mnist(root: Path, protocol: str) -> DatasetSplits:
    train, test = (datasets.MNIST(str(root), train=flag) for flag in (True, False))
    classes = names.xtail_mnist(train.classes) if protocol == XTAIL else _mtil_names(train.classes)
    return DatasetSplits(classes, _in_memory(train), _in_memory(test))


def _oxford_pet(root: Path, protocol: str) -> DatasetSplits:
    train, test = (datasets.OxfordIIITPet(str(root), split=split) for split in ("trainval", "test"))
    classes = _mtil_names(_same_classes(train, test))
    # The class exposes no loader hook and decodes in __getitem__; its file list and labels
    # are only available as attributes (stable across the torchvision versions we pin).
    return DatasetSplits(
        classes,
        _files(root, train._images, train._labels),
        _files(root, test._images, test._labels),
    )


def _stanford_cars(root: Path, protocol: str) -> DatasetSplits:
    train, test = (datasets.StanfordCars(str(root), split=split, loader=_path_only) for split in ("train", "test"))
    return DatasetSplits(_mtil_names(train.classes), _file_samples(root, train), _file_samples(root, test))


def _sun397(root: Path, order: str = "sorted") -> DatasetSplits:
    """torchvision's SUN397 lists its files as ``Path.rglob`` finds them, in the file system's order."""
    dataset = datasets.SUN397(str(root), loader=_path_only)
    train, test = random_split_80_20(_file_samples(root, dataset), SUN397_ORDERS[order])
    return DatasetSplits(_mtil_names(dataset.classes), train, test)


def _heldout_only(root: Path, classes, test: Samples) -> DatasetSplits:
    return DatasetSplits(tuple(classes), Samples(ImageFiles(root), (), ()), test)


class _Places365(datasets.Places365):
    """torchvision's reader, its files checked to exist instead of their MD5 sums (module doc)."""

    def _check_integrity(self, file: str, md5: str, download: bool) -> bool:
        if not os.path.isfile(file):
            raise RuntimeError(f"The file {file} does not exist")
        return True


def _places365(root: Path, protocol: str) -> DatasetSplits:
    """Places365's validation images (256 px); class names from the dataset's own
    categories_places365.txt ("/b/bakery/shop" -> "bakery shop")."""
    val = _Places365(str(root / "places365"), split="val", small=True, loader=_path_only)
    classes = [name[3:].replace("/", " ").replace("_", " ") for name in val.classes]
    return _heldout_only(root, classes, _files(root, [path for path, _ in val.imgs], val.targets))


def _imagenet(root: Path, protocol: str) -> DatasetSplits:
    """ILSVRC2012 val sorted into WordNet-id folders; their sorted order is the standard label
    order, which CLIP's class-name list (bundled with open_clip) follows."""
    from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES

    val = datasets.ImageFolder(str(root / "imagenet" / "val"), loader=_path_only)
    if len(val.classes) != len(IMAGENET_CLASSNAMES):
        raise ValueError(
            f"imagenet/val has {len(val.classes)} class folders, ImageNet-1k has {len(IMAGENET_CLASSNAMES)}"
        )
    return _heldout_only(root, IMAGENET_CLASSNAMES, _file_samples(root, val))


_TORCHVISION = {  # and SUN397 (_sun397, with its order)
    "Aircraft": _aircraft,
    "Caltech101": _caltech101,
    "CIFAR100": _cifar100,
    "DTD": _dtd,
    "EuroSAT": _eurosat,
    "Flowers": _flowers,
    "Food": _food,
    "MNIST": _mnist,
    "OxfordPet": _oxford_pet,
    "StanfordCars": _stanford_cars,
    "Places365": _places365,
    "ImageNet": _imagenet,
}


def _coop(name: str, root: Path) -> DatasetSplits:
    """Read a CoOp split file: {"train"|"val"|"test": [[relative_path, label, classname], ...]}."""
    split = COOP_SPLITS[name]
    with open(root / split.json, encoding="utf-8") as file:
        content = json.load(file)
    if not isinstance(content, dict) or not {"train", "test"} <= content.keys():
        raise ValueError(f"{split.json} is not a CoOp split file (needs 'train' and 'test' lists)")

    # "val" is read only for its class names: the protocols train on "train", test on "test".
    label_names: dict[int, str] = {}
    parts = {}
    for part in ("train", "val", "test"):
        keys, labels = [], []
        for entry in content.get(part, []):
            if not (isinstance(entry, list) and len(entry) == 3):
                raise ValueError(f"{split.json}: {part} entry {entry!r} is not [path, label, classname]")
            path, label, classname = entry
            known = label_names.setdefault(int(label), classname)
            if known != classname:
                raise ValueError(f"{split.json}: label {label} is named both {known!r} and {classname!r}")
            keys.append(f"{split.images}/{path}")
            labels.append(int(label))
        parts[part] = Samples(ImageFiles(root), tuple(keys), tuple(labels))

    if sorted(label_names) != list(range(len(label_names))):
        raise ValueError(f"{split.json}: labels are not 0..{len(label_names) - 1}")
    classes = tuple(label_names[label] for label in range(len(label_names)))
    if name == "EuroSAT":
        classes = tuple(classname + names.XTAIL_EUROSAT_SUFFIX for classname in classes)
    return DatasetSplits(classes, parts["train"], parts["test"])
