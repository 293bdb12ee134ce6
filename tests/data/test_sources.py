"""Every dataset loads from its real on-disk layout with the right classes and splits."""

import os
import pickle
import random
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
import torch
from torchvision import datasets
from torchvision.datasets import cifar

from codyra.data.errors import DatasetNotFoundError
from codyra.data.samples import ImageFiles, Samples, random_split_80_20
from codyra.data.sources import load_splits
from codyra.rehearsal.datasets import write_cifar100

from .fixtures import SIZES


@pytest.mark.parametrize(
    ("protocol", "name"), [(protocol, name) for protocol, table in SIZES.items() for name in table]
)
def test_each_dataset_loads_with_its_classes_and_split_sizes(data_root, protocol, name):
    splits = load_splits(name, protocol, data_root)
    assert (len(splits.classnames), len(splits.train), len(splits.test)) == SIZES[protocol][name]
    if isinstance(splits.train.images, ImageFiles):  # CIFAR100/MNIST index two separate arrays
        assert set(splits.train.keys).isdisjoint(splits.test.keys)
    image = splits.train.images.load(splits.train.keys[0])
    assert image.mode == "RGB"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Aircraft", ("707-320", "A300B4", "Cessna 172")),
        ("CIFAR100", ("apple", "aquarium fish", "baby", "bear")),
        ("DTD", ("banded", "blotchy", "braided")),
        ("Food", ("apple pie", "baby back ribs", "baklava")),
        ("OxfordPet", ("Abyssinian", "American Bulldog", "American Pit Bull Terrier")),
        ("StanfordCars", ("AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Acura TL Sedan 2012")),
        ("SUN397", ("abbey", "airplane cabin", "apartment building/outdoor")),
        (
            "MNIST",
            (
                "0 - zero",
                "1 - one",
                "2 - two",
                "3 - three",
                "4 - four",
                "5 - five",
                "6 - six",
                "7 - seven",
                "8 - eight",
                "9 - nine",
            ),
        ),
    ],
)
def test_mtil_uses_torchvision_names_with_spaces(data_root, name, expected):
    assert load_splits(name, "mtil", data_root).classnames == expected


def test_mtil_uses_clip_lists_for_caltech_eurosat_flowers(data_root):
    caltech = load_splits("Caltech101", "mtil", data_root).classnames
    assert caltech[:3] == ("off-center face", "centered face", "leopard")
    assert load_splits("EuroSAT", "mtil", data_root).classnames[2] == "brushland or shrubland"
    flowers = load_splits("Flowers", "mtil", data_root).classnames
    assert flowers[:2] == ("pink primrose", "hard-leaved pocket orchid")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Caltech101", ("face", "leopard", "motorbike")),
        ("Food", ("apple_pie", "baby_back_ribs", "baklava")),
        ("OxfordPet", ("abyssinian", "american_bulldog", "american_pit_bull_terrier")),
        ("StanfordCars", ("2000 AM General Hummer SUV", "2012 Acura RL Sedan", "2012 Acura TL Sedan")),
        ("SUN397", ("abbey", "airplane_cabin", "outdoor apartment_building")),
        ("Aircraft", ("707-320", "A300B4", "Cessna 172")),
    ],
)
def test_xtail_takes_coop_names_verbatim(data_root, name, expected):
    assert load_splits(name, "xtail", data_root).classnames == expected


def test_xtail_adjusts_eurosat_and_mnist_names_like_rail(data_root):
    assert load_splits("EuroSAT", "xtail", data_root).classnames[0] == "Annual Crop Land satellite location"
    assert load_splits("MNIST", "xtail", data_root).classnames[3] == 'number: "3 - three"'


@pytest.mark.parametrize(
    ("name", "protocol"), [("Food", "mtil"), ("DTD", "mtil"), ("Food", "xtail"), ("SUN397", "xtail")]
)
def test_labels_follow_the_image_folders(data_root, name, protocol):
    splits = load_splits(name, protocol, data_root)
    folder_of = {}
    for key, label in zip(splits.train.keys + splits.test.keys, splits.train.labels + splits.test.labels, strict=True):
        folder = PurePosixPath(key).parent.as_posix()
        assert folder_of.setdefault(label, folder) == folder
    assert len(set(folder_of.values())) == len(splits.classnames)


def test_pet_and_cars_labels_match_their_annotations(data_root):
    pet = load_splits("OxfordPet", "mtil", data_root)
    label_1 = [key for key, label in zip(pet.train.keys, pet.train.labels, strict=True) if label == 1]
    breeds = {PurePosixPath(key).name.rsplit("_", 1)[0] for key in label_1}
    assert breeds == {"american_bulldog"}
    cars = load_splits("StanfordCars", "mtil", data_root)
    assert cars.train.labels == tuple(label for label in range(3) for _ in range(6))


@pytest.mark.parametrize("name", ["Caltech101", "EuroSAT", "SUN397"])
def test_80_20_split_is_stable_and_covers_the_dataset(data_root, name):
    first, second = load_splits(name, "mtil", data_root), load_splits(name, "mtil", data_root)
    assert (first.train.keys, first.test.keys) == (second.train.keys, second.test.keys)
    every = first.train.keys + first.test.keys
    assert len(set(every)) == len(every)
    assert len(first.train) == int(0.8 * len(every))


def test_80_20_split_ignores_listing_order():
    keys = tuple(f"class{c}/img{i:02d}.jpg" for c in range(4) for i in range(25))
    samples = Samples(images=None, keys=keys, labels=tuple(int(k[5]) for k in keys))
    train, test = random_split_80_20(samples)
    for seed in range(3):
        order = list(range(len(keys)))
        random.Random(seed).shuffle(order)
        shuffled_train, shuffled_test = random_split_80_20(samples.subset(order))
        assert (shuffled_train.keys, shuffled_test.keys) == (train.keys, test.keys)
        assert shuffled_train.labels == train.labels


def _last_two_parts(path) -> str:
    return "/".join(PurePosixPath(path).parts[-2:])


def _torchvision_order(name, root) -> list[str]:
    """'<category>/<file>' in the order torchvision's class lists the images."""
    if name == "EuroSAT":
        return [_last_two_parts(path) for path, _ in datasets.EuroSAT(str(root)).samples]
    caltech = datasets.Caltech101(str(root))
    return [f"{caltech.categories[y]}/image_{i:04d}.jpg" for i, y in zip(caltech.index, caltech.y, strict=True)]


@pytest.mark.parametrize("name", ["EuroSAT", "Caltech101"])
def test_80_20_split_is_zscl_random_split_for_caltech_and_eurosat(data_root, name):
    # ZSCL: torch.utils.data.random_split(dataset, [int(0.8 n), rest], Generator().manual_seed(42))
    ordered = _torchvision_order(name, data_root)
    n_train = int(0.8 * len(ordered))
    zscl_train, zscl_test = torch.utils.data.random_split(
        ordered, [n_train, len(ordered) - n_train], generator=torch.Generator().manual_seed(42)
    )
    splits = load_splits(name, "mtil", data_root)
    assert [_last_two_parts(key) for key in splits.train.keys] == list(zscl_train)
    assert [_last_two_parts(key) for key in splits.test.keys] == list(zscl_test)


def test_sun397_splits_sorted_files_or_zscl_s_split_of_the_file_system_s_listing(data_root, monkeypatch):
    """ZSCL and MoE-Adapters split torchvision's SUN397, which lists its files as Path.rglob finds them:
    data.sun397_order filesystem is that split on this machine, sorted is one listing-independent split."""
    sorted_splits = load_splits("SUN397", "mtil", data_root)
    rglob = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: sorted(rglob(self, pattern), reverse=True))  # another FS
    listed = [_last_two_parts(path) for path in datasets.SUN397(str(data_root))._image_files]
    assert listed == sorted(listed, reverse=True)
    n_train = int(0.8 * len(listed))
    zscl_train, zscl_test = torch.utils.data.random_split(
        listed, [n_train, len(listed) - n_train], generator=torch.Generator().manual_seed(42)
    )
    filesystem = load_splits("SUN397", "mtil", data_root, sun397_order="filesystem")
    assert [_last_two_parts(key) for key in filesystem.train.keys] == list(zscl_train)
    assert [_last_two_parts(key) for key in filesystem.test.keys] == list(zscl_test)
    again = load_splits("SUN397", "mtil", data_root)  # sorted: the same whatever the listing
    assert (again.train.keys, again.test.keys) == (sorted_splits.train.keys, sorted_splits.test.keys)
    assert set(filesystem.test.keys) != set(sorted_splits.test.keys)
    with pytest.raises(ValueError, match="SUN397's split order is one of sorted, filesystem, got 'listing'"):
        load_splits("SUN397", "mtil", data_root, sun397_order="listing")


def test_cifar100_reads_what_torchvision_reads(data_root, monkeypatch):
    # torchvision verifies the real files' MD5 sums, which a fixture cannot carry: accept any file here
    monkeypatch.setattr(cifar, "check_integrity", lambda fpath, md5=None: os.path.isfile(fpath))
    splits = load_splits("CIFAR100", "mtil", data_root)
    for part, train in ((splits.train, True), (splits.test, False)):
        reference = datasets.CIFAR100(str(data_root), train=train)
        assert part.labels == tuple(reference.targets)
        assert np.array_equal(part.images.dataset.data, reference.data)
        assert np.array_equal(np.asarray(part.images.load(3)), np.asarray(reference[3][0]))
    assert splits.classnames == tuple(name.replace("_", " ") for name in reference.classes)


class _Touch:
    """A pickle that runs Path.touch when loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def test_a_cifar_batch_naming_another_callable_is_refused_unrun(tmp_path):
    write_cifar100(tmp_path)
    ran = tmp_path / "ran"
    (tmp_path / "cifar-100-python" / "train").write_bytes(pickle.dumps({"data": _Touch(ran), "fine_labels": []}))
    with pytest.raises(DatasetNotFoundError, match="it names pathlib.Path.touch, which a CIFAR batch file never does"):
        load_splits("CIFAR100", "mtil", tmp_path)
    assert not ran.exists()
