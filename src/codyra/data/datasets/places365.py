"""Places365, a held-out set (only its test split is read): its validation images at 256 px.

Its files under the data root:

    <root>/places365/{categories_places365.txt, places365_val.txt, val_256/}
"""

from __future__ import annotations

import os

from codyra.data.datasets import MTIL, XTAIL, Dataset, DatasetSplits, Expected, ReadRequest, TorchvisionLayout


def read(request: ReadRequest) -> DatasetSplits:
    """Class names from the dataset's own categories_places365.txt ("/b/bakery/shop" -> "bakery shop")."""
    from torchvision import datasets

    from codyra.data import sources

    class Places365(datasets.Places365):
        """torchvision's reader, its files checked to exist instead of their MD5 sums (codyra.data.sources)."""

        def _check_integrity(self, file: str, md5: str, download: bool) -> bool:
            if not os.path.isfile(file):
                raise RuntimeError(f"The file {file} does not exist")
            return True

    root = request.root
    val = Places365(str(root / "places365"), split="val", small=True, loader=sources.path_only)
    classes = [name[3:].replace("/", " ").replace("_", " ") for name in val.classes]
    return sources.heldout_only(root, classes, sources.files(root, [path for path, _ in val.imgs], val.targets))


DATASET = Dataset(
    name="Places365",
    # torchvision's Places365 reads its files from the root it is given: we give it <root>/places365.
    layout=TorchvisionLayout(
        "places365",
        ("places365/categories_places365.txt", "places365/places365_val.txt", "places365/val_256/"),
        'run once on a machine with internet: python -c "import torchvision; torchvision.datasets.'
        "Places365(root='<root>/places365', split='val', small=True, download=True)\"",
    ),
    expected={MTIL: Expected(365, 0, 36_500), XTAIL: Expected(365, 0, 36_500)},
    # MTIL: CLIP's scene prompts (as SUN397); X-TAIL: CoOp's ImageNet template
    templates={MTIL: ("a photo of a {}.", "a photo of the {}."), XTAIL: ("a photo of a {}.",)},
    reader=read,
)
