"""Stanford Cars: MTIL reads its official split (torchvision's), X-TAIL CoOp's.

Its files under the data root:

    <root>/stanford_cars/{cars_train/, cars_test/, cars_test_annos_withlabels.mat,
                          devkit/{cars_meta.mat, cars_train_annos.mat}}
    <root>/stanford_cars/split_zhou_StanfordCars.json                 (X-TAIL)
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
)


def read(request: ReadRequest) -> DatasetSplits:
    from torchvision import datasets

    from codyra.data import sources

    root = request.root
    train, test = (
        datasets.StanfordCars(str(root), split=split, loader=sources.path_only) for split in ("train", "test")
    )
    classes = sources.mtil_names(train.classes)
    return sources.file_splits(root, classes, train, test)


DATASET = Dataset(
    name="StanfordCars",
    layout=TorchvisionLayout(
        "stanford_cars",
        (
            "stanford_cars/devkit/cars_meta.mat",
            "stanford_cars/devkit/cars_train_annos.mat",
            "stanford_cars/cars_test_annos_withlabels.mat",
            "stanford_cars/cars_train/",
            "stanford_cars/cars_test/",
        ),
        # torchvision's StanfordCars(download=True) raises: the original site is gone.
        "torchvision can no longer download StanfordCars. Place the files by hand: "
        "<root>/stanford_cars/cars_train/*.jpg (8,144 images, cars_train.tgz), "
        "<root>/stanford_cars/cars_test/*.jpg (8,041 images, cars_test.tgz), "
        "<root>/stanford_cars/devkit/ (car_devkit.tgz: cars_meta.mat, cars_train_annos.mat, ...) and "
        "<root>/stanford_cars/cars_test_annos_withlabels.mat. Mirrors of all four are linked in "
        "https://github.com/pytorch/vision/issues/7545 (images e.g. from Kaggle "
        "'jessicali9530/stanford-cars-dataset'; flatten nested cars_train/cars_train folders)",
    ),
    expected={MTIL: Expected(196, 8_144, 8_041), XTAIL: Expected(196, 6_509, 8_041)},
    templates={
        MTIL: (
            "a photo of a {}, a type of car.",
            "a photo of a {}.",
            "a photo of the {}.",
            "a photo of my {}.",
            "i love my {}!",
            "a photo of my dirty {}.",
            "a photo of my clean {}.",
            "a photo of my new {}.",
            "a photo of my old {}.",
        ),
        XTAIL: ("a photo of a {}.",),
    },
    reader=read,
    coop=CoopSplit("stanford_cars/split_zhou_StanfordCars.json", "stanford_cars"),
)
