"""SUN397: MTIL splits torchvision's images 80/20 (ZSCL's random split, over the files in the order
of config key data.sun397_order), X-TAIL reads CoOp's split.

Its files under the data root:

    <root>/SUN397/{ClassName.txt, a/abbey/sun_*.jpg, ...}
    <root>/SUN397/split_zhou_SUN397.json                              (X-TAIL)
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
    """torchvision's SUN397 lists its files as ``Path.rglob`` finds them, in the file system's order."""
    from torchvision import datasets

    from codyra.data import sources
    from codyra.data.samples import random_split_80_20

    root = request.root
    dataset = datasets.SUN397(str(root), loader=sources.path_only)
    train, test = random_split_80_20(sources.file_samples(root, dataset), sources.SUN397_ORDERS[request.sun397_order])
    return DatasetSplits(sources.mtil_names(dataset.classes), train, test)


DATASET = Dataset(
    name="SUN397",
    layout=TorchvisionLayout("SUN397", ("SUN397/ClassName.txt", "SUN397/"), download_hint("SUN397")),
    expected={MTIL: Expected(397, 87_003, 21_751), XTAIL: Expected(397, 15_880, 19_850)},
    templates={MTIL: ("a photo of a {}.", "a photo of the {}."), XTAIL: ("a photo of a {}.",)},
    reader=read,
    coop=CoopSplit("SUN397/split_zhou_SUN397.json", "SUN397"),
)
