"""The Oxford-IIIT Pet breeds: MTIL reads its official trainval/test split (torchvision's), X-TAIL CoOp's.

Its files under the data root:

    <root>/oxford-iiit-pet/{images/, annotations/{trainval,test}.txt}
    <root>/oxford-iiit-pet/split_zhou_OxfordPets.json                 (X-TAIL)
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
    train, test = (datasets.OxfordIIITPet(str(root), split=split) for split in ("trainval", "test"))
    classes = sources.mtil_names(sources.same_classes(train, test))
    # The class exposes no loader hook and decodes in __getitem__; its file list and labels
    # are only available as attributes (stable across the torchvision versions we pin).
    return DatasetSplits(
        classes,
        sources.files(root, train._images, train._labels),
        sources.files(root, test._images, test._labels),
    )


DATASET = Dataset(
    name="OxfordPet",
    layout=TorchvisionLayout(
        "oxford-iiit-pet",
        (
            "oxford-iiit-pet/images/",
            "oxford-iiit-pet/annotations/trainval.txt",
            "oxford-iiit-pet/annotations/test.txt",
        ),
        download_hint("OxfordIIITPet"),
    ),
    expected={MTIL: Expected(37, 3_680, 3_669), XTAIL: Expected(37, 2_944, 3_669)},
    templates={MTIL: ("a photo of a {}, a type of pet.",), XTAIL: ("a photo of a {}, a type of pet.",)},
    reader=read,
    coop=CoopSplit("oxford-iiit-pet/split_zhou_OxfordPets.json", "oxford-iiit-pet/images"),
)
