"""EuroSAT (RGB): MTIL splits torchvision's 10 classes 80/20 (ZSCL's random split) and names them
with CLIP's list; X-TAIL reads CoOp's split, each name suffixed as RAIL does.

Its files under the data root:

    <root>/eurosat/2750/<class>/*.jpg
    <root>/eurosat/split_zhou_EuroSAT.json                            (X-TAIL)
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

# In the label order of torchvision's class: its sorted class folders.
CLASSNAMES = (
    "annual crop land",
    "forest",
    "brushland or shrubland",
    "highway or road",
    "industrial buildings or commercial buildings",
    "pasture land",
    "permanent crop land",
    "residential buildings or homes or apartments",
    "river",
    "lake or sea",
)


def read(request: ReadRequest) -> DatasetSplits:
    from torchvision import datasets

    from codyra.data import sources
    from codyra.data.samples import random_split_80_20

    root = request.root
    dataset = datasets.EuroSAT(str(root), loader=sources.path_only)
    samples = sources.files(root, [path for path, _ in dataset.samples], dataset.targets)
    train, test = random_split_80_20(samples)
    return DatasetSplits(sources.hand_written(CLASSNAMES, len(dataset.classes)), train, test)


DATASET = Dataset(
    name="EuroSAT",
    layout=TorchvisionLayout("eurosat", ("eurosat/2750/",), download_hint("EuroSAT")),
    expected={MTIL: Expected(10, 21_600, 5_400), XTAIL: Expected(10, 13_500, 8_100)},
    templates={
        MTIL: (
            "a centered satellite photo of {}.",
            "a centered satellite photo of a {}.",
            "a centered satellite photo of the {}.",
        ),
        XTAIL: ("a centered satellite photo of {}.",),
    },
    reader=read,
    coop=CoopSplit("eurosat/split_zhou_EuroSAT.json", "eurosat/2750", classname_suffix=" satellite location"),
    classnames=CLASSNAMES,
)
