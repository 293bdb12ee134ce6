"""FGVC-Aircraft's 100 variants; both protocols read its official train/test split (as CoOp does).

Its files under the data root:

    <root>/fgvc-aircraft-2013b/data/{variants.txt, images_variant_{train,test}.txt, images/}
"""

from __future__ import annotations

from codyra.data.datasets import (
    MTIL,
    XTAIL,
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
        datasets.FGVCAircraft(str(root), split=split, loader=sources.path_only) for split in ("train", "test")
    )
    classes = tuple(train.classes) if request.protocol == XTAIL else sources.mtil_names(train.classes)
    return sources.file_splits(root, classes, train, test)


DATASET = Dataset(
    name="Aircraft",
    layout=TorchvisionLayout(
        "fgvc-aircraft-2013b",
        (
            "fgvc-aircraft-2013b/data/variants.txt",
            "fgvc-aircraft-2013b/data/images_variant_train.txt",
            "fgvc-aircraft-2013b/data/images_variant_test.txt",
            "fgvc-aircraft-2013b/data/images/",
        ),
        download_hint("FGVCAircraft"),
    ),
    expected={MTIL: Expected(100, 3_334, 3_333), XTAIL: Expected(100, 3_334, 3_333)},
    templates={
        MTIL: ("a photo of a {}, a type of aircraft.", "a photo of the {}, a type of aircraft."),
        XTAIL: ("a photo of a {}, a type of aircraft.",),
    },
    reader=read,
)
