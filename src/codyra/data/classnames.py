"""Class names: CLIP's hand-written lists where MTIL does not use torchvision's names.

Each list is in the label order of torchvision's class for that dataset (sorted category
folders for Caltech101 without BACKGROUND_Google and EuroSAT; label 1..102 for Flowers).
"""

from __future__ import annotations

CALTECH101 = (
    "off-center face", "centered face", "leopard", "motorbike", "accordion", "airplane",
    "anchor", "ant", "barrel", "bass", "beaver", "binocular", "bonsai", "brain",
    "brontosaurus", "buddha", "butterfly", "camera", "cannon", "side of a car",
    "ceiling fan", "cellphone", "chair", "chandelier", "body of a cougar cat",
    "face of a cougar cat", "crab", "crayfish", "crocodile",
    "head of a  crocodile",  # CLIP's list has the double space; the tokenizer collapses it
    "cup", "dalmatian", "dollar bill", "dolphin", "dragonfly", "electric guitar",
    "elephant", "emu", "euphonium", "ewer", "ferry", "flamingo", "head of a flamingo",
    "garfield", "gerenuk", "gramophone", "grand piano", "hawksbill", "headphone",
    "hedgehog", "helicopter", "ibis", "inline skate", "joshua tree", "kangaroo", "ketch",
    "lamp", "laptop", "llama", "lobster", "lotus", "mandolin", "mayfly", "menorah",
    "metronome", "minaret", "nautilus", "octopus", "okapi", "pagoda", "panda", "pigeon",
    "pizza", "platypus", "pyramid", "revolver", "rhino", "rooster", "saxophone",
    "schooner", "scissors", "scorpion", "sea horse", "snoopy (cartoon beagle)",
    "soccer ball", "stapler", "starfish", "stegosaurus", "stop sign", "strawberry",
    "sunflower", "tick", "trilobite", "umbrella", "watch", "water lilly", "wheelchair",
    "wild cat", "windsor chair", "wrench", "yin and yang symbol",
)

EUROSAT = (
    "annual crop land", "forest", "brushland or shrubland", "highway or road",
    "industrial buildings or commercial buildings", "pasture land", "permanent crop land",
    "residential buildings or homes or apartments", "river", "lake or sea",
)

FLOWERS = (
    "pink primrose", "hard-leaved pocket orchid", "canterbury bells", "sweet pea",
    "english marigold", "tiger lily", "moon orchid", "bird of paradise", "monkshood",
    "globe thistle", "snapdragon", "colt's foot", "king protea", "spear thistle",
    "yellow iris", "globe-flower", "purple coneflower", "peruvian lily", "balloon flower",
    "giant white arum lily", "fire lily", "pincushion flower", "fritillary", "red ginger",
    "grape hyacinth", "corn poppy", "prince of wales feathers", "stemless gentian",
    "artichoke", "sweet william", "carnation", "garden phlox", "love in the mist",
    "mexican aster", "alpine sea holly", "ruby-lipped cattleya", "cape flower",
    "great masterwort", "siam tulip", "lenten rose", "barbeton daisy", "daffodil",
    "sword lily", "poinsettia", "bolero deep blue", "wallflower", "marigold", "buttercup",
    "oxeye daisy", "common dandelion", "petunia", "wild pansy", "primula", "sunflower",
    "pelargonium", "bishop of llandaff", "gaura", "geranium", "orange dahlia",
    "pink-yellow dahlia", "cautleya spicata", "japanese anemone", "black-eyed susan",
    "silverbush", "californian poppy", "osteospermum", "spring crocus", "bearded iris",
    "windflower", "tree poppy", "gazania", "azalea", "water lily", "rose", "thorn apple",
    "morning glory", "passion flower", "lotus", "toad lily", "anthurium", "frangipani",
    "clematis", "hibiscus", "columbine", "desert-rose", "tree mallow", "magnolia",
    "cyclamen", "watercress", "canna lily", "hippeastrum", "bee balm", "ball moss",
    "foxglove", "bougainvillea", "camellia", "mallow", "mexican petunia", "bromelia",
    "blanket flower", "trumpet creeper", "blackberry lily",
)

HAND_WRITTEN = {"Caltech101": CALTECH101, "EuroSAT": EUROSAT, "Flowers": FLOWERS}


def underscores_to_spaces(names) -> tuple[str, ...]:
    """MTIL's treatment of torchvision's class names."""
    return tuple(name.replace("_", " ") for name in names)


# X-TAIL takes CoOp's names verbatim, with the RAIL protocol's two adjustments.
XTAIL_EUROSAT_SUFFIX = " satellite location"


def xtail_mnist(names) -> tuple[str, ...]:
    # RAIL (and the CoDyRA code) wrap torchvision's names before filling the template
    # 'a photo of the number: "{}".', so the prompt reads ...number: "number: "0 - zero"".
    return tuple(f'number: "{name}"' for name in names)
