"""The Describable Textures Dataset: MTIL reads torchvision's partition 1, X-TAIL CoOp's split.

Its files under the data root:

    <root>/dtd/dtd/{labels/{train1,test1}.txt, images/<class>/*.jpg}
    <root>/dtd/dtd/split_zhou_DescribableTextures.json                (X-TAIL)
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
    train, test = (
        datasets.DTD(str(root), split=split, partition=1, loader=sources.path_only) for split in ("train", "test")
    )
    classes = sources.mtil_names(sources.same_classes(train, test))
    return sources.file_splits(root, classes, train, test)


DATASET = Dataset(
    name="DTD",
    layout=TorchvisionLayout(
        "dtd/dtd",
        ("dtd/dtd/labels/train1.txt", "dtd/dtd/labels/test1.txt", "dtd/dtd/images/"),
        download_hint("DTD"),
    ),
    expected={MTIL: Expected(47, 1_880, 1_880), XTAIL: Expected(47, 2_820, 1_692)},
    templates={
        MTIL: (
            "a photo of a {} texture.",
            "a photo of a {} pattern.",
            "a photo of a {} thing.",
            "a photo of a {} object.",
            "a photo of the {} texture.",
            "a photo of the {} pattern.",
            "a photo of the {} thing.",
            "a photo of the {} object.",
        ),
        XTAIL: ("{} texture.",),
    },
    reader=read,
    coop=CoopSplit("dtd/dtd/split_zhou_DescribableTextures.json", "dtd/dtd/images"),
)
