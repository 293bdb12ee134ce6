"""Each dataset's class names and train/test samples under a protocol, without decoding images.

`load_splits` reads a dataset through its record's reader (:mod:`codyra.data.datasets`): MTIL
through torchvision's class (download=False), X-TAIL through CoOp's split file where the record
names one (all but Aircraft, whose official split CoOp uses as torchvision does, and MNIST). The
helpers here are the readers' common parts.

No reader verifies a file's MD5 sum, as torchvision's CIFAR100, Flowers102 and Places365 would:
a dataset is any copy in the layout (converted, relinked, a rehearsal's fixture), and
`codyra data check` compares what it holds with the paper's sizes and classes. CIFAR100's batches
are pickles: they are read with numpy's array reconstruction as the only callable a file may
name (:class:`_ArrayUnpickler`), so an unverified file cannot run code.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from codyra.data.catalog import RECORDS, XTAIL, check_name
from codyra.data.datasets import CoopSplit, DatasetSplits, ReadRequest
from codyra.data.errors import DatasetNotFoundError
from codyra.data.presence import dataset_error, require_present
from codyra.data.samples import ImageFiles, Samples, TorchvisionImages

SUN397_ORDERS = {"sorted": "sorted", "filesystem": "listed"}  # data.sun397_order -> random_split_80_20's order


def load_splits(name: str, protocol: str, root: str | Path, sun397_order: str = "sorted") -> DatasetSplits:
    """Enumerate one dataset (SUN397's random split over its files in ``sun397_order``: config key
    data.sun397_order); raises DatasetNotFoundError when it is absent or unreadable."""
    check_name(name, protocol)
    if sun397_order not in SUN397_ORDERS:
        raise ValueError(f"SUN397's split order is one of {', '.join(SUN397_ORDERS)}, got {sun397_order!r}")
    root = Path(root).expanduser().absolute()
    require_present(name, protocol, root)
    record = RECORDS[name]
    try:
        if protocol == XTAIL and record.coop is not None:
            splits = _coop(record.coop, root)
        else:
            splits = record.reader(ReadRequest(root, protocol, sun397_order))
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


def path_only(path):
    """A torchvision `loader` that hands back the path, so listing a dataset decodes nothing."""
    return path


def file_samples(root: Path, dataset) -> Samples:
    pairs = [dataset[i] for i in range(len(dataset))]
    return files(root, [path for path, _ in pairs], [label for _, label in pairs])


def file_splits(root: Path, classes, train, test) -> DatasetSplits:
    """The splits of a dataset whose train and test parts are torchvision datasets of paths (`path_only`)."""
    return DatasetSplits(tuple(classes), file_samples(root, train), file_samples(root, test))


def files(root: Path, paths, labels) -> Samples:
    keys = tuple(Path(path).relative_to(root).as_posix() for path in paths)
    return Samples(ImageFiles(root), keys, tuple(int(label) for label in labels))


def same_classes(train, test) -> list[str]:
    # These classes derive the class list from the split file itself; labels only agree
    # between splits when both splits contain the same classes.
    if train.classes != test.classes:
        raise ValueError(f"train and test splits list different classes ({len(train.classes)} vs {len(test.classes)})")
    return train.classes


def mtil_names(classes) -> tuple[str, ...]:
    """MTIL's treatment of torchvision's class names."""
    return tuple(name.replace("_", " ") for name in classes)


def hand_written(classnames: tuple[str, ...], found: int) -> tuple[str, ...]:
    """CLIP's class-name list of a dataset whose reader found ``found`` classes."""
    if found != len(classnames):
        raise ValueError(f"found {found} classes, CLIP's class-name list has {len(classnames)}")
    return classnames


def in_memory(dataset) -> Samples:
    labels = dataset.targets  # a tensor for MNIST, a list for CIFAR100
    labels = labels.tolist() if hasattr(labels, "tolist") else list(labels)
    return Samples(TorchvisionImages(dataset), tuple(range(len(dataset))), tuple(labels))


def heldout_only(root: Path, classes, test: Samples) -> DatasetSplits:
    """A held-out dataset's splits: only its test split is read."""
    return DatasetSplits(tuple(classes), Samples(ImageFiles(root), (), ()), test)


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


def unpickle_arrays(path: Path) -> dict:
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


def cifar_split(base: Path, split: str) -> _CifarImages:
    batch = unpickle_arrays(base / split)
    # torchvision's reshape: rows of 3 x 32 x 32 channel planes, to height x width x channel
    data = np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
    labels = [int(label) for label in batch["fine_labels"]]
    if len(labels) != len(data):
        raise ValueError(f"{base / split} holds {len(data)} images but {len(labels)} labels")
    return _CifarImages(data, labels)


def _coop(split: CoopSplit, root: Path) -> DatasetSplits:
    """Read a CoOp split file: {"train"|"val"|"test": [[relative_path, label, classname], ...]}."""
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
    classes = tuple(label_names[label] + split.classname_suffix for label in range(len(label_names)))
    return DatasetSplits(classes, parts["train"], parts["test"])
