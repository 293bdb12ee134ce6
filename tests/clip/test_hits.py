"""The one tally of a classification cell: hand-counted batches, the label-space offset, the
fields every path writes, and bad input named."""

from __future__ import annotations

import pytest
import torch

from codyra.clip.hits import ClassHits, classification_cell


def test_hits_per_class_and_accuracy_by_hand():
    # task of 3 classes at offset 4 of a 10-class label space (X-TAIL-like union)
    hits = ClassHits(3, 10, offset=4)
    hits.add(torch.tensor([4, 5, 9, 6]), torch.tensor([0, 1, 1, 2]))  # hits: class 0, class 1, class 2
    hits.add(torch.tensor([4, 0]), torch.tensor([0, 2]))  # hit: class 0
    assert hits.hits.tolist() == [2, 1, 1]
    assert hits.images.tolist() == [2, 2, 2]
    assert hits.total == 6
    assert hits.accuracy == 100.0 * 4 / 6
    assert hits.fields() == {"num_classes": 10, "num_samples": 6}


def test_accuracy_equals_the_direct_count_on_random_batches():
    generator = torch.Generator().manual_seed(0)
    hits, correct, total = ClassHits(7, 30, offset=11), 0, 0
    for size in (5, 64, 1, 33):
        labels = torch.randint(0, 7, (size,), generator=generator)
        predicted = torch.randint(0, 30, (size,), generator=generator)
        predicted[::3] = labels[::3] + 11
        hits.add(predicted, labels)
        correct += int((predicted == labels + 11).sum())
        total += size
    assert hits.accuracy == 100.0 * correct / total  # the same float, not merely close
    assert hits.total == total


def test_in_space_reads_the_label_space_s_offset_and_size():
    class Task:
        name, num_classes = "b", 2

    class Space:
        def __len__(self):
            return 5

        def offset(self, name):
            return {"a": 0, "b": 3}[name]

    hits = ClassHits.in_space(Task(), Space())
    assert (hits.task_classes, hits.space_classes, hits.offset) == (2, 5, 3)


def test_classification_cell_writes_the_tally_and_the_label_space():
    cfg = {"benchmark": "mini", "tasks": ["texture"], "data": {"label_space": "task"}}
    hits = ClassHits(2, 2)
    hits.add(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1, 1]))
    cell = classification_cell(cfg, "lora", 0, 1, 1, hits, started=0.0, routing={"accuracy": 50.0})
    assert {k: v for k, v in cell.items() if k != "seconds"} == {
        "accuracy": 75.0,
        "benchmark": "mini",
        "method": "lora",
        "seed": 0,
        "i": 1,
        "j": 1,
        "task": "texture",
        "num_classes": 2,
        "num_samples": 4,
        "label_space": "task",
        "routing": {"accuracy": 50.0},
    }


def test_a_task_outside_its_label_space_and_an_empty_tally_are_named():
    with pytest.raises(ValueError, match="3 classes at offset 8 does not fit a label space of 10"):
        ClassHits(3, 10, offset=8)
    with pytest.raises(ValueError, match="no test image was counted"):
        _ = ClassHits(3, 3).accuracy
