"""MNIST: both protocols read torchvision's official split (CoOp has none).

Its files under the data root:

    <root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte
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


def _xtail_names(names) -> tuple[str, ...]:
    # RAIL (and the CoDyRA code) wrap torchvision's names before filling the template
    # 'a photo of the number: "{}".', so the prompt reads ...number: "number: "0 - zero"".
    return tuple(f'number: "{name}"' for name in names)


def read(request: ReadRequest) -> DatasetSplits:
    from torchvision import datasets

    from codyra.data import sources

    train, test = (datasets.MNIST(str(request.root), train=flag) for flag in (True, False))
    classes = _xtail_names(train.classes) if request.protocol == XTAIL else sources.mtil_names(train.classes)
    return DatasetSplits(classes, sources.in_memory(train), sources.in_memory(test))


DATASET = Dataset(
    name="MNIST",
    layout=TorchvisionLayout(
        "MNIST/raw",
        tuple(
            f"MNIST/raw/{split}-{kind}-ubyte" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")
        ),
        download_hint("MNIST"),
    ),
    expected={MTIL: Expected(10, 60_000, 10_000), XTAIL: Expected(10, 60_000, 10_000)},
    templates={MTIL: ('a photo of the number: "{}".',), XTAIL: ('a photo of the number: "{}".',)},
    reader=read,
)
