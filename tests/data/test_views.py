"""Views behind ClassificationTask: item shapes, reproducibility, pickling, DataLoader workers."""

import pickle

import pytest
import torch
from torch.utils.data import DataLoader

from codyra.data.registry import build_task
from codyra.data.tasks import ClassificationTask


@pytest.mark.parametrize(
    ("name", "protocol"),
    [("Aircraft", "mtil"), ("CIFAR100", "mtil"), ("MNIST", "xtail"), ("SUN397", "xtail")],
)
def test_items_are_float_images_and_int_labels(data_root, image_config, name, protocol):
    task = build_task(name, protocol, data_root, image_config)
    assert isinstance(task, ClassificationTask) and task.name == name
    size = image_config.size
    image, label = task.test_set()[0]
    assert image.shape == (3, size, size) and image.dtype == torch.float32
    assert isinstance(label, int) and 0 <= label < task.num_classes
    image, label = task.train_set()[(len(task.train_set()) - 1, 99)]
    assert image.shape == (3, size, size) and isinstance(label, int)


def test_train_items_are_a_function_of_index_and_aug_seed(data_root, image_config):
    train = build_task("Food", "mtil", data_root, image_config).train_set()
    torch.manual_seed(0)
    first, label = train[(3, 17)]
    torch.manual_seed(1)  # the global RNG plays no part
    again, same_label = train[(3, 17)]
    assert torch.equal(first, again) and label == same_label
    others = [train[(3, seed)][0] for seed in range(6)]
    assert any(not torch.equal(first, other) for other in others)


def test_eval_items_are_deterministic(data_root, image_config):
    test = build_task("DTD", "mtil", data_root, image_config).test_set()
    assert torch.equal(test[2][0], test[2][0])


def test_views_pickle_and_stream_through_dataloader_workers(data_root, image_config):
    task = build_task("Food", "mtil", data_root, image_config)
    test = task.test_set()
    restored = pickle.loads(pickle.dumps(test))
    assert torch.equal(restored[1][0], test[1][0])
    pickle.loads(pickle.dumps(task.train_set()))

    loader = DataLoader(test, batch_size=4, num_workers=2)
    labels = torch.cat([batch_labels for _, batch_labels in loader])
    assert labels.tolist() == list(test.labels)

    train = task.train_set()
    keyed = DataLoader(train, batch_size=3, sampler=[(i, 1000 + i) for i in range(len(train))], num_workers=2)
    images = torch.cat([batch for batch, _ in keyed])
    assert torch.equal(images[5], train[(5, 1005)][0])


def test_task_carries_protocol_templates_and_names(data_root, image_config):
    task = build_task("EuroSAT", "mtil", data_root, image_config)
    assert len(task.templates) == 3 and task.num_classes == 10
    assert task.prompts(task.templates[0])[0] == "a centered satellite photo of annual crop land."
    xtail = build_task("EuroSAT", "xtail", data_root, image_config)
    first_prompt = xtail.prompts(xtail.templates[0])[0]
    assert first_prompt == "a centered satellite photo of Annual Crop Land satellite location."
