"""ImageNet-1k, a held-out set (only its test split is read): ILSVRC2012 val sorted into WordNet-id
folders.

Its files under the data root:

    <root>/imagenet/val/<wnid>/*.JPEG            (one folder per WordNet id)
"""

from __future__ import annotations

from codyra.data.datasets import (
    MTIL,
    OPENAI_IMAGENET_TEMPLATES,
    XTAIL,
    Dataset,
    DatasetSplits,
    Expected,
    ReadRequest,
    TorchvisionLayout,
)


def read(request: ReadRequest) -> DatasetSplits:
    """The sorted WordNet-id folders are the standard label order, which CLIP's class-name list
    (bundled with open_clip) follows."""
    from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES
    from torchvision import datasets

    from codyra.data import sources

    root = request.root
    val = datasets.ImageFolder(str(root / "imagenet" / "val"), loader=sources.path_only)
    if len(val.classes) != len(IMAGENET_CLASSNAMES):
        raise ValueError(
            f"imagenet/val has {len(val.classes)} class folders, ImageNet-1k has {len(IMAGENET_CLASSNAMES)}"
        )
    return sources.heldout_only(root, IMAGENET_CLASSNAMES, sources.file_samples(root, val))


DATASET = Dataset(
    name="ImageNet",
    layout=TorchvisionLayout(
        "imagenet",
        ("imagenet/val/",),
        "ImageNet cannot be downloaded automatically: get ILSVRC2012_img_val.tar from "
        "https://image-net.org/download-images, extract it to <root>/imagenet/val/ and sort the "
        "50,000 images into one folder per WordNet id (<root>/imagenet/val/n01440764/*.JPEG, ...), "
        "e.g. with valprep.sh of https://github.com/soumith/imagenetloader.torch",
    ),
    expected={MTIL: Expected(1000, 0, 50_000), XTAIL: Expected(1000, 0, 50_000)},
    # MTIL: CLIP's 80 ImageNet prompts; X-TAIL: CoOp's ImageNet template, which also reproduces the
    # paper's zero-shot ImageNet accuracy of ViT-B/16 (66.72, table "Zero-shot Retention on Unseen Data")
    templates={MTIL: OPENAI_IMAGENET_TEMPLATES, XTAIL: ("a photo of a {}.",)},
    reader=read,
)
