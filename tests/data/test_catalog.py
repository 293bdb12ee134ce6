"""The protocol constants against the numbers ZSCL's MTIL and RAIL's X-TAIL state (no dataset files involved)."""

import pytest

from codyra.data.catalog import (
    EXPECTED,
    HELDOUT_DATASETS,
    MTIL,
    MTIL_DATASETS,
    PROTOCOLS,
    RECORDS,
    XTAIL,
    XTAIL_DATASETS,
    protocol_datasets,
    requirement,
)
from codyra.data.templates import templates

# MTIL (ZSCL): template ensemble sizes, split sizes, 5-shot train sizes (order I).
MTIL_TEMPLATE_COUNTS = {
    "Aircraft": 2,
    "Caltech101": 34,
    "CIFAR100": 18,
    "DTD": 8,
    "EuroSAT": 3,
    "Flowers": 1,
    "Food": 1,
    "MNIST": 1,
    "OxfordPet": 1,
    "StanfordCars": 9,
    "SUN397": 2,
}
MTIL_SIZES = {
    "Aircraft": (3_334, 3_333),
    "Caltech101": (6_941, 1_736),
    "CIFAR100": (50_000, 10_000),
    "DTD": (1_880, 1_880),
    "EuroSAT": (21_600, 5_400),
    "Flowers": (1_020, 6_149),
    "Food": (75_750, 25_250),
    "MNIST": (60_000, 10_000),
    "OxfordPet": (3_680, 3_669),
    "StanfordCars": (8_144, 8_041),
    "SUN397": (87_003, 21_751),
}
MTIL_5SHOT_TRAIN = [500, 505, 500, 235, 50, 510, 505, 50, 185, 980, 1_985]
XTAIL_TEST_SIZES = {
    "Aircraft": 3_333,
    "Caltech101": 2_465,
    "DTD": 1_692,
    "EuroSAT": 8_100,
    "Flowers": 2_463,
    "Food": 30_300,
    "MNIST": 10_000,
    "OxfordPet": 3_669,
    "StanfordCars": 8_041,
    "SUN397": 19_850,
}


def test_dataset_lists_and_order():
    assert MTIL_DATASETS == (
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
    assert XTAIL_DATASETS == (
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


def test_mtil_template_ensembles_have_the_protocol_sizes():
    assert {name: len(templates(name, MTIL)) for name in MTIL_DATASETS} == MTIL_TEMPLATE_COUNTS
    assert len(set(templates("Caltech101", MTIL))) == 34


def test_xtail_has_one_template_per_dataset():
    assert all(len(templates(name, XTAIL)) == 1 for name in XTAIL_DATASETS + HELDOUT_DATASETS[XTAIL])
    assert templates("Aircraft", XTAIL) == ("a photo of a {}, a type of aircraft.",)
    assert templates("DTD", XTAIL) == ("{} texture.",)
    assert templates("EuroSAT", XTAIL) == ("a centered satellite photo of {}.",)
    assert templates("Food", XTAIL) == ("a photo of {}, a type of food.",)


@pytest.mark.parametrize(
    "name, protocol", [(name, protocol) for protocol in PROTOCOLS for name in protocol_datasets(protocol)]
)
def test_every_template_has_exactly_one_placeholder(name, protocol):
    ensemble = templates(name, protocol)  # ImageNet's: open_clip's 80 OpenAI prompts
    assert ensemble and all(template.count("{}") == 1 and template.format("x") for template in ensemble)


def test_hand_written_class_lists_cover_the_real_class_counts():
    hand_written = {name: record.classnames for name, record in RECORDS.items() if record.classnames is not None}
    assert {name: len(names) for name, names in hand_written.items()} == {
        "Caltech101": 101,
        "EuroSAT": 10,
        "Flowers": 102,
    }
    for name, names in hand_written.items():
        assert len(set(names)) == len(names) == EXPECTED[MTIL][name].num_classes
    assert hand_written["Caltech101"][:2] == ("off-center face", "centered face")
    assert hand_written["Caltech101"][29] == "head of a  crocodile"  # CLIP's list, double space included
    assert hand_written["EuroSAT"][-1] == "lake or sea"
    assert hand_written["Flowers"][-1] == "blackberry lily"


def test_label_space_totals():
    assert sum(EXPECTED[MTIL][name].num_classes for name in MTIL_DATASETS) == 1_201
    assert sum(EXPECTED[XTAIL][name].num_classes for name in XTAIL_DATASETS) == 1_100


def test_split_sizes_match_the_protocols():
    assert {name: (EXPECTED[MTIL][name].train, EXPECTED[MTIL][name].test) for name in MTIL_DATASETS} == MTIL_SIZES
    assert [5 * EXPECTED[MTIL][name].num_classes for name in MTIL_DATASETS] == MTIL_5SHOT_TRAIN
    assert {name: EXPECTED[XTAIL][name].test for name in XTAIL_DATASETS} == XTAIL_TEST_SIZES


def test_requirements_name_coop_split_files_only_for_xtail():
    assert requirement("Food", XTAIL).required == ("food-101/images/", "food-101/split_zhou_Food101.json")
    assert "split_zhou" not in " ".join(requirement("Food", MTIL).required)
    assert requirement("MNIST", XTAIL) == requirement("MNIST", MTIL)
    assert requirement("Aircraft", XTAIL) == requirement("Aircraft", MTIL)


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="unknown dataset 'CIFAR10' for protocol 'xtail'"):
        templates("CIFAR10", XTAIL)
    with pytest.raises(ValueError, match="unknown protocol"):
        requirement("Aircraft", "vtab")
