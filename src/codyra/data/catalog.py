"""What each of the 11 CLIP datasets looks like on disk, and what the paper's protocols expect.

Pure data, no torch: the `codyra data check` command and the error messages use it.

One data root holds every dataset in the sub-layout torchvision's dataset class expects
(`download=True` of that class creates exactly this layout). X-TAIL also needs CoOp's
`split_zhou_<Dataset>.json` files; each lives inside its dataset's folder and lists
`[relative_path, label, classname]` triples under "train", "val" and "test", with paths
relative to the image folder named in `COOP_SPLITS`.

    <root>/fgvc-aircraft-2013b/data/{variants.txt, images_variant_{train,test}.txt, images/}
    <root>/caltech101/101_ObjectCategories/<category>/image_0001.jpg
    <root>/caltech101/split_zhou_Caltech101.json                      (X-TAIL)
    <root>/cifar-100-python/{train, test, meta}
    <root>/dtd/dtd/{labels/{train1,test1}.txt, images/<class>/*.jpg}
    <root>/dtd/dtd/split_zhou_DescribableTextures.json                (X-TAIL)
    <root>/eurosat/2750/<class>/*.jpg
    <root>/eurosat/split_zhou_EuroSAT.json                            (X-TAIL)
    <root>/flowers-102/{jpg/, imagelabels.mat, setid.mat}
    <root>/flowers-102/split_zhou_OxfordFlowers.json                  (X-TAIL)
    <root>/food-101/{meta/{train,test}.json, images/<class>/*.jpg}
    <root>/food-101/split_zhou_Food101.json                           (X-TAIL)
    <root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte
    <root>/oxford-iiit-pet/{images/, annotations/{trainval,test}.txt}
    <root>/oxford-iiit-pet/split_zhou_OxfordPets.json                 (X-TAIL)
    <root>/stanford_cars/{cars_train/, cars_test/, cars_test_annos_withlabels.mat,
                          devkit/{cars_meta.mat, cars_train_annos.mat}}
    <root>/stanford_cars/split_zhou_StanfordCars.json                 (X-TAIL)
    <root>/SUN397/{ClassName.txt, a/abbey/sun_*.jpg, ...}
    <root>/SUN397/split_zhou_SUN397.json                              (X-TAIL)

Held-out datasets (evaluated, never trained on; config key heldout_tasks):

    <root>/places365/{categories_places365.txt, places365_val.txt, val_256/}
    <root>/imagenet/val/<wnid>/*.JPEG            (ILSVRC2012 val, one folder per WordNet id)
"""

from __future__ import annotations

from dataclasses import dataclass

MTIL = "mtil"
XTAIL = "xtail"
PROTOCOLS = (MTIL, XTAIL)

MTIL_DATASETS = (
    "Aircraft",
    "Caltech101",
    "CIFAR100",
    "DTD",
    "EuroSAT",
    "Flowers",
    "Food",
    "MNIST",
    "OxfordPet",
    "StanfordCars",
    "SUN397",
)
XTAIL_DATASETS = tuple(name for name in MTIL_DATASETS if name != "CIFAR100")
DATASETS = {MTIL: MTIL_DATASETS, XTAIL: XTAIL_DATASETS}
# Held-out datasets: only their test split is read. X-TAIL's are the paper's "zero-shot
# retention on unseen data" sets (CIFAR100, Places365, ImageNet-1k); the paper tracks none
# for MTIL, whose stream contains CIFAR100, but the other two may be listed there.
HELDOUT_DATASETS = {MTIL: ("Places365", "ImageNet"), XTAIL: ("CIFAR100", "Places365", "ImageNet")}


@dataclass(frozen=True)
class Expected:
    """Split sizes and class count of the real dataset under one protocol."""

    num_classes: int
    train: int
    test: int


# MTIL: the split sizes of ZSCL's MTIL. X-TAIL: test sizes of RAIL's protocol; train sizes are CoOp's
# train splits (Aircraft and MNIST use their official train splits).
EXPECTED = {
    MTIL: {
        "Aircraft": Expected(100, 3_334, 3_333),
        "Caltech101": Expected(101, 6_941, 1_736),
        "CIFAR100": Expected(100, 50_000, 10_000),
        "DTD": Expected(47, 1_880, 1_880),
        "EuroSAT": Expected(10, 21_600, 5_400),
        "Flowers": Expected(102, 1_020, 6_149),
        "Food": Expected(101, 75_750, 25_250),
        "MNIST": Expected(10, 60_000, 10_000),
        "OxfordPet": Expected(37, 3_680, 3_669),
        "StanfordCars": Expected(196, 8_144, 8_041),
        "SUN397": Expected(397, 87_003, 21_751),
        "Places365": Expected(365, 0, 36_500),
        "ImageNet": Expected(1000, 0, 50_000),
    },
    XTAIL: {
        "Aircraft": Expected(100, 3_334, 3_333),
        "Caltech101": Expected(100, 4_128, 2_465),
        "DTD": Expected(47, 2_820, 1_692),
        "EuroSAT": Expected(10, 13_500, 8_100),
        "Flowers": Expected(102, 4_093, 2_463),
        "Food": Expected(101, 50_500, 30_300),
        "MNIST": Expected(10, 60_000, 10_000),
        "OxfordPet": Expected(37, 2_944, 3_669),
        "StanfordCars": Expected(196, 6_509, 8_041),
        "SUN397": Expected(397, 15_880, 19_850),
        "CIFAR100": Expected(100, 50_000, 10_000),
        "Places365": Expected(365, 0, 36_500),
        "ImageNet": Expected(1000, 0, 50_000),
    },
}


@dataclass(frozen=True)
class CoopSplit:
    """Where a CoOp split file lives and which folder its image paths are relative to."""

    json: str
    images: str


COOP_SPLITS = {
    "Caltech101": CoopSplit("caltech101/split_zhou_Caltech101.json", "caltech101/101_ObjectCategories"),
    "DTD": CoopSplit("dtd/dtd/split_zhou_DescribableTextures.json", "dtd/dtd/images"),
    "EuroSAT": CoopSplit("eurosat/split_zhou_EuroSAT.json", "eurosat/2750"),
    "Flowers": CoopSplit("flowers-102/split_zhou_OxfordFlowers.json", "flowers-102/jpg"),
    "Food": CoopSplit("food-101/split_zhou_Food101.json", "food-101/images"),
    "OxfordPet": CoopSplit("oxford-iiit-pet/split_zhou_OxfordPets.json", "oxford-iiit-pet/images"),
    "StanfordCars": CoopSplit("stanford_cars/split_zhou_StanfordCars.json", "stanford_cars"),
    "SUN397": CoopSplit("SUN397/split_zhou_SUN397.json", "SUN397"),
}

COOP_SPLIT_SOURCE = (
    "download {file} from the Google Drive link for this dataset in CoOp's DATASETS.md "
    "(https://github.com/KaiyangZhou/CoOp/blob/main/DATASETS.md) and place it at {path}"
)


@dataclass(frozen=True)
class TorchvisionLayout:
    """The folder torchvision's class reads, the paths it needs and how to obtain them."""

    folder: str
    required: tuple[str, ...]  # relative to the data root; a trailing "/" marks a directory
    obtain: str


def _download_hint(cls: str) -> str:
    return (
        f'run once on a machine with internet: python -c "import torchvision; '
        f"torchvision.datasets.{cls}(root='<root>', download=True)\""
    )


TORCHVISION_LAYOUTS = {
    "Aircraft": TorchvisionLayout(
        "fgvc-aircraft-2013b",
        (
            "fgvc-aircraft-2013b/data/variants.txt",
            "fgvc-aircraft-2013b/data/images_variant_train.txt",
            "fgvc-aircraft-2013b/data/images_variant_test.txt",
            "fgvc-aircraft-2013b/data/images/",
        ),
        _download_hint("FGVCAircraft"),
    ),
    "Caltech101": TorchvisionLayout(
        "caltech101",
        ("caltech101/101_ObjectCategories/",),
        _download_hint("Caltech101"),
    ),
    "CIFAR100": TorchvisionLayout(
        "cifar-100-python",
        ("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
        _download_hint("CIFAR100"),
    ),
    "DTD": TorchvisionLayout(
        "dtd/dtd",
        ("dtd/dtd/labels/train1.txt", "dtd/dtd/labels/test1.txt", "dtd/dtd/images/"),
        _download_hint("DTD"),
    ),
    "EuroSAT": TorchvisionLayout("eurosat", ("eurosat/2750/",), _download_hint("EuroSAT")),
    "Flowers": TorchvisionLayout(
        "flowers-102",
        ("flowers-102/jpg/", "flowers-102/imagelabels.mat", "flowers-102/setid.mat"),
        _download_hint("Flowers102"),
    ),
    "Food": TorchvisionLayout(
        "food-101",
        ("food-101/meta/train.json", "food-101/meta/test.json", "food-101/images/"),
        _download_hint("Food101"),
    ),
    "MNIST": TorchvisionLayout(
        "MNIST/raw",
        tuple(
            f"MNIST/raw/{split}-{kind}-ubyte" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")
        ),
        _download_hint("MNIST"),
    ),
    "OxfordPet": TorchvisionLayout(
        "oxford-iiit-pet",
        (
            "oxford-iiit-pet/images/",
            "oxford-iiit-pet/annotations/trainval.txt",
            "oxford-iiit-pet/annotations/test.txt",
        ),
        _download_hint("OxfordIIITPet"),
    ),
    "StanfordCars": TorchvisionLayout(
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
    "SUN397": TorchvisionLayout("SUN397", ("SUN397/ClassName.txt", "SUN397/"), _download_hint("SUN397")),
    # torchvision's Places365 reads its files from the root it is given: we give it <root>/places365.
    "Places365": TorchvisionLayout(
        "places365",
        ("places365/categories_places365.txt", "places365/places365_val.txt", "places365/val_256/"),
        'run once on a machine with internet: python -c "import torchvision; torchvision.datasets.'
        "Places365(root='<root>/places365', split='val', small=True, download=True)\"",
    ),
    "ImageNet": TorchvisionLayout(
        "imagenet",
        ("imagenet/val/",),
        "ImageNet cannot be downloaded automatically: get ILSVRC2012_img_val.tar from "
        "https://image-net.org/download-images, extract it to <root>/imagenet/val/ and sort the "
        "50,000 images into one folder per WordNet id (<root>/imagenet/val/n01440764/*.JPEG, ...), "
        "e.g. with valprep.sh of https://github.com/soumith/imagenetloader.torch",
    ),
}


@dataclass(frozen=True)
class Requirement:
    """Everything one dataset needs under one protocol, for presence checks and messages."""

    folder: str
    required: tuple[str, ...]
    obtain: str


def requirement(name: str, protocol: str) -> Requirement:
    check_name(name, protocol)
    tv = TORCHVISION_LAYOUTS[name]
    if protocol == XTAIL and name in COOP_SPLITS:
        split = COOP_SPLITS[name]
        return Requirement(
            tv.folder,
            (split.images + "/", split.json),
            f"images: {tv.obtain}; split file: "
            + COOP_SPLIT_SOURCE.format(file=split.json.rsplit("/", 1)[1], path=f"<root>/{split.json}"),
        )
    return Requirement(tv.folder, tv.required, tv.obtain)


def check_name(name: str, protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    known = DATASETS[protocol] + HELDOUT_DATASETS[protocol]
    if name not in known:
        raise ValueError(f"unknown dataset {name!r} for protocol {protocol!r}; choose from {', '.join(known)}")
