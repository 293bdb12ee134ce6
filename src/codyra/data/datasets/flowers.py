"""Oxford Flowers 102: MTIL reads its official split (torchvision's) and names the classes with
CLIP's list; X-TAIL reads CoOp's split.

Its files under the data root:

    <root>/flowers-102/{jpg/, imagelabels.mat, setid.mat}
    <root>/flowers-102/split_zhou_OxfordFlowers.json                  (X-TAIL)
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

# In the label order of torchvision's class: labels 1..102 of imagelabels.mat.
CLASSNAMES = (
    "pink primrose",
    "hard-leaved pocket orchid",
    "canterbury bells",
    "sweet pea",
    "english marigold",
    "tiger lily",
    "moon orchid",
    "bird of paradise",
    "monkshood",
    "globe thistle",
    "snapdragon",
    "colt's foot",
    "king protea",
    "spear thistle",
    "yellow iris",
    "globe-flower",
    "purple coneflower",
    "peruvian lily",
    "balloon flower",
    "giant white arum lily",
    "fire lily",
    "pincushion flower",
    "fritillary",
    "red ginger",
    "grape hyacinth",
    "corn poppy",
    "prince of wales feathers",
    "stemless gentian",
    "artichoke",
    "sweet william",
    "carnation",
    "garden phlox",
    "love in the mist",
    "mexican aster",
    "alpine sea holly",
    "ruby-lipped cattleya",
    "cape flower",
    "great masterwort",
    "siam tulip",
    "lenten rose",
    "barbeton daisy",
    "daffodil",
    "sword lily",
    "poinsettia",
    "bolero deep blue",
    "wallflower",
    "marigold",
    "buttercup",
    "oxeye daisy",
    "common dandelion",
    "petunia",
    "wild pansy",
    "primula",
    "sunflower",
    "pelargonium",
    "bishop of llandaff",
    "gaura",
    "geranium",
    "orange dahlia",
    "pink-yellow dahlia",
    "cautleya spicata",
    "japanese anemone",
    "black-eyed susan",
    "silverbush",
    "californian poppy",
    "osteospermum",
    "spring crocus",
    "bearded iris",
    "windflower",
    "tree poppy",
    "gazania",
    "azalea",
    "water lily",
    "rose",
    "thorn apple",
    "morning glory",
    "passion flower",
    "lotus",
    "toad lily",
    "anthurium",
    "frangipani",
    "clematis",
    "hibiscus",
    "columbine",
    "desert-rose",
    "tree mallow",
    "magnolia",
    "cyclamen",
    "watercress",
    "canna lily",
    "hippeastrum",
    "bee balm",
    "ball moss",
    "foxglove",
    "bougainvillea",
    "camellia",
    "mallow",
    "mexican petunia",
    "bromelia",
    "blanket flower",
    "trumpet creeper",
    "blackberry lily",
)


def read(request: ReadRequest) -> DatasetSplits:
    from torchvision import datasets

    from codyra.data import sources

    class Flowers102(datasets.Flowers102):
        """torchvision's reader, its files checked to exist instead of their MD5 sums (codyra.data.sources)."""

        def _check_integrity(self) -> bool:
            files = (self._base_folder / self._file_dict[key][0] for key in ("label", "setid"))
            return self._images_folder.is_dir() and all(path.is_file() for path in files)

    root = request.root
    # Labels come from imagelabels.mat (1..102); CLIP's list names all 102 of them.
    train, test = (Flowers102(str(root), split=split, loader=sources.path_only) for split in ("train", "test"))
    return sources.file_splits(root, CLASSNAMES, train, test)


DATASET = Dataset(
    name="Flowers",
    layout=TorchvisionLayout(
        "flowers-102",
        ("flowers-102/jpg/", "flowers-102/imagelabels.mat", "flowers-102/setid.mat"),
        download_hint("Flowers102"),
    ),
    expected={MTIL: Expected(102, 1_020, 6_149), XTAIL: Expected(102, 4_093, 2_463)},
    templates={MTIL: ("a photo of a {}, a type of flower.",), XTAIL: ("a photo of a {}, a type of flower.",)},
    reader=read,
    coop=CoopSplit("flowers-102/split_zhou_OxfordFlowers.json", "flowers-102/jpg"),
    classnames=CLASSNAMES,
)
