"""`codyra data prepare --from coop SRC --config CONFIG`: the layout of data.root, linked from the
folders users already hold.

Most users keep these datasets as CoOp's DATASETS.md lays them out (KaiyangZhou/CoOp, followed by
RAIL and others): ``oxford_pets/``, ``caltech-101/``, ``dtd/``, ``eurosat/``, ``fgvc_aircraft/``,
``food-101/``, ``oxford_flowers/``, ``stanford_cars/``, ``sun397/``, ``imagenet/``, each with its
``split_zhou_*.json``. The readers expect torchvision's layout (:mod:`codyra.data.datasets`), which
holds the same files under other folder names. Preparing creates the folders of data.root and
links CoOp's files into them by symbolic links (nothing is copied; an existing file or link is
never replaced), then says for each dataset what it linked and what is still missing.

Pure Python: registering the command imports nothing heavy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from codyra.data.catalog import PROTOCOLS, requirement
from codyra.data.presence import benchmark_datasets, missing_required
from codyra.data.reference import CC_CAPTIONS, IMAGENET_TRAIN, OBTAIN


@dataclass(frozen=True)
class Link:
    """``target`` (under data.root) links to ``source`` (under CoOp's folder); with ``entries``,
    ``target`` is a folder of ours and each entry of the folder ``source`` is linked into it by name
    (a folder of ours can then take files CoOp's lacks without writing into CoOp's tree)."""

    target: str
    source: str
    entries: bool = False


# CoOp's DATASETS.md folders -> torchvision's layout (the paths of codyra.data.datasets).
COOP_LAYOUT = {
    # CoOp: fgvc-aircraft-2013b/data renamed fgvc_aircraft (images/, images_variant_*.txt, variants.txt)
    "Aircraft": (Link("fgvc-aircraft-2013b/data", "fgvc_aircraft", entries=True),),
    # caltech-101/{101_ObjectCategories/, split_zhou_Caltech101.json}
    "Caltech101": (Link("caltech101", "caltech-101", entries=True),),
    # dtd-r1.0.1 extracted: dtd/{images/, labels/, imdb/} plus split_zhou_DescribableTextures.json;
    # torchvision nests the archive's dtd/ in a dtd/ of its own
    "DTD": (Link("dtd/dtd", "dtd", entries=True),),
    # eurosat/{2750/, split_zhou_EuroSAT.json}: the same names
    "EuroSAT": (Link("eurosat", "eurosat", entries=True),),
    # oxford_flowers/{jpg/, imagelabels.mat, cat_to_name.json, split_zhou_OxfordFlowers.json}: CoOp
    # lists no setid.mat, which MTIL's official split (torchvision's Flowers102) reads
    "Flowers": (Link("flowers-102", "oxford_flowers", entries=True),),
    # food-101/{images/, meta/, split_zhou_Food101.json}: the same names
    "Food": (Link("food-101", "food-101", entries=True),),
    # oxford_pets/{images/, annotations/, split_zhou_OxfordPets.json}
    "OxfordPet": (Link("oxford-iiit-pet", "oxford_pets", entries=True),),
    # stanford_cars/{cars_train/, cars_test/, devkit/, cars_test_annos_withlabels.mat, split_zhou_StanfordCars.json}
    "StanfordCars": (Link("stanford_cars", "stanford_cars", entries=True),),
    # sun397/{SUN397/ (the letter folders, ClassName.txt), split_zhou_SUN397.json}: ours keeps the
    # split file inside SUN397/
    "SUN397": (
        Link("SUN397", "sun397/SUN397", entries=True),
        Link("SUN397/split_zhou_SUN397.json", "sun397/split_zhou_SUN397.json"),
    ),
    # imagenet/images/val/<wnid>/ (CoOp reads val from class folders, as ours)
    "ImageNet": (Link("imagenet/val", "imagenet/images/val"),),
}
# ZSCL's reference images: imagenet/images/train/<wnid>/ (CoOp's training folders)
COOP_REFERENCE = (Link(IMAGENET_TRAIN.rstrip("/"), "imagenet/images/train"),)
COOP_SOURCE = "https://github.com/KaiyangZhou/CoOp/blob/main/DATASETS.md"


@dataclass
class Linked:
    """What linking did: links made, links already there, existing paths kept, sources not found."""

    made: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)


def _link(target: Path, source: Path, linked: Linked) -> None:
    if os.path.lexists(target):
        same = target.is_symlink() and Path(os.readlink(target)) == source
        (linked.already if same else linked.kept).append(str(target))
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(source, target)
    linked.made.append(str(target))


def _inside_link(root: Path, target: Path) -> Path | None:
    """The first folder from ``root`` down to ``target`` that is a link: writing below it would
    write into another tree."""
    path = root
    for part in target.relative_to(root).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def link_all(links, source_root: Path, root: Path) -> Linked:
    """Make ``links`` from CoOp's folder ``source_root`` into ``root``, replacing nothing."""
    linked = Linked()
    for link in links:
        source, target = source_root / link.source, root / link.target
        if not os.path.lexists(source):
            linked.absent.append(str(source))
            continue
        through = _inside_link(root, target if link.entries else target.parent)
        if through is not None:  # a link the user made: its tree is not ours to write into
            linked.kept.append(str(through))
        elif link.entries:
            target.mkdir(parents=True, exist_ok=True)
            for name in sorted(os.listdir(source)):
                _link(target / name, source / name, linked)
        else:
            _link(target, source, linked)
    return linked


@dataclass
class Prepared:
    dataset: str
    lines: list[str]
    complete: bool


def _summary(linked: Linked, source_root: Path, root: Path) -> list[str]:
    """What linking did, paths under the data root relative to it."""

    def names(paths: list[str]) -> str:
        return ", ".join(os.path.relpath(path, root) for path in paths)

    lines = []
    if linked.made:
        lines.append(f"linked {len(linked.made)}: {names(linked.made)}")
    if linked.already:
        lines.append(f"already linked {len(linked.already)}")
    if linked.kept:
        lines.append(f"kept as they are (never replaced): {names(linked.kept)}")
    if linked.absent:
        lines.append(f"not in {source_root}: " + ", ".join(linked.absent) + f" (CoOp's layout: {COOP_SOURCE})")
    return lines


def prepare_dataset(name: str, protocol: str, source_root: Path, root: Path) -> Prepared:
    """Link one dataset from CoOp's folder (if CoOp holds it) and say what is still missing."""
    lines = []
    if name in COOP_LAYOUT:
        lines += _summary(link_all(COOP_LAYOUT[name], source_root, root), source_root, root)
    missing = missing_required(name, protocol, root)
    if missing:
        obtain = requirement(name, protocol).obtain.replace("<root>", str(root))
        where = "still missing" if name in COOP_LAYOUT else "not in CoOp's layout; missing"
        lines.append(f"{where}: " + ", ".join(missing) + f"; how to obtain it: {obtain}")
    return Prepared(name, lines or ["present"], not missing)


def prepare_reference(source_root: Path, root: Path) -> Prepared:
    """ZSCL's reference data: ImageNet's training images from CoOp's folder; the captions are not
    part of CoOp's layout."""
    lines = _summary(link_all(COOP_REFERENCE, source_root, root), source_root, root)
    missing = [relative for relative in (IMAGENET_TRAIN, CC_CAPTIONS) if not os.path.exists(root / relative)]
    lines += [f"missing: {root / relative} ({OBTAIN[relative].replace('<root>', str(root))})" for relative in missing]
    return Prepared("reference data (data.reference, kind zscl)", lines or ["present"], not missing)


def prepare_from_coop(cfg: dict, source_root: Path, root: Path) -> list[Prepared]:
    """Link every dataset ``cfg`` names (and ZSCL's reference data where data.reference is of kind
    zscl) from CoOp's folder ``source_root`` into the data root ``root``, created if absent."""
    protocol = cfg["data"]["kind"]
    if protocol not in PROTOCOLS:
        raise ValueError(f"data prepare applies to data.kind mtil or xtail, not {protocol!r}")
    source_root, root = source_root.absolute(), root.absolute()
    if not source_root.is_dir():
        raise FileNotFoundError(f"{source_root} is not a folder: give the folder that holds CoOp's dataset folders")
    root.mkdir(parents=True, exist_ok=True)
    prepared = [prepare_dataset(name, protocol, source_root, root) for name in benchmark_datasets(cfg)]
    reference = cfg["data"]["reference"]
    if reference is not None and reference["kind"] == "zscl":
        prepared.append(prepare_reference(source_root, root))
    return prepared


def format_prepared(prepared: list[Prepared], source_root: Path, root: Path) -> str:
    lines = [f"codyra data prepare: CoOp's layout in {source_root} linked into data root {root}", ""]
    for item in prepared:
        lines.append(f"{item.dataset}:")
        lines += [f"  {line}" for line in item.lines]
    complete = sum(item.complete for item in prepared)
    lines += ["", f"{complete} of {len(prepared)} complete; `codyra data check` reads them as the grid will"]
    return "\n".join(lines)
