"""Food-101: MTIL reads its official split (torchvision's), X-TAIL CoOp's.

Its files under the data root:

    <root>/food-101/{meta/{train,test}.json, images/<class>/*.jpg}
    <root>/food-101/split_zhou_Food101.json                           (X-TAIL)
"""

from __future__ import annotations

from codyra.data.datasets import (
    MTIL,
    XTAIL,
    CoopSplit,
    Dataset,
    DatasetSplits,
    Expected,
    ReadRequest,
    TorchvisionLayout,
    download_hint,
)


def read(request: ReadRequest) -> DatasetSplits:
    from torchvision import datasets

    from codyra.data import sources

    root = request.root
    train, test = (datasets.Food101(str(root), split=split, loader=sources.path_only) for split in ("train", "test"))
    classes = sources.mtil_names(sources.same_classes(train, test))
    return sources.file_splits(root, classes, train, test)


DATASET = Dataset(
    name="Food",
    layout=TorchvisionLayout(
        "food-101",
        ("food-101/meta/train.json", "food-101/meta/test.json", "food-101/images/"),
        download_hint("Food101"),
    ),
    expected={MTIL: Expected(101, 75_750, 25_250), XTAIL: Expected(101, 50_500, 30_300)},
    templates={MTIL: ("a photo of a {}, a type of food.",), XTAIL: ("a photo of {}, a type of food.",)},
    reader=read,
    coop=CoopSplit("food-101/split_zhou_Food101.json", "food-101/images"),
)
