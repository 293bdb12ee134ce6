"""Deterministic k-shot training subsets, pinned by a manifest file for a whole run.

The first job that needs a subset draws it and publishes the manifest atomically; every
other job (and every resume) reads the same file, so all of them train on the same images.
Reading validates the file against its content hash, the requested settings and the train
split on disk, so a changed dataset is reported instead of silently mixing subsets.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codyra.data.errors import ManifestMismatchError
from codyra.data.samples import Samples

MANIFEST_FORMAT = "codyra-fewshot-manifest/1"


def sample_fewshot(labels, k: int, seed: int) -> list[int]:
    """Positions of k samples per class (every sample of a class that has fewer than k).

    Classes are visited in label order with one seeded RNG, so the result depends only on
    the labels' order, which the split loaders make deterministic.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    by_class: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        by_class.setdefault(label, []).append(position)
    rng = random.Random(seed)
    chosen = []
    for label in sorted(by_class):
        members = by_class[label]
        chosen += sorted(rng.sample(members, min(k, len(members))))
    return chosen


@dataclass(frozen=True)
class FewShotManifest:
    dataset: str
    protocol: str
    k: int
    seed: int
    train_fingerprint: str  # Samples.fingerprint() of the full train split drawn from
    chosen: dict[int, list]  # label -> image keys (relative paths, or indices for CIFAR100/MNIST)

    @classmethod
    def draw(cls, dataset: str, protocol: str, k: int, seed: int, train: Samples) -> FewShotManifest:
        chosen: dict[int, list] = {}
        for position in sample_fewshot(train.labels, k, seed):
            chosen.setdefault(train.labels[position], []).append(train.keys[position])
        return cls(dataset, protocol, k, seed, train.fingerprint(), chosen)

    def _body(self) -> dict:
        return {
            "format": MANIFEST_FORMAT,
            "dataset": self.dataset,
            "protocol": self.protocol,
            "k": self.k,
            "seed": self.seed,
            "train_fingerprint": self.train_fingerprint,
            "chosen": {str(label): keys for label, keys in sorted(self.chosen.items())},
        }

    def to_json(self) -> dict:
        body = self._body()
        return {**body, "content_sha256": _content_hash(body)}

    @classmethod
    def from_json(cls, content: dict, source: Path) -> FewShotManifest:
        body = {key: value for key, value in content.items() if key != "content_sha256"}
        if body.get("format") != MANIFEST_FORMAT:
            raise ManifestMismatchError(f"{source} is not a {MANIFEST_FORMAT} file")
        if content.get("content_sha256") != _content_hash(body):
            raise ManifestMismatchError(
                f"{source} does not match its content_sha256 (edited or truncated); "
                "restore it, or delete it to draw a new subset"
            )
        chosen = {int(label): keys for label, keys in body["chosen"].items()}
        return cls(body["dataset"], body["protocol"], body["k"], body["seed"], body["train_fingerprint"], chosen)

    def positions(self, train: Samples) -> list[int]:
        """Where the chosen images sit in `train`, class by class."""
        position_of = {key: position for position, key in enumerate(train.keys)}
        positions = []
        for label, keys in sorted(self.chosen.items()):
            for key in keys:
                if key not in position_of or train.labels[position_of[key]] != label:
                    raise ManifestMismatchError(f"manifest image {key!r} (class {label}) is not in the train split")
                positions.append(position_of[key])
        return positions

    def __len__(self) -> int:
        return sum(len(keys) for keys in self.chosen.values())


def _content_hash(body: dict) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_manifest(path: str | Path) -> FewShotManifest:
    path = Path(path)
    with open(path, encoding="utf-8") as file:
        return FewShotManifest.from_json(json.load(file), path)


def write_manifest(path: str | Path, manifest: FewShotManifest) -> bool:
    """Publish the manifest unless one exists already; True if this call wrote it.

    The file appears complete or not at all (written aside, then hard-linked into place),
    and the link fails rather than overwrite, so concurrent jobs agree on one file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        json.dump(manifest.to_json(), tmp, indent=1)
        tmp.write("\n")
        tmp.flush()
        os.fsync(tmp.fileno())
    try:
        os.link(tmp.name, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp.name)


def load_or_create_manifest(
    path: str | Path, *, dataset: str, protocol: str, k: int, seed: int, train: Samples
) -> FewShotManifest:
    """The run's manifest for this dataset: read it, or draw and publish it first.

    Raises ManifestMismatchError when the file was made for other settings or for a train
    split that differs from the one on disk now.
    """
    path = Path(path)
    if not path.exists():
        write_manifest(path, FewShotManifest.draw(dataset, protocol, k, seed, train))
    manifest = read_manifest(path)
    asked = (dataset, protocol, k, seed)
    found = (manifest.dataset, manifest.protocol, manifest.k, manifest.seed)
    if found != asked:
        raise ManifestMismatchError(
            f"{path} holds the subset for (dataset, protocol, k, seed) = {found}, not {asked}; "
            "give each setting its own manifest path"
        )
    if manifest.train_fingerprint != train.fingerprint():
        raise ManifestMismatchError(
            f"{path} was drawn from a different {dataset} train split than the one on disk now "
            "(files added, removed or relabelled since); restore the data, or delete the manifest "
            "to draw a new subset (the run then trains on different images)"
        )
    return manifest
