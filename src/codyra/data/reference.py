"""Reference data: images and texts a method distils on that belong to no task (config key
``data.reference``; ZSCL's ``--ref-dataset`` / ``--ref-sentences``).

Kinds:

- ``zscl``: ZSCL's MTIL choice (mtil/scripts/ZSCL.sh: ``--ref-dataset ImageNet
  --ref-sentences conceptual_captions``): images of ImageNet's *train* split, read with the
  evaluation transform, from ``<data.root>/imagenet/train/<wnid>/*.JPEG``; texts: every caption
  of Conceptual Captions' validation file as ZSCL reads it
  (``<data.root>/conceptual_captions/Validation_GCC-1.1.0-Validation_output.csv``, tab-separated,
  column ``title``; only the captions are used, never CC's images).
- ``mini-corpus``: the mini benchmark's own pretraining corpus (``codyra.data.scenes.corpus``): its
  first ``size`` image-caption pairs (the corpus is generated in order, so they are exactly
  pairs the model was pretrained on); ``size`` null = the whole ``mini.corpus_size``.

``missing_reference`` only stats files (the DAG build and ``codyra data check`` call it);
``load_reference`` reads them for a training job. Listing ImageNet's 1.28 M training images
takes minutes on a shared filesystem, so the list is kept in the results folder
(:func:`reference_images`) and every later job of a grid reads it instead.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codyra.data.tasks import ImageConfig

IMAGENET_TRAIN = "imagenet/train/"
CC_CAPTIONS = "conceptual_captions/Validation_GCC-1.1.0-Validation_output.csv"
CC_CAPTION_COLUMN = "title"
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
# The list of a reference image folder, one file per folder (named by its path's hash) per results folder.
LISTING = "{results}/reference/images-{folder}.json.gz"
LISTING_FORMAT = "codyra-reference-listing/1"
OBTAIN = {
    IMAGENET_TRAIN: "extract ILSVRC2012_img_train.tar (https://image-net.org/download-images) to "
    "<root>/imagenet/train/ with one folder per WordNet id (n01440764/*.JPEG, ...)",
    CC_CAPTIONS: "download Validation_GCC-1.1.0-Validation.tsv "
    "(https://ai.google.com/research/ConceptualCaptions/download) "
    "and write it as a tab-separated file with a header and a 'title' column of captions (ZSCL's "
    "Validation_GCC-1.1.0-Validation_output.csv, as img2dataset writes it) to <root>/" + CC_CAPTIONS,
}


def reference_config(cfg: dict) -> dict | None:
    return cfg["data"]["reference"]


def missing_reference(cfg: dict) -> list[str]:
    """Absolute paths of the reference files that are absent, each with how to obtain it ([] if complete)."""
    ref = reference_config(cfg)
    if ref is None or ref["kind"] != "zscl":
        return []
    from codyra.data.root import data_root

    root = data_root(cfg)
    missing = []
    for relative in (IMAGENET_TRAIN, CC_CAPTIONS):
        path = root / relative
        present = path.is_dir() if relative.endswith("/") else path.is_file()
        if not present:
            missing.append(
                f"{path}{'/' if relative.endswith('/') else ''} ({OBTAIN[relative].replace('<root>', str(root))})"
            )
    return missing


def require_reference(cfg: dict, method_name: str | None = None) -> dict:
    """The reference config, checked to be set and present on disk (stat calls only)."""
    ref = reference_config(cfg)
    who = f"method {method_name!r}" if method_name else "this benchmark"
    if ref is None:
        raise ValueError(
            f"{who} distils on reference data but config key data.reference is not set: set it to "
            "{kind: zscl} (ImageNet train images + Conceptual Captions texts under data.root, as ZSCL) "
            "or {kind: mini-corpus} (the mini benchmark's pretraining corpus)"
        )
    missing = missing_reference(cfg)
    if missing:
        raise FileNotFoundError(
            f"the reference data of data.reference (kind {ref['kind']}) is incomplete; missing:\n  "
            + "\n  ".join(missing)
        )
    return ref


@dataclass
class ReferenceData:
    images: object  # a torch Dataset: index -> normalised image tensor [3, H, W]
    texts: list[str]


def folder_stamp(folder: Path) -> list:
    """What changes when a file is added to, removed from or renamed in ``folder``'s class folders:
    the modification time of ``folder`` and of each entry in it (one directory read and a stat
    per class folder, never a walk of the class folders)."""
    with os.scandir(folder) as entries:
        stamp = sorted([entry.name, entry.stat().st_mtime_ns] for entry in entries)
    return [folder.stat().st_mtime_ns, stamp]


def list_images(folder: Path) -> list[str]:
    """The images in ``folder``'s class folders, as paths relative to it, in path order."""
    files = []
    with os.scandir(folder) as classes:
        for entry in classes:
            if entry.is_dir():
                with os.scandir(entry.path) as images:
                    files += [f"{entry.name}/{i.name}" for i in images if Path(i.name).suffix.lower() in IMAGE_SUFFIXES]
    return sorted(files, key=lambda relative: relative.split("/"))


def reference_images(cfg: dict, folder: Path) -> list[Path]:
    """The images in ``folder``'s class folders, listed once per results folder: the first job
    writes the list (atomically) with the folder's stamp (:func:`folder_stamp`), later jobs read
    it while the stamp is unchanged, and list the folder again (and rewrite the list) once it is not."""
    from codyra.store.io import atomic_write
    from codyra.store.paths import results_path

    folder = folder.absolute()
    path = results_path(cfg, LISTING, folder=hashlib.sha256(str(folder).encode()).hexdigest()[:16])
    stamp = folder_stamp(folder)  # before listing: a change while listing is seen by the next job
    try:
        listing = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError):  # none yet, or unreadable: list the folder again
        listing = None
    expected = {"format": LISTING_FORMAT, "folder": str(folder), "stamp": stamp}
    if not (isinstance(listing, dict) and all(listing.get(key) == value for key, value in expected.items())):
        listing = {**expected, "files": list_images(folder)}
        blob = gzip.compress(json.dumps(listing, separators=(",", ":")).encode())
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(blob))
    return [folder / relative for relative in listing["files"]]


class _ImageFolderFiles:
    """Images listed under class folders, read with the evaluation transform (picklable)."""

    def __init__(self, root: Path, paths: list[Path], transform):
        if not paths:
            raise FileNotFoundError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in the class folders of {root}")
        self.paths = paths
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        from PIL import Image

        with Image.open(self.paths[index]) as image:
            return self.transform(image.convert("RGB"))


class _Pixels:
    def __init__(self, pixels):
        self.pixels = pixels

    def __len__(self):
        return len(self.pixels)

    def __getitem__(self, index):
        return self.pixels[index]


def _captions(path: Path) -> list[str]:
    import pandas as pd

    frame = pd.read_csv(path, sep="\t")
    if CC_CAPTION_COLUMN not in frame.columns:
        raise ValueError(
            f"{path} has no column {CC_CAPTION_COLUMN!r} (columns: {list(frame.columns)}); {OBTAIN[CC_CAPTIONS]}"
        )
    texts = [str(t) for t in frame[CC_CAPTION_COLUMN].tolist()]
    if not texts:
        raise ValueError(f"{path} lists no captions")
    return texts


def mini_corpus_pixels(cfg: dict, size: int, image: ImageConfig):
    """The first ``size`` corpus images, normalised as pretraining feeds them, and their captions."""
    import torch

    from codyra.data.scenes.corpus import make_corpus

    corpus_size = cfg["mini"]["corpus_size"]
    if size > corpus_size:
        raise ValueError(f"data.reference.size {size} exceeds the pretraining corpus (mini.corpus_size {corpus_size})")
    images, captions = make_corpus(size, cfg["mini"]["data_seed"])
    mean = torch.tensor(image.mean).view(1, 3, 1, 1)
    std = torch.tensor(image.std).view(1, 3, 1, 1)
    pixels = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0 - mean) / std
    return pixels, captions


def load_reference(cfg: dict, image: ImageConfig, method_name: str | None = None) -> ReferenceData:
    ref = require_reference(cfg, method_name)
    if ref["kind"] == "mini-corpus":
        size = ref["size"] or cfg["mini"]["corpus_size"]
        pixels, captions = mini_corpus_pixels(cfg, size, image)
        return ReferenceData(_Pixels(pixels), captions)
    from codyra.data.root import data_root
    from codyra.data.transforms import EvalTransform

    root = data_root(cfg)
    folder = root / IMAGENET_TRAIN
    images = _ImageFolderFiles(folder, reference_images(cfg, folder), EvalTransform(image))
    return ReferenceData(images, _captions(root / CC_CAPTIONS))
