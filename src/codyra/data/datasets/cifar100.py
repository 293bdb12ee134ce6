"""CIFAR100: in MTIL's stream, and one of X-TAIL's held-out sets; both read torchvision's batches.

Its files under the data root:

    <root>/cifar-100-python/{train, test, meta}
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

# CLIP's 18 prompts for CIFAR
_MTIL_TEMPLATES = (
    "a photo of a {}.",
    "a blurry photo of a {}.",
    "a black and white photo of a {}.",
    "a low contrast photo of a {}.",
    "a high contrast photo of a {}.",
    "a bad photo of a {}.",
    "a good photo of a {}.",
    "a photo of a small {}.",
    "a photo of a big {}.",
    "a photo of the {}.",
    "a blurry photo of the {}.",
    "a black and white photo of the {}.",
    "a low contrast photo of the {}.",
    "a high contrast photo of the {}.",
    "a bad photo of the {}.",
    "a good photo of the {}.",
    "a photo of the small {}.",
    "a photo of the big {}.",
)


def read(request: ReadRequest) -> DatasetSplits:
    from codyra.data import sources

    base = request.root / "cifar-100-python"
    train, test = sources.cifar_split(base, "train"), sources.cifar_split(base, "test")
    classes = [str(name) for name in sources.unpickle_arrays(base / "meta")["fine_label_names"]]
    return DatasetSplits(sources.mtil_names(classes), sources.in_memory(train), sources.in_memory(test))


DATASET = Dataset(
    name="CIFAR100",
    layout=TorchvisionLayout(
        "cifar-100-python",
        ("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
        download_hint("CIFAR100"),
    ),
    expected={MTIL: Expected(100, 50_000, 10_000), XTAIL: Expected(100, 50_000, 10_000)},
    # X-TAIL (held out): CoOp's ImageNet template, as for Places365 and ImageNet
    templates={MTIL: _MTIL_TEMPLATES, XTAIL: ("a photo of a {}.",)},
    reader=read,
)
