"""Caltech101: MTIL splits torchvision's 101 categories 80/20 (ZSCL's random split) and names them
with CLIP's list; X-TAIL reads CoOp's split (100 classes: no Faces_easy).

Its files under the data root:

    <root>/caltech101/101_ObjectCategories/<category>/image_0001.jpg
    <root>/caltech101/split_zhou_Caltech101.json                      (X-TAIL)
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

# In the label order of torchvision's class: its sorted category folders without BACKGROUND_Google.
CLASSNAMES = (
    "off-center face",
    "centered face",
    "leopard",
    "motorbike",
    "accordion",
    "airplane",
    "anchor",
    "ant",
    "barrel",
    "bass",
    "beaver",
    "binocular",
    "bonsai",
    "brain",
    "brontosaurus",
    "buddha",
    "butterfly",
    "camera",
    "cannon",
    "side of a car",
    "ceiling fan",
    "cellphone",
    "chair",
    "chandelier",
    "body of a cougar cat",
    "face of a cougar cat",
    "crab",
    "crayfish",
    "crocodile",
    "head of a  crocodile",  # CLIP's list has the double space; the tokenizer collapses it
    "cup",
    "dalmatian",
    "dollar bill",
    "dolphin",
    "dragonfly",
    "electric guitar",
    "elephant",
    "emu",
    "euphonium",
    "ewer",
    "ferry",
    "flamingo",
    "head of a flamingo",
    "garfield",
    "gerenuk",
    "gramophone",
    "grand piano",
    "hawksbill",
    "headphone",
    "hedgehog",
    "helicopter",
    "ibis",
    "inline skate",
    "joshua tree",
    "kangaroo",
    "ketch",
    "lamp",
    "laptop",
    "llama",
    "lobster",
    "lotus",
    "mandolin",
    "mayfly",
    "menorah",
    "metronome",
    "minaret",
    "nautilus",
    "octopus",
    "okapi",
    "pagoda",
    "panda",
    "pigeon",
    "pizza",
    "platypus",
    "pyramid",
    "revolver",
    "rhino",
    "rooster",
    "saxophone",
    "schooner",
    "scissors",
    "scorpion",
    "sea horse",
    "snoopy (cartoon beagle)",
    "soccer ball",
    "stapler",
    "starfish",
    "stegosaurus",
    "stop sign",
    "strawberry",
    "sunflower",
    "tick",
    "trilobite",
    "umbrella",
    "watch",
    "water lilly",
    "wheelchair",
    "wild cat",
    "windsor chair",
    "wrench",
    "yin and yang symbol",
)

# CLIP's 34 prompts for object datasets
_MTIL_TEMPLATES = (
    "a photo of a {}.",
    "a painting of a {}.",
    "a plastic {}.",
    "a sculpture of a {}.",
    "a sketch of a {}.",
    "a tattoo of a {}.",
    "a toy {}.",
    "a rendition of a {}.",
    "a embroidered {}.",
    "a cartoon {}.",
    "a {} in a video game.",
    "a plushie {}.",
    "a origami {}.",
    "art of a {}.",
    "graffiti of a {}.",
    "a drawing of a {}.",
    "a doodle of a {}.",
    "a photo of the {}.",
    "a painting of the {}.",
    "the plastic {}.",
    "a sculpture of the {}.",
    "a sketch of the {}.",
    "a tattoo of the {}.",
    "the toy {}.",
    "a rendition of the {}.",
    "the embroidered {}.",
    "the cartoon {}.",
    "the {} in a video game.",
    "the plushie {}.",
    "the origami {}.",
    "art of the {}.",
    "graffiti of the {}.",
    "a drawing of the {}.",
    "a doodle of the {}.",
)


def read(request: ReadRequest) -> DatasetSplits:
    from torchvision import datasets

    from codyra.data import sources
    from codyra.data.samples import random_split_80_20

    root = request.root
    dataset = datasets.Caltech101(str(root))
    # torchvision's own file naming: image_0001.jpg ... per category folder.
    paths = [
        root / "caltech101" / "101_ObjectCategories" / dataset.categories[label] / f"image_{index:04d}.jpg"
        for index, label in zip(dataset.index, dataset.y, strict=True)
    ]
    train, test = random_split_80_20(sources.files(root, paths, dataset.y))
    return DatasetSplits(sources.hand_written(CLASSNAMES, len(dataset.categories)), train, test)


DATASET = Dataset(
    name="Caltech101",
    layout=TorchvisionLayout("caltech101", ("caltech101/101_ObjectCategories/",), download_hint("Caltech101")),
    expected={MTIL: Expected(101, 6_941, 1_736), XTAIL: Expected(100, 4_128, 2_465)},
    templates={MTIL: _MTIL_TEMPLATES, XTAIL: ("a photo of a {}.",)},
    reader=read,
    coop=CoopSplit("caltech101/split_zhou_Caltech101.json", "caltech101/101_ObjectCategories"),
    classnames=CLASSNAMES,
)
