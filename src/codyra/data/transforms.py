"""CLIP's evaluation preprocessing and the paper's training augmentation.

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

# The paper's augmentation: RandomResizedCrop(scale=(0.9, 1)) as in the official code, plus
# horizontal flips; the aspect-ratio range is torchvision's default.
CROP_SCALE = (0.9, 1.0)
CROP_RATIO = (3 / 4, 4 / 3)
FLIP_PROBABILITY = 0.5


def _to_normalised_tensor(image: Image.Image, config: ImageConfig) -> torch.Tensor:
    return F.normalize(F.to_tensor(image), mean=list(config.mean), std=list(config.std))


class EvalTransform:
    """Same output as open_clip's `image_transform(size, is_train=False, mean, std)`:
    shortest side resized to `size` (bicubic), centre crop, to tensor, normalise."""

    def __init__(self, image: ImageConfig):
        self.image = image

    def __call__(self, image: Image.Image) -> torch.Tensor:
        size = self.image.size
        image = F.resize(image, size, interpolation=InterpolationMode.BICUBIC)
        image = F.center_crop(image, [size, size])
        return _to_normalised_tensor(image, self.image)


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
    """Random resized crop (bicubic) + horizontal flip + normalise, driven by a generator."""

    def __init__(self, image: ImageConfig):
        self.image = image

    def __call__(self, image: Image.Image, generator: torch.Generator) -> torch.Tensor:
        size = self.image.size
        top, left, height, width = random_resized_crop_box(image.height, image.width, CROP_SCALE, CROP_RATIO, generator)
        image = F.resized_crop(image, top, left, height, width, [size, size], interpolation=InterpolationMode.BICUBIC)
        if torch.rand(1, generator=generator).item() < FLIP_PROBABILITY:
            image = F.hflip(image)
        return _to_normalised_tensor(image, self.image)
