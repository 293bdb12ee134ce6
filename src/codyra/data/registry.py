"""The CLIP benchmark datasets as `codyra.data.tasks.ClassificationTask`s.

    task = build_task("Aircraft", "mtil", root, ImageConfig(224, mean, std),
                      fewshot_k=5, manifest_path=run_dir / "fewshot" / "Aircraft.json")
    train = task.train_set()   # TrainView, items keyed by (index, aug_seed)
    test = task.test_set()     # EvalView, items keyed by int

`build_task` reads only metadata (annotation files, split files, directory listings) and
raises DatasetNotFoundError for a missing or incomplete dataset; `train_set()` and
`test_set()` then check that every image they will read exists. Call both before loading
a model, so a broken dataset fails a job in seconds. Each dataset's module in `codyra.data.datasets`
documents its on-disk layout.

For a whole benchmark config (data.kind mtil or xtail):

    tasks = build_benchmark_tasks(cfg, image, seed)   # lazy sequence, one task per cfg["tasks"]
    task = tasks[i - 1]                               # reads only this dataset's metadata
    space = label_space(tasks)                        # X-TAIL: every dataset's classes
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from codyra.data.catalog import EXPECTED, Expected, requirement
from codyra.data.errors import DatasetNotFoundError
from codyra.data.eval_cache import has_eval_cache, open_eval_cache
from codyra.data.fewshot import load_or_create_manifest, sample_fewshot
from codyra.data.presence import dataset_error
from codyra.data.root import data_root
from codyra.data.samples import DecodedImages, ImageFiles, Samples
from codyra.data.sources import load_splits
from codyra.data.tasks import ClassificationTask, ImageConfig
from codyra.data.templates import templates
from codyra.data.transforms import EvalTransform, TrainTransform
from codyra.data.views import EvalView, TrainView
from codyra.progress import progress_bar
from codyra.store.paths import FEWSHOT_MANIFEST, FEWSHOT_SEED_MANIFEST, eval_cache_dir, results_path

# Both protocols draw their few-shot subsets with seed 42 (X-TAIL: RAIL's setting).
DEFAULT_FEWSHOT_SEED = 42
PER_SEED = "per_seed"  # data.fewshot_seed: each run's seed draws its own subset


@dataclass(frozen=True)
class _NeedsSeed:
    """The training split of a per-seed few-shot subset, asked for without a run's seed."""

    dataset: str

    def __call__(self):
        raise ValueError(
            f"{self.dataset}'s few-shot subset is drawn per seed (config key data.fewshot_seed: {PER_SEED}): "
            "build the benchmark's tasks with the run's seed to read its training images"
        )


@dataclass(frozen=True)
class _CheckedView:
    """Picklable `train_set` / `test_set` factory that refuses to build over missing files."""

    view: type
    samples: Samples
    transform: object
    dataset: str
    protocol: str
    root: Path
    decoded: bool = False  # decode the images once into memory (DecodedImages): a few-shot training set

    def __call__(self):
        missing = self.samples.images.missing(self.samples.keys)
        if missing:
            raise dataset_error(
                self.dataset,
                self.protocol,
                self.root,
                missing=missing,
                problem=f"{len(missing)} of the {len(self.samples)} images this split lists are missing",
            )
        samples = self.samples
        if self.decoded and isinstance(samples.images, ImageFiles):  # in-memory datasets are decoded already
            samples = replace(samples, images=DecodedImages.of(samples.images, samples.keys))
        return self.view(samples, self.transform)


@dataclass(frozen=True)
class _TestSet:
    """Picklable `test_set` factory: the evaluation cache in ``cache`` once one was built there
    (:mod:`codyra.data.eval_cache`: the same pixels, decoded once), else the images decoded as read."""

    checked: _CheckedView
    cache: Path | None

    def __call__(self):
        view = self.checked()  # a missing image fails first, cache or not
        if self.cache is None or not has_eval_cache(self.cache):
            return view
        return open_eval_cache(self.cache, view.samples, view.transform)


def build_task(
    name: str,
    protocol: str,
    root: str | Path,
    image: ImageConfig,
    *,
    fewshot_k: int | None = None,
    fewshot_seed: int | None = DEFAULT_FEWSHOT_SEED,
    manifest_path: str | Path | None = None,
    eval_cache: Path | None = None,
    sun397_order: str = "sorted",
    augmentation: str = "paper",
) -> ClassificationTask:
    """One dataset of a benchmark as a task.

    fewshot_k: train on k images per class (None: the full train split), drawn with
    ``fewshot_seed`` (None: a per-seed draw whose seed is not known here; the training split then
    refuses to build). With manifest_path, the subset is read from that manifest, which the first
    caller writes; without it the subset is drawn in memory (same result, nothing pins it).
    eval_cache: the folder of the test split's evaluation cache (``eval_cache_dir``), read once it
    is built. sun397_order: config key data.sun397_order; augmentation: the training transform's
    (``codyra.data.transforms``).
    """
    root = Path(root).expanduser().absolute()
    splits = load_splits(name, protocol, root, sun397_order)
    test_set = _TestSet(_CheckedView(EvalView, splits.test, EvalTransform(image), name, protocol, root), eval_cache)
    train = splits.train
    fewshot = fewshot_k is not None  # a few hundred images read over and over: decoded once, into memory
    if manifest_path is not None and not fewshot:
        raise ValueError("manifest_path pins a few-shot subset; give fewshot_k as well")
    if fewshot and fewshot_seed is None:  # the subset is drawn per seed, and no seed is given: no training split
        train_set = train_eval_set = _NeedsSeed(name)
    else:
        if fewshot and manifest_path is None:
            train = train.subset(sample_fewshot(train.labels, fewshot_k, fewshot_seed))
        elif fewshot:
            manifest = load_or_create_manifest(
                manifest_path, dataset=name, protocol=protocol, k=fewshot_k, seed=fewshot_seed, train=train
            )
            train = train.subset(manifest.positions(train))
        transform = TrainTransform(image, augmentation)
        train_set = _CheckedView(TrainView, train, transform, name, protocol, root, decoded=fewshot)
        train_eval_set = _CheckedView(EvalView, train, EvalTransform(image), name, protocol, root, decoded=fewshot)
    return ClassificationTask(
        name=name,
        classnames=splits.classnames,
        templates=templates(name, protocol),
        train_set=train_set,
        test_set=test_set,
        train_eval_set=train_eval_set,
        full_train_size=len(splits.train) if fewshot else None,
    )


@dataclass(frozen=True)
class LabelSpace:
    """Several tasks' classes as one label space, in task order (X-TAIL's 1,100 classes).

    A test image of dataset d with label y has global label `offset(d) + y`; every class
    keeps its own dataset's templates for its text embedding.
    """

    datasets: tuple[str, ...]
    offsets: tuple[int, ...]
    entries: tuple[tuple[str, str], ...]  # (dataset, classname) by global label
    templates: tuple[tuple[str, ...], ...]  # per dataset, aligned with `datasets`

    def __len__(self) -> int:
        return len(self.entries)

    def offset(self, dataset: str) -> int:
        return self.offsets[self.datasets.index(dataset)]

    def prompts(self) -> list[list[str]]:
        """For each global label, its class name filled into each of its dataset's templates."""
        templates_of = dict(zip(self.datasets, self.templates, strict=True))
        return [[t.format(classname) for t in templates_of[dataset]] for dataset, classname in self.entries]

    def with_template(self, template: str) -> LabelSpace:
        """The same classes, every one embedded with the single ``template`` (RAIL's zero-shot head)."""
        if "{}" not in template:
            raise ValueError(f"a template must contain '{{}}', got {template!r}")
        return replace(self, templates=tuple((template,) for _ in self.datasets))

    def blocks(self) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """(class names, templates) per dataset in label order: one text-embedding batch each."""
        ends = (*self.offsets[1:], len(self.entries))
        return [
            (tuple(classname for _, classname in self.entries[start:end]), templates)
            for start, end, templates in zip(self.offsets, ends, self.templates, strict=True)
        ]


def label_space(tasks) -> LabelSpace:
    names = tuple(task.name for task in tasks)
    if len(set(names)) != len(names):
        raise ValueError(f"a label space needs distinct datasets, got {names}")
    offsets, entries, start = [], [], 0
    for task in tasks:
        offsets.append(start)
        entries += [(task.name, classname) for classname in task.classnames]
        start += task.num_classes
    return LabelSpace(names, tuple(offsets), tuple(entries), tuple(task.templates for task in tasks))


def fewshot_seed(cfg: dict, seed: int | None) -> int | None:
    """The seed run ``seed``'s k-shot subsets are drawn with: config key data.fewshot_seed, or with
    ``per_seed`` the run's own (None when no run's seed is given)."""
    configured = cfg["data"]["fewshot_seed"]
    return seed if configured == PER_SEED else configured


def fewshot_manifest_path(cfg: dict, dataset: str, seed: int | None = None) -> Path:
    """Where a run pins its k-shot subset of one dataset: one per benchmark, shared by every method
    and seed, or with ``data.fewshot_seed: per_seed`` one per seed; SUN397's split in the file
    system's order keeps its own (a subset of another training split)."""
    if dataset == "SUN397" and cfg["data"]["sun397_order"] != "sorted":
        dataset = f"{dataset}.{cfg['data']['sun397_order']}-order"
    if cfg["data"]["fewshot_seed"] == PER_SEED:
        if seed is None:
            raise ValueError("data.fewshot_seed per_seed: each seed pins its own few-shot subsets; give the seed")
        return results_path(cfg, FEWSHOT_SEED_MANIFEST, seed=seed, dataset=dataset)
    return results_path(cfg, FEWSHOT_MANIFEST, dataset=dataset)


class BenchmarkTasks(Sequence):
    """A benchmark's task stream, each task built on first access.

    A training or evaluation job usually needs one dataset (X-TAIL's union label space
    needs every dataset's class names), so no job reads the metadata, the few-shot
    manifests or the in-memory arrays (CIFAR100, MNIST) of datasets it does not use.
    """

    def __init__(self, cfg: dict, image: ImageConfig, seed: int | None = None, augmentation: str = "paper"):
        data = cfg["data"]
        self.protocol = data["kind"]
        self.root = data_root(cfg)
        self.image = image
        self.fewshot_k = data["fewshot"]
        self.fewshot_seed = fewshot_seed(cfg, seed)
        self.sun397_order, self.augmentation = data["sun397_order"], augmentation
        self.names = tuple(cfg["tasks"])
        pinned = self.fewshot_k is not None and self.fewshot_seed is not None
        self.manifests = tuple(fewshot_manifest_path(cfg, name, seed) if pinned else None for name in self.names)
        self.eval_caches = tuple(eval_cache_dir(cfg, name) for name in self.names)
        self._built: dict[int, ClassificationTask] = {}

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        index = range(len(self))[index]  # negative indices, IndexError
        if index not in self._built:
            self._built[index] = build_task(
                self.names[index],
                self.protocol,
                self.root,
                self.image,
                fewshot_k=self.fewshot_k,
                fewshot_seed=self.fewshot_seed,
                manifest_path=self.manifests[index],
                eval_cache=self.eval_caches[index],
                sun397_order=self.sun397_order,
                augmentation=self.augmentation,
            )
        return self._built[index]


def build_benchmark_tasks(
    cfg: dict, image: ImageConfig, seed: int | None = None, augmentation: str = "paper"
) -> BenchmarkTasks:
    """The tasks of an mtil / xtail config in stream order, for run ``seed`` (None: a job of no
    run, which reads no per-seed few-shot training split), training with ``augmentation``.

    data.kind is the protocol, data.fewshot the k per class (None: full train split) drawn
    with data.fewshot_seed (`fewshot_seed`) and pinned in `fewshot_manifest_path(cfg, dataset, seed)`:
    the first job that needs a subset writes its manifest, every later job validates and reuses it.
    """
    return BenchmarkTasks(cfg, image, seed, augmentation)


@dataclass
class DatasetReport:
    dataset: str
    protocol: str
    directory: str
    found: bool  # its folder exists under the root
    expected: Expected  # the real dataset under this protocol
    train_size: int | None = None
    test_size: int | None = None
    num_classes: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return not self.problems

    @property
    def matches_paper(self) -> bool:
        found = (self.num_classes, self.train_size, self.test_size)
        return found == (self.expected.num_classes, self.expected.train, self.expected.test)


def check_dataset(name: str, protocol: str, root: str | Path, deep: bool = False) -> DatasetReport:
    """Everything `codyra data check` says about one dataset: its metadata parses and every image
    the splits list exists; with ``deep``, every image also decodes (each is read once). Loads no model."""
    root = Path(root).expanduser().absolute()
    directory = root / requirement(name, protocol).folder
    report = DatasetReport(name, protocol, str(directory), directory.is_dir(), EXPECTED[protocol][name])
    try:
        splits = load_splits(name, protocol, root)
    except DatasetNotFoundError as error:
        report.problems.append(str(error))
        return report
    report.train_size, report.test_size = len(splits.train), len(splits.test)
    report.num_classes = len(splits.classnames)
    missing = [path for samples in (splits.train, splits.test) for path in samples.images.missing(samples.keys)]
    if missing:
        listed = len(splits.train) + len(splits.test)
        problem = f"{len(missing)} of the {listed} images the splits list are missing"
        report.problems.append(str(dataset_error(name, protocol, root, missing=missing, problem=problem)))
    elif deep:
        broken = undecodable(name, splits)
        if broken:
            obtain = requirement(name, protocol).obtain.replace("<root>", str(root))
            listed = "".join(f"\n    {line}" for line in broken)
            report.problems.append(
                f"dataset {name!r} ({protocol}): {len(broken)} image file(s) do not decode (corrupt or truncated); "
                f"replace them from the source ({obtain}):{listed}"
            )
    return report


def undecodable(name: str, splits) -> list[str]:
    """The images of both splits of dataset ``name`` that do not decode, each decoded once."""
    train, test = splits.train, splits.test
    shared = set(train.keys) if test.images == train.images else set()
    keys = [(train, list(dict.fromkeys(train.keys))), (test, [k for k in dict.fromkeys(test.keys) if k not in shared])]
    bar = progress_bar(total=sum(len(k) for _, k in keys), desc=f"decode {name}")
    try:
        return [f for samples, k in keys for f in samples.images.undecodable(k, bar.update)]
    finally:
        bar.close()


def check_datasets(names, protocol: str, root: str | Path, deep: bool = False) -> list[DatasetReport]:
    return [check_dataset(name, protocol, root, deep) for name in names]
