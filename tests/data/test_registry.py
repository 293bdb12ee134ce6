"""build_task + label_space + check_datasets over the fixture datasets."""

from codyra.data.catalog import XTAIL_DATASETS
from codyra.data.registry import build_task, check_datasets, label_space

from .fixtures import SIZES


def test_xtail_label_space_is_the_union_in_task_order(data_root, image_config):
    tasks = [build_task(name, "xtail", data_root, image_config) for name in XTAIL_DATASETS]
    space = label_space(tasks)
    assert len(space) == sum(SIZES["xtail"][name][0] for name in XTAIL_DATASETS)
    assert space.datasets == XTAIL_DATASETS
    offset = 0
    for task in tasks:
        assert space.offset(task.name) == offset
        entries = space.entries[offset : offset + task.num_classes]
        assert entries == tuple((task.name, classname) for classname in task.classnames)
        offset += task.num_classes

    prompts = space.prompts()
    assert len(prompts) == len(space)
    dtd = space.offset("DTD")
    assert prompts[dtd] == ["banded texture."]
    assert prompts[space.offset("Food") + 1] == ["a photo of baby_back_ribs, a type of food."]
    assert prompts[space.offset("MNIST") + 7] == ['a photo of the number: "number: "7 - seven"".']


def test_label_space_keeps_each_dataset_s_whole_ensemble(data_root, image_config):
    tasks = [build_task(name, "mtil", data_root, image_config) for name in ("Aircraft", "DTD")]
    space = label_space(tasks)
    assert space.prompts()[0] == [
        "a photo of a 707-320, a type of aircraft.",
        "a photo of the 707-320, a type of aircraft.",
    ]
    assert len(space.prompts()[space.offset("DTD")]) == 8


def test_check_datasets_reports_every_fixture_dataset(data_root):
    for protocol, table in SIZES.items():
        reports = check_datasets(list(table), protocol, data_root)
        assert [report.dataset for report in reports] == list(table)
        for report in reports:
            assert report.usable and report.found, report.problems
            assert (report.num_classes, report.train_size, report.test_size) == table[report.dataset]
            assert not report.matches_paper  # tiny fixtures, not the real datasets
