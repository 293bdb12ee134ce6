"""Test sets decoded once: every image of a split through the evaluation transform's resize and
centre crop, stored as uint8 at the model's input resolution and normalised on the device.

A cell otherwise decodes each JPEG of its task again for every row of every run; a cache turns
that into one read of a file per batch (and a quarter of the bytes moved to the GPU). A cache
is a folder holding two files:

- ``images.npy``: uint8 ``[N, 3, S, S]``, ``EvalTransform.crop`` of each test image, in split
  order; NumPy's format, opened as a memory map with ``allow_pickle=False``;
- ``manifest.json``, written last (its presence means the cache is complete): the format, the
  transform's description, the labels, a CRC-32 per image, and the state of the images it was
  built from (their keys and labels; each file's size and modification time, or the in-memory
  arrays' digest).

Opening a cache checks its manifest against the split and the transform: a cache of other
images, an edited image, another transform or another format is refused with the fix named,
before any compute. Each image's CRC-32 is checked as it is read (about 3 GB/s a core, far
below decoding), so a flipped byte fails the job instead of scoring a corrupt image. The values
a model sees are bitwise those of the JPEG path (``codyra.data.transforms.normalise``).
"""

from __future__ import annotations

import logging
import os
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Subset

from codyra.data.samples import Samples
from codyra.data.tasks import ImageConfig
from codyra.data.transforms import EvalTransform, normalise
from codyra.progress import progress_bar
from codyra.store.io import ResultError, atomic_write, read_json, write_json
from codyra.store.paths import EVAL_CACHE_IMAGES, EVAL_CACHE_MANIFEST

FORMAT = 1
BUILD_BATCH = 64  # images per decoding batch of the build
log = logging.getLogger(__name__)


class EvalCacheError(ResultError):
    """An evaluation cache is missing, stale or corrupt; the message names it and how to rebuild it."""


def _rebuild_hint(directory: Path) -> str:
    return (
        f"rebuild it: delete {directory} and rerun the workflow (its eval_cache job writes it again), "
        "or run `codyra eval-cache --task <task>`"
    )


def source_state(samples: Samples) -> str:
    """What a cache of ``samples`` was built from: the split's keys and labels, and the images' state."""
    return f"{samples.fingerprint()}:{samples.images.state(samples.keys)}"


class _CroppedImages(Dataset):
    """The split's images as ``EvalTransform.crop`` leaves them (what a cache stores)."""

    def __init__(self, samples: Samples, transform: EvalTransform):
        self.samples, self.transform = samples, transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.transform.crop(self.samples.images.load(self.samples.keys[index]))


def build_eval_cache(samples: Samples, transform: EvalTransform, directory: str | Path, *, workers: int) -> dict:
    """Decode ``samples`` through ``transform.crop`` with ``workers`` loader processes into a cache in
    ``directory`` (replacing any there); returns its manifest. A killed build leaves no manifest."""
    directory = Path(directory)
    size, n = transform.image.size, len(samples)
    (directory / EVAL_CACHE_MANIFEST).unlink(missing_ok=True)  # from here on, the folder holds no usable cache
    state = source_state(samples)  # before decoding: an image edited meanwhile makes the cache stale, not wrong
    crcs: list[int] = []

    def write(tmp: str) -> None:
        images = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(n, 3, size, size))
        loader = DataLoader(_CroppedImages(samples, transform), batch_size=BUILD_BATCH, num_workers=workers)
        bar, start = progress_bar(total=n, desc=f"cache {directory.name}"), 0
        for batch in loader:
            block = images[start : start + len(batch)]
            block[:] = batch.numpy()
            crcs.extend(zlib.crc32(image) for image in block)
            start += len(batch)
            bar.update(len(batch))
        bar.close()
        images.flush()
        del images

    atomic_write(directory / EVAL_CACHE_IMAGES, write)
    manifest = {
        "format": FORMAT,
        "transform": transform.describe(),
        "count": n,
        "labels": list(samples.labels),
        "crc32": crcs,
        "source": state,
    }
    write_json(directory / EVAL_CACHE_MANIFEST, manifest)
    return manifest


def has_eval_cache(directory: str | Path) -> bool:
    return (Path(directory) / EVAL_CACHE_MANIFEST).is_file()


def open_eval_cache(directory: str | Path, samples: Samples, transform: EvalTransform) -> CachedEvalSet:
    """The cache in ``directory`` of ``samples`` under ``transform``, checked against both (see the
    module's docstring); an EvalCacheError names what differs and how to rebuild it."""
    directory = Path(directory)
    manifest_path = directory / EVAL_CACHE_MANIFEST
    if not manifest_path.is_file():
        hint = _rebuild_hint(directory)
        raise EvalCacheError(f"no evaluation cache in {directory} (no {EVAL_CACHE_MANIFEST}); {hint}")
    manifest = read_json(manifest_path)

    def refuse(problem: str) -> EvalCacheError:
        return EvalCacheError(f"evaluation cache {directory}: {problem}; {_rebuild_hint(directory)}")

    if manifest.get("format") != FORMAT:
        raise refuse(f"format {manifest.get('format')!r}, this codyra reads format {FORMAT}")
    if manifest["transform"] != transform.describe():
        raise refuse(f"built with the transform {manifest['transform']}, the model needs {transform.describe()}")
    if manifest["count"] != len(samples) or manifest["labels"] != list(samples.labels):
        raise refuse(f"it holds {manifest['count']} images of another split listing than the {len(samples)} now listed")
    if manifest["source"] != source_state(samples):
        raise refuse("an image changed since it was built (a file's size or modification time, or an in-memory array)")
    size = transform.image.size
    try:
        images = np.load(directory / EVAL_CACHE_IMAGES, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:  # absent, truncated (shorter than its header says) or not .npy
        raise refuse(f"{EVAL_CACHE_IMAGES} cannot be read ({err})") from None
    expected = (manifest["count"], 3, size, size)
    if images.shape != expected or images.dtype != np.uint8 or len(manifest["crc32"]) != len(images):
        raise refuse(f"{EVAL_CACHE_IMAGES} holds {images.dtype} {images.shape}, the manifest says uint8 {expected}")
    log.info("evaluation cache %s: %d images", directory, len(images))
    return CachedEvalSet(directory, tuple(manifest["labels"]), tuple(manifest["crc32"]), transform.image)


class CachedEvalSet(Dataset):
    """A cache's images as uint8 ``[3, S, S]`` tensors; ``image`` holds the model's input settings
    (``eval_batches`` normalises on the device). Every image read is checked against its CRC-32."""

    def __init__(self, directory: Path, labels: tuple[int, ...], crcs: tuple[int, ...], image: ImageConfig):
        self.directory, self.labels, self.crcs, self.image = directory, labels, crcs, image
        self._images = None  # the memory map, opened where it is read

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_images": None}

    def __len__(self) -> int:
        return len(self.labels)

    def _map(self) -> np.ndarray:
        if self._images is None:
            self._images = np.load(self.directory / EVAL_CACHE_IMAGES, mmap_mode="r", allow_pickle=False)
        return self._images

    def read(self, positions: list[int], *, pin: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(uint8 images, labels) at ``positions``: one read of the file when they are consecutive, else
        a copy out of the map; into page-locked memory with ``pin`` (an asynchronous copy to the GPU)."""
        images = self._map()
        out = torch.empty((len(positions), *images.shape[1:]), dtype=torch.uint8, pin_memory=pin)
        start = positions[0] if positions else 0
        if list(positions) == list(range(start, start + len(positions))):
            # one read straight into the batch: no page faults on the map (costly on sandboxed and network
            # file systems) and no second copy
            block = memoryview(out.numpy()).cast("B")
            with open(self.directory / EVAL_CACHE_IMAGES, "rb", buffering=0) as file:
                got = os.preadv(file.fileno(), [block], images.offset + start * images[0].nbytes)
            if got != block.nbytes:
                raise EvalCacheError(
                    f"evaluation cache {self.directory}: {EVAL_CACHE_IMAGES} ends before image "
                    f"{start + len(positions) - 1} (the file is truncated); {_rebuild_hint(self.directory)}"
                )
        else:
            out.numpy()[:] = images[positions]
        for image, position in zip(out.numpy(), positions, strict=True):
            if zlib.crc32(image) != self.crcs[position]:
                raise EvalCacheError(
                    f"evaluation cache {self.directory}: image {position} does not match its checksum "
                    f"(the file is corrupt); {_rebuild_hint(self.directory)}"
                )
        labels = torch.tensor([self.labels[p] for p in positions])
        # pinned labels too: a copy from pageable memory waits for the GPU's queue, so the host could
        # not launch the next batch's forward before this one ends
        return out, labels.pin_memory() if pin else labels

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        index = range(len(self))[index]
        images, labels = self.read([index])
        return images[0], int(labels[0])

    def batches(self, positions: list[int], batch_size: int, device: torch.device, threads: int):
        """``read`` of each batch of ``positions``, ``threads`` threads reading ahead (the copies and
        checksums run without the GIL), each batch normalised on ``device`` as it is yielded."""
        chunks = [positions[k : k + batch_size] for k in range(0, len(positions), batch_size)]
        pin = device.type == "cuda"
        with ThreadPoolExecutor(max_workers=threads) as pool:
            ahead: deque = deque()
            for chunk in chunks:
                ahead.append(pool.submit(self.read, chunk, pin=pin))
                if len(ahead) > 2 * threads:
                    yield self._on_device(ahead.popleft().result(), device)
            while ahead:
                yield self._on_device(ahead.popleft().result(), device)

    def _on_device(self, batch: tuple[torch.Tensor, torch.Tensor], device: torch.device):
        images, labels = batch
        return normalise(images.to(device, non_blocking=True), self.image), labels


def eval_batches(dataset, *, batch_size: int, num_workers: int, device: torch.device):
    """(images on ``device`` as the model takes them, labels) per batch of a test set, in order:
    what every evaluation pass reads. ``dataset``: a task's ``test_set()`` (a cache or the decoded
    images), or a ``Subset`` of one. A cache is read by ``num_workers`` threads (at least one) into
    page-locked memory, moved as uint8 (a quarter of the bytes) and normalised on the device; the
    decoded images come through a DataLoader with ``num_workers`` processes."""
    base = dataset.dataset if isinstance(dataset, Subset) else dataset
    if isinstance(base, CachedEvalSet):
        positions = list(dataset.indices) if isinstance(dataset, Subset) else list(range(len(base)))
        yield from base.batches(positions, batch_size, device, threads=max(1, num_workers))
        return
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, pin_memory=device.type == "cuda")
    for images, labels in loader:
        yield images.to(device, non_blocking=True), labels
