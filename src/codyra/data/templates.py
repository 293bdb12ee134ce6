"""Prompt templates per dataset; `{}` is the class-name placeholder.

MTIL uses CLIP's prompt ensembles (evaluation averages them, training uses the first);
X-TAIL uses CoOp's single template per dataset. RAIL itself does not: its zero-shot classifier
(the fused logits and the domain predictor) embeds every class of every dataset with the one
template ``RAIL_TEMPLATE`` (linghan1997/Regression-based-Analytic-Incremental-Learning
``primal_RAIL.py`` line 234, ``dual_RAIL.py`` line 60), as the X-TAIL paper says.
"""

from __future__ import annotations

from codyra.data.catalog import MTIL, XTAIL, check_name

_OBJECT_34 = (
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

_CIFAR_18 = (
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

MTIL_TEMPLATES = {
    "Aircraft": ("a photo of a {}, a type of aircraft.", "a photo of the {}, a type of aircraft."),
    "Caltech101": _OBJECT_34,
    "CIFAR100": _CIFAR_18,
    "DTD": (
        "a photo of a {} texture.",
        "a photo of a {} pattern.",
        "a photo of a {} thing.",
        "a photo of a {} object.",
        "a photo of the {} texture.",
        "a photo of the {} pattern.",
        "a photo of the {} thing.",
        "a photo of the {} object.",
    ),
    "EuroSAT": (
        "a centered satellite photo of {}.",
        "a centered satellite photo of a {}.",
        "a centered satellite photo of the {}.",
    ),
    "Flowers": ("a photo of a {}, a type of flower.",),
    "Food": ("a photo of a {}, a type of food.",),
    "MNIST": ('a photo of the number: "{}".',),
    "OxfordPet": ("a photo of a {}, a type of pet.",),
    "StanfordCars": (
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
    "SUN397": ("a photo of a {}.", "a photo of the {}."),
    # held-out sets: CLIP's scene prompts (as SUN397) and its 80 ImageNet prompts (in open_clip)
    "Places365": ("a photo of a {}.", "a photo of the {}."),
    "ImageNet": "openai-imagenet",
}

XTAIL_TEMPLATES = {
    "Aircraft": ("a photo of a {}, a type of aircraft.",),
    "Caltech101": ("a photo of a {}.",),
    "DTD": ("{} texture.",),
    "EuroSAT": ("a centered satellite photo of {}.",),
    "Flowers": ("a photo of a {}, a type of flower.",),
    "Food": ("a photo of {}, a type of food.",),
    "MNIST": ('a photo of the number: "{}".',),
    "OxfordPet": ("a photo of a {}, a type of pet.",),
    "StanfordCars": ("a photo of a {}.",),
    "SUN397": ("a photo of a {}.",),
    # held-out sets: CoOp's ImageNet template, which also reproduces the paper's zero-shot
    # ImageNet accuracy of ViT-B/16 (66.72, table "Zero-shot Retention on Unseen Data")
    "CIFAR100": ("a photo of a {}.",),
    "Places365": ("a photo of a {}.",),
    "ImageNet": ("a photo of a {}.",),
}

_TEMPLATES = {MTIL: MTIL_TEMPLATES, XTAIL: XTAIL_TEMPLATES}

RAIL_TEMPLATE = "a photo of a {}."


def templates(name: str, protocol: str) -> tuple[str, ...]:
    check_name(name, protocol)
    found = _TEMPLATES[protocol][name]
    if found == "openai-imagenet":  # imported only here: open_clip pulls in torch
        from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

        return tuple(template("{}") for template in OPENAI_IMAGENET_TEMPLATES)
    return found
