"""CLIP's evaluation preprocessing and the training augmentations.

Training randomness comes only from the `torch.Generator` passed in, never from torch's
global RNG: jobs run as threads of one process and a resumed run must see the same crops.
Both transforms are plain picklable objects so DataLoader workers can use them.
"""

from __future__ import annotations

import math

import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F

from codyra.data.tasks import ImageConfig

# Training augmentations (train.augmentation): RandomResizedCrop(scale=(0.9, 1)), bicubic, with
# torchvision's default aspect-ratio range, then a horizontal flip or not:
# - paper: with flips, the paper's appendix ("random resized crops and horizontal flips", every method);
# - zscl: without, ZSCL's and MoE-Adapters' own (clip.py _transform(is_train=True)).
AUGMENTATION_FLIPS = {"paper": True, "zscl": False}
CROP_SCALE = (0.9, 1.0)
CROP_RATIO = (3 / 4, 4 / 3)
FLIP_PROBABILITY = 0.5


def _uint8_tensor(image: Image.Image) -> torch.Tensor:
    """[3, H, W] uint8, contiguous as ``to_tensor``'s output (a permuted view would carry its
    strides into the float image, and a model's kernels may pick another algorithm for them)."""
    return F.pil_to_tensor(image).contiguous()


def normalise(images: torch.Tensor, config: ImageConfig) -> torch.Tensor:
    """uint8 images ([3, H, W] or [B, 3, H, W]) as the model's input: scaled to [0, 1], then
    normalised; torchvision's ``to_tensor`` and ``normalize`` operations in their order, so the
    result is bitwise the same for one image or a batch, on any device."""
    return F.normalize(images.to(torch.get_default_dtype()).div(255), mean=list(config.mean), std=list(config.std))


class EvalTransform:
    """Same output as open_clip's `image_transform(size, is_train=False, mean, std)`:
    shortest side resized to `size` (bicubic), centre crop, to tensor, normalise. The first two
    steps (``crop``) are what an evaluation cache stores; ``normalise`` is the rest."""

    def __init__(self, image: ImageConfig):
        self.image = image

    def describe(self) -> dict:
        """What determines ``crop``'s output besides the image: recorded with a cache of it."""
        return {"resize": "shortest side, bicubic", "crop": "centre", "size": self.image.size}

    def crop(self, image: Image.Image) -> torch.Tensor:
        """uint8 [3, size, size]: resized (shortest side, bicubic) and centre-cropped."""
        size = self.image.size
        image = F.resize(image, size, interpolation=InterpolationMode.BICUBIC)
        return _uint8_tensor(F.center_crop(image, [size, size]))

    def __call__(self, image: Image.Image) -> torch.Tensor:
        return normalise(self.crop(image), self.image)


def random_resized_crop_box(
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator,
) -> tuple[int, int, int, int]:
    """(top, left, crop height, crop width) drawn like torchvision's RandomResizedCrop.

    Up to ten tries at a box of random area fraction and log-uniform aspect ratio that fits
    the image; otherwise the largest centred box whose aspect ratio is within range. The
    draws are the same ones torchvision makes, taken from `generator`.
    """
    area = height * width
    log_low, log_high = torch.log(torch.tensor(ratio))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1], generator=generator).item()
        aspect = torch.exp(torch.empty(1).uniform_(log_low, log_high, generator=generator)).item()
        crop_width = round(math.sqrt(target_area * aspect))
        crop_height = round(math.sqrt(target_area / aspect))
        if 0 < crop_width <= width and 0 < crop_height <= height:
            top = torch.randint(0, height - crop_height + 1, (1,), generator=generator).item()
            left = torch.randint(0, width - crop_width + 1, (1,), generator=generator).item()
            return top, left, crop_height, crop_width

    image_ratio = width / height
    if image_ratio < min(ratio):
        crop_width, crop_height = width, round(width / min(ratio))
    elif image_ratio > max(ratio):
        crop_width, crop_height = round(height * max(ratio)), height
    else:
        crop_width, crop_height = width, height
    return (height - crop_height) // 2, (width - crop_width) // 2, crop_height, crop_width


class TrainTransform:
    """Random resized crop (bicubic), a horizontal flip where ``augmentation`` has one, normalise;
    driven by a generator."""

    def __init__(self, image: ImageConfig, augmentation: str = "paper"):
        if augmentation not in AUGMENTATION_FLIPS:
            raise ValueError(f"unknown augmentation {augmentation!r}; known: {', '.join(AUGMENTATION_FLIPS)}")
        self.image, self.flips = image, AUGMENTATION_FLIPS[augmentation]

    def __call__(self, image: Image.Image, generator: torch.Generator) -> torch.Tensor:
        size = self.image.size
        top, left, height, width = random_resized_crop_box(image.height, image.width, CROP_SCALE, CROP_RATIO, generator)
        image = F.resized_crop(image, top, left, height, width, [size, size], interpolation=InterpolationMode.BICUBIC)
        if self.flips and torch.rand(1, generator=generator).item() < FLIP_PROBABILITY:
            image = F.hflip(image)
        return normalise(_uint8_tensor(image), self.image)
