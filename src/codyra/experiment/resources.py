"""Each job's needs, estimated from the config, against what a SLURM profile requests, before any job runs.

A job's needs (:class:`Need`) come from the config and the model's shape
(:mod:`codyra.experiment.model_shapes`), the method's declared footprint
(:meth:`codyra.methods.base.Method.footprint`) and the measured GPU costs (:mod:`codyra.experiment.costs`):

- **GPU memory** of a training job, per rank: the model (under DeepSpeed ZeRO-2 a bf16 replica), the
  trainable parameters' gradients (bf16 under ZeRO), their fp32 masters and AdamW moments (12 bytes,
  partitioned over the ranks under ZeRO), the full fp32 gradient the ZeRO backend hands a method that edits
  gradients (``before_optimizer_step``), the method's own state and teachers, the activations of one
  micro-batch (per token, layer and unit of width as the GPU record measured them; the logits apart) and
  :data:`GPU_OVERHEAD`. Of a row: the model in the evaluation's precision, a causal LM's KV cache and
  prompt pass (a generation batch's token budget, ``eval.batch_tokens``) or, before them, theta_i's fp32 sums.
- **Host memory**: each process (:data:`PROCESS`), theta rebuilt in fp32 on the CPU (every rank rebuilds
  its own; a causal LM's row loads theta_0 in its checkpoint's dtype and builds theta_i on its GPU), the
  method's host state, a full-parameter update's fp32 delta while it merges, the few-shot images decoded into
  memory and the data loader processes (:data:`LOADER_WORKER`); the page cache of
  weights and data files is reclaimable and not counted.
- **Runtime**: the units of the job times the GPU record's seconds per unit, moved from the measured GPU to
  :data:`codyra.experiment.costs.TARGET_GPU`, plus a process's start-up. Generation counts
  ``llm.max_new_tokens`` per answer: an upper bound.
- **CPUs** (:func:`job_threads`, which the rules' ``threads:`` use): the config's threads, one per data
  loader process beside them, and for DeepSpeed training every rank's threads and the launcher.

A profile's requests (:class:`Request`) are its resources as Snakemake parses them (``default-resources``
overlaid by the rule's ``set-resources``, expressions evaluated at ``attempt`` 1: a first submission must
fit). :func:`check` compares every job of the config with its rule's request: host memory with ``mem_mb``
(MiB, as SLURM reads ``--mem``), GPU memory with the GPU's (``gpu_mem_mb``, a SITE value of the profile),
the ranks with ``gpu``, a multi-GPU job with ``nodes: 1``; and runtime (minutes) per group job as
Snakemake assembles it (its members run one after another within the sum of their ``runtime``), per job
for a job submitted alone. What does not fit is refused with the numbers and the fix. CPUs below what a
job runs and GPUs it never uses are warned about (they slow or waste, they do not fail). The workflow runs
the check when it submits to a cluster (``workflow/rules/common.smk``); ``codyra check-resources`` prints
the table.

Covered: the training jobs, the rows of cells (row 0 included), the held-out rows and the single-task
studies' training and rows; the profile's other rules (evaluation caches, probes, analyses, the mini's
pretraining) are listed with their requests only.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path

from codyra.cli_options import add_set_option
from codyra.errors import ConfigError
from codyra.steps.optim import examples_per_step

GIB, MIB = 2**30, 2**20
PROCESS = 3 * GIB  # a job process: torch and its libraries (0.75 GiB on a CPU, measured) and a CUDA context
# (its host memory and libraries, 1 to 2 GiB)
LOADER_WORKER = GIB // 2  # a data loader worker: a fork of the job's process, the pages it touches
GPU_OVERHEAD = 3 * GIB  # CUDA context, allocator slack, ZeRO's communication buckets
DECODED_IMAGE = 590e3  # bytes of a decoded training image held in memory (Food-101's mean, docs/cluster.md)
MINI_CLASSES = 12  # the most classes of a mini task (codyra.data.scenes: shade)
DEFAULT_PROFILE = Path("profiles") / "slurm"
TRAINING = ("train_task", "train_lm_task", "single_task_train")
ROWS = ("eval_row", "eval_lm_row", "eval_row0", "heldout", "heldout_row0", "single_task_eval", "single_task_row0")
IMAGE_READERS = ("eval_cache", "probe", "single_task_probe", "grad_conflict")  # jobs besides rows that load images


@dataclass(frozen=True)
class Job:
    """One job of a rule: ``method`` and task ``task`` (training task or row i) of a study ``study``
    (a single-task study's task; None: the benchmark's stream). Seeds share their needs.
    ``method_class``: the method's class, looked up once where the jobs are planned (None: row 0's jobs)."""

    rule: str
    method: str | None = None
    task: int | None = None
    study: str | None = None
    method_class: type | None = field(default=None, compare=False, repr=False)

    def label(self) -> str:
        parts = [self.rule, *([self.method] if self.method else []), *([f"task {self.task}"] if self.task else [])]
        return " ".join(parts) + (f" (single-task {self.study})" if self.study else "")


@dataclass(frozen=True)
class Need:
    """What one job needs: bytes of host memory and of each GPU's memory by what holds them, seconds, CPUs, GPUs."""

    host: dict[str, float]
    gpu: dict[str, float]
    seconds: float
    cpus: int
    gpus: int

    @property
    def host_bytes(self) -> float:
        return sum(self.host.values())

    @property
    def gpu_bytes(self) -> float:
        return sum(self.gpu.values())


@dataclass(frozen=True)
class Request:
    """What a profile requests for a job of one rule (None: not set)."""

    mem_mb: int | None  # MiB (SLURM's --mem)
    runtime: int | None  # minutes
    gpus: int
    gpu_mem_mb: int | None  # the memory of one of its GPUs
    cpus: int
    nodes: int | None
    partition: str | None


# --- the job's needs


def job_threads(
    cfg: dict,
    rule: str,
    method: str | None = None,
    task: int | None = None,
    gpus: int = 1,
    method_class: type | None = None,
) -> int:
    """The CPUs a job of ``rule`` runs on: its threads (the config's), one per data loader process
    beside them (``data.num_workers`` per image stream), and under DeepSpeed every rank's threads and the
    launcher (ranks: ``llm.deepspeed.nproc``, else one per GPU of the job, ``gpus``). A training job's
    ``method_class`` (:func:`codyra.methods.method_classes`) tells what its method reads beside its images."""
    from codyra.experiment.jobs import job_threads as config_threads
    from codyra.experiment.resolve import resolve_job

    if rule not in TRAINING:
        return config_threads(cfg, rule) + (_workers(cfg) if rule in (*ROWS, *IMAGE_READERS) else 0)
    train = resolve_job(cfg, method, task)["train"]
    if _images(cfg):
        return train["threads"] + _workers(cfg) * (1 + _footprint(cfg, method_class, method, task).extra_loaders)
    return train["threads"] * ranks(cfg, gpus) + (1 if _distributed(cfg) else 0)


def ranks(cfg: dict, gpus: int) -> int:
    """Processes training a causal LM: ``llm.deepspeed.nproc``, else one per GPU of the job (1 without DeepSpeed)."""
    if not _distributed(cfg):
        return 1
    return cfg["llm"]["deepspeed"]["nproc"] or max(gpus, 1)  # torchrun's: the job's GPUs, 1 without any


def _distributed(cfg: dict) -> bool:
    return not _images(cfg) and cfg["llm"]["deepspeed"]["enabled"]


def _images(cfg: dict) -> bool:
    from codyra.family import family_of

    return family_of(cfg).classifies


def _workers(cfg: dict) -> int:
    return cfg["data"]["num_workers"] if _images(cfg) else 0


def _footprint(cfg: dict, cls: type | None, method: str, task: int):
    from codyra.experiment.resolve import resolve_job

    if cls is None:
        raise TypeError(f"the footprint of {method}'s task {task} needs the method's class (method_class)")
    return cls.footprint(cls(resolve_job(cfg, method, task)["method"]).options, task)


def _bf16(precision: str) -> bool:
    return precision in ("bf16", "auto")  # auto: bf16 on a GPU; tf32 keeps fp32 tensors


def _trainable(shape, footprint) -> int:
    return shape.params if footprint.full_backbone else shape.adapter_params(footprint.adapter_rank)


class Estimator:
    """Needs of a config's jobs, from its model's shape and the GPU record's unit costs."""

    def __init__(self, configs: dict, costs, gpu: str):
        from codyra.experiment.model_shapes import model_shape

        self.configs, self.costs, self.gpu = configs, costs, gpu
        self.shape = model_shape(configs[None])
        self.startup = costs.startup_s()

    def need(self, job: Job, gpus: int) -> Need:
        cfg = self.configs[job.study]
        if job.rule in TRAINING:
            return self.training(cfg, job, gpus) if _images(cfg) else self.lm_training(cfg, job, gpus)
        return self.row(cfg, job) if _images(cfg) else self.lm_row(cfg, job)

    def training(self, cfg: dict, job: Job, gpus: int) -> Need:
        """An image-text model's task: one process, the plain backend on one GPU; a closed-form method
        (RAIL) passes the task's training images once through the frozen model instead."""
        from codyra.experiment.resolve import resolve_job

        shape, footprint = self.shape, _footprint(cfg, job.method_class, job.method, job.task)
        train = resolve_job(cfg, job.method, job.task)["train"]
        steps = not job.method_class.closed_form
        trainable, weights = _trainable(shape, footprint) if steps else 0, 4 * shape.params
        factor = 1 if _bf16(train["precision"]) else 2  # the measured activations are bf16 ones
        name = cfg["tasks"][job.task - 1]
        classes = sum(_classes(cfg, t) for t in self._label_space(cfg, name))
        vision, text = shape.towers
        per_token = self.costs.lm_activation_bytes() * factor * self.costs.activation_scale(train)
        depth = (vision.layers, text.layers) if steps else (1, 1)  # a forward without gradients: a layer at a time
        gpu = {
            "model (fp32)": weights,
            "gradients and AdamW moments (fp32)": 12 * trainable,
            "method state": footprint.device_bytes * trainable + footprint.largest_tensor_bytes * shape.largest,
            "teachers": footprint.teachers * weights,
            "image activations": train["batch_size"] * vision.tokens * depth[0] * vision.width * per_token,
            "class-prompt activations": classes * text.tokens * depth[1] * text.width * per_token,
            "CUDA context": GPU_OVERHEAD,
        }
        fewshot = cfg["data"]["fewshot"]
        host = {
            "job process": PROCESS,
            "theta_{i-1} rebuilt (fp32)": weights,
            "method state": (footprint.host_bytes + footprint.stored_bytes) * trainable + footprint.teachers * weights,
            "decoded few-shot images": (fewshot or 0) * _classes(cfg, name) * DECODED_IMAGE,
            "data loader processes": _workers(cfg) * (1 + footprint.extra_loaders) * LOADER_WORKER,
        }
        compilation = 0.0
        if steps:
            kind = cfg["method_configs"][job.method]["kind"]
            images = train["iterations"] * train["batch_size"]
            seconds = images * self.costs.train_image_s(kind, train) * footprint.step_cost
            compilation = self.costs.compile_s(train)  # mostly the job's CPU work: no GPU ratio
        else:
            seconds = _training_images(cfg, name) * self.costs.eval_image_s()
        seconds *= self.costs.clip_scale(cfg) * self.costs.to_gpu(self.gpu, "compute")
        cpus = job_threads(cfg, job.rule, job.method, job.task, gpus, job.method_class)
        return Need(host, gpu, seconds + compilation + self.startup, cpus, 1)

    def lm_training(self, cfg: dict, job: Job, gpus: int) -> Need:
        """A causal LM's task: under DeepSpeed ZeRO-2 one process per rank (a GPU each) and the launcher."""
        from codyra.experiment.costs import trained_examples
        from codyra.experiment.resolve import resolve_job

        shape, footprint = self.shape, _footprint(cfg, job.method_class, job.method, job.task)
        train, llm = resolve_job(cfg, job.method, job.task)["train"], cfg["llm"]
        n, zero = ranks(cfg, gpus), _distributed(cfg)
        trainable, bf16 = _trainable(shape, footprint), zero and _bf16(train["precision"])
        (decoder,) = shape.towers
        tokens = llm["max_prompt_len"] + llm["max_answer_len"]
        micro = max(1, train["batch_size"] // n)
        per_token = self.costs.lm_activation_bytes() * (1 if bf16 else 2)
        edits = zero and job.method_class.overrides("before_optimizer_step")
        # ZeRO-2 partitions the fp32 masters and both moments over the ranks; the plain path's fp32 model is its master
        optimizer, per_param = (
            (f"fp32 masters and AdamW moments (1/{n} under ZeRO-2)", 12 / n) if zero else ("AdamW moments", 8)
        )
        gpu = {
            "model replica (bf16)" if bf16 else "model (fp32)": (2 if bf16 else 4) * shape.params,
            "gradients": (2 if bf16 else 4) * trainable,
            optimizer: per_param * trainable,
            "full fp32 gradient for the method": 4 * trainable if edits else 0,
            "method state": footprint.device_bytes * trainable + footprint.largest_tensor_bytes * shape.largest,
            "teachers": footprint.teachers * 4 * shape.params,
            "activations": micro * tokens * decoder.layers * decoder.width * per_token,
            "logits": micro * tokens * shape.vocab * 10,
            "CUDA context and ZeRO buckets": GPU_OVERHEAD,
        }
        # Before DeepSpeed casts it, theta_{i-1} sits on the GPU in fp32 beside what the method's setup
        # allocates there (codyra.training.loop.fit): the job's peak when that exceeds the steady state.
        setup = 4 * shape.params + footprint.device_bytes * trainable + GPU_OVERHEAD
        if bf16 and setup > sum(gpu.values()):
            gpu["theta_{i-1} in fp32 at the method's setup, before the bf16 cast"] = setup - sum(gpu.values())
        host = {
            "launcher": PROCESS if zero else 0,
            f"{n} rank(s): process and theta_{{i-1}} rebuilt in fp32": n * (PROCESS + 4 * shape.params),
            f"{n} rank(s): method state": n * footprint.host_bytes * trainable,
            "the lead rank: what it stores": footprint.stored_bytes * trainable,
        }
        name = cfg["tasks"][job.task - 1]
        if train["epochs"] is not None:
            sequences = train["epochs"] * trained_examples(cfg, name)
        else:
            sequences = train["iterations"] * examples_per_step(train)
        step_s, _, _ = self.costs.lm_sequence(cfg["method_configs"][job.method]["kind"])
        seconds = sequences * step_s * footprint.step_cost / n * self.costs.lm_scale(shape.params, shape.name)
        seconds *= self.costs.to_gpu(self.gpu, "compute")
        cpus = job_threads(cfg, job.rule, job.method, job.task, gpus, job.method_class)
        return Need(host, gpu, seconds + self.startup, cpus, n if zero else 1)

    def row(self, cfg: dict, job: Job) -> Need:
        """An image-text model's row: theta_i rebuilt, every test set of the row classified on one GPU."""
        from codyra.experiment.costs import evaluated_examples

        shape, weights = self.shape, 4 * self.shape.params
        ev = cfg["eval"]
        vision, _ = shape.towers
        per_token = self.costs.lm_activation_bytes() * (1 if _bf16(ev["precision"]) else 2)
        gpu = {
            "model (fp32)": weights,
            "a batch's activations (one layer at a time)": ev["batch_size"] * vision.tokens * vision.width * per_token,
            "CUDA context": GPU_OVERHEAD,
        }
        host = {
            "job process": PROCESS,
            "theta_i rebuilt (fp32)": weights,
            "an update merging (fp32)": weights if self._full_backbone(cfg, job) else 0,
            "data loader processes": _workers(cfg) * LOADER_WORKER,
        }
        images = sum(evaluated_examples(cfg, t) for t in self._tested(cfg, job))
        seconds = (
            images * self.costs.eval_image_s() * self.costs.clip_scale(cfg) * self.costs.to_gpu(self.gpu, "compute")
        )
        return Need(host, gpu, seconds + self.startup, job_threads(cfg, job.rule), 1)

    def lm_row(self, cfg: dict, job: Job) -> Need:
        """A causal LM's row: theta_i built once on its GPU (theta_0 loaded in its checkpoint's dtype, each
        changed parameter summed in fp32 and rounded once: ``rebuild_as``), answers generated there."""
        from codyra.experiment.costs import evaluated_examples

        shape, llm, ev = self.shape, cfg["llm"], cfg["eval"]
        (decoder,) = shape.towers
        prompt = llm["max_prompt_len"]
        if job.method is not None:
            prompt = _footprint(cfg, job.method_class, job.method, 1).prompt_tokens or prompt
        # a batch's positions: its token budget, or batch_size rows of the longest prompt and answer
        positions = ev["batch_tokens"] or ev["batch_size"] * (prompt + llm["max_new_tokens"])
        replica = 2 if _bf16(ev["precision"]) else 4
        trains = job.method_class is not None and job.method_class.trains
        generating = positions * decoder.layers * 2 * shape.kv_width * replica + positions * decoder.width * 8 * replica
        gpu = {
            f"model ({'bf16' if replica == 2 else 'fp32'})": replica * shape.params,
            # the merge's fp32 sums are freed before the first batch: the larger of the two counts
            "KV cache and prompt pass (one layer at a time), or theta_i's fp32 sums before them": max(
                generating, 4 * shape.params if trains else 0
            ),
            "CUDA context": GPU_OVERHEAD,
        }
        host = {
            "job process": PROCESS,
            "theta_0 as loaded (its checkpoint's dtype, fp32 at most)": 4 * shape.params,
            "an update merging (fp32)": 4 * shape.params if self._full_backbone(cfg, job) else 0,
        }
        answers = sum(evaluated_examples(cfg, t) for t in self._tested(cfg, job))
        seconds = answers * llm["max_new_tokens"] * self.costs.generated_token_s()
        seconds *= self.costs.to_gpu(self.gpu, "bandwidth")
        seconds += self.costs.theta_build_s(job.task if trains else 0)
        seconds *= self.costs.lm_scale(shape.params, shape.name)
        return Need(host, gpu, seconds + self.startup, job_threads(cfg, job.rule), 1)

    @staticmethod
    def _full_backbone(cfg: dict, job: Job) -> bool:
        """Whether theta_i's rebuild merges model-sized deltas (a full-parameter method's)."""
        cls = job.method_class
        return cls is not None and cls.trains and _footprint(cfg, cls, job.method, 1).full_backbone

    @staticmethod
    def _tested(cfg: dict, job: Job) -> list[str]:
        """The tasks a row evaluates: the stream's, the held-out ones, or a single-task study's task and references."""
        stream = list(cfg["tasks"])
        if job.rule.startswith("single_task"):
            return stream + cfg["heldout_tasks"]
        return cfg["heldout_tasks"] if job.rule.startswith("heldout") else stream

    @staticmethod
    def _label_space(cfg: dict, task: str) -> list[str]:
        return list(cfg["tasks"]) if cfg["data"]["label_space"] == "union" else [task]


def _classes(cfg: dict, task: str) -> int:
    kind = cfg["data"]["kind"]
    if kind == "mini":
        return MINI_CLASSES
    from codyra.data.catalog import EXPECTED

    return EXPECTED[kind][task].num_classes


def _training_images(cfg: dict, task: str) -> int:
    """Images of a task's training set: k per class of a few-shot set, else the dataset's (the mini's generated)."""
    if cfg["data"]["fewshot"]:
        return cfg["data"]["fewshot"] * _classes(cfg, task)
    if cfg["data"]["kind"] == "mini":
        return cfg["mini"]["train_per_task"]
    from codyra.data.catalog import EXPECTED

    return EXPECTED[cfg["data"]["kind"]][task].train


def study_configs(cfg: dict) -> dict[str | None, dict]:
    """The configs of a grid's jobs: ``cfg`` (key None) and each single-task study's (key: its task)."""
    from codyra.experiment.single_task import targets
    from codyra.experiment.validation import single_task_config

    return {None: cfg, **{study: single_task_config(cfg, study) for study in targets(cfg)}}


def planned_jobs(configs: dict[str | None, dict]) -> list[Job]:
    """The covered jobs of a grid (``study_configs``), whatever the target: trainings, rows (row 0 included),
    held-out rows and the single-task studies' trainings and rows (one per method and task: seeds need the same)."""
    from codyra.experiment.jobs import eval_rule, train_rule
    from codyra.methods import method_classes

    cfg = configs[None]
    n, jobs = len(cfg["tasks"]), [Job("eval_row0")]
    heldout = bool(cfg["heldout_tasks"])
    if heldout:
        jobs.append(Job("heldout_row0"))
    for m, cls in method_classes(cfg, cfg["methods"]).items():
        for i in range(1, n + 1):
            jobs += [Job(train_rule(cfg), m, i, method_class=cls)] if cls.trains else []
            jobs += [Job(eval_rule(cfg), m, i, method_class=cls)] if not cls.copies_row0() else []
            jobs += [Job("heldout", m, i, method_class=cls)] if heldout and cls.trains else []
    for study, sub in configs.items():
        if study is not None:
            jobs.append(Job("single_task_row0", study=study))
            trained = {m: cls for m, cls in method_classes(sub, sub["methods"]).items() if cls.trains}
            rules = ("single_task_train", "single_task_eval")
            jobs += [Job(rule, m, 1, study, cls) for m, cls in trained.items() for rule in rules]
    return jobs


def group_of(cfg: dict, job: Job) -> str | None:
    """The group job (one SLURM job) ``job`` joins on a cluster (None: submitted alone), seed left out."""
    from codyra.experiment.jobs import eval_rule, job_group, row_group

    if job.study is not None:
        return None if job.rule == "single_task_row0" else f"single-{job.study}-{job.method}"
    if job.rule in ("eval_row0", "heldout_row0"):
        return None
    group = row_group(cfg) if job.rule == eval_rule(cfg) else job_group(cfg)
    return group.replace("-seed{seed}", "").format(method=job.method, i=job.task)


# --- what the profile requests


class ProfileResources:
    """A profile's resources as Snakemake parsed them: ``default-resources`` (a
    ``snakemake.resources.Resources``), ``set-resources`` (rule -> Resources) and ``set-threads``."""

    def __init__(self, defaults, rules: dict, threads: dict | None = None):
        self.defaults, self.rules, self.threads = defaults, dict(rules), dict(threads or {})
        self._evaluated: dict[tuple, object] = {}  # an expression's value per rule, threads, attempt, wildcards

    @classmethod
    def from_settings(cls, settings) -> ProfileResources:
        """From a running workflow's ``workflow.resource_settings``."""
        from snakemake.resources import Resources

        defaults = settings.default_resources
        defaults = Resources.default("bare") if defaults is None else Resources.from_mapping(defaults)
        rules = {rule: Resources.from_mapping(r) for rule, r in settings.overwrite_resources.items()}
        return cls(defaults, rules, settings.overwrite_threads)

    @classmethod
    def read(cls, profile: str | Path) -> ProfileResources:
        """From a profile folder (or its ``config.yaml``), parsed as ``snakemake --profile`` parses it."""
        from snakemake.cli import parse_set_resources, parse_set_threads
        from snakemake.profiles import ProfileConfigFileParser
        from snakemake.resources import Resources

        path = Path(profile)
        path = path / "config.yaml" if path.is_dir() else path
        if not path.is_file():
            raise ConfigError(f"SLURM profile not found: {path} (pass --profile <dir>, e.g. {DEFAULT_PROFILE})")
        with open(path) as stream:
            parsed = ProfileConfigFileParser().parse(stream)
        defaults = Resources.parse(parsed.get("default-resources", []), allow_expressions=True, defaults="full")
        threads = parse_set_threads(parsed.get("set-threads"))
        return cls(defaults, parse_set_resources(parsed.get("set-resources")), threads)

    def value(self, rule: str, name: str, threads: int = 1, attempt: int = 1, wildcards: dict | None = None):
        """Resource ``name`` of a job of ``rule`` (None: not set), its expression evaluated as Snakemake does."""
        resources = self.rules.get(rule)
        resource = resources.get(name) if resources is not None and name in resources else self.defaults.get(name)
        return self._evaluate(resource, rule, threads, attempt, wildcards)

    def _evaluate(self, resource, rule: str, threads: int, attempt: int, wildcards: dict | None):
        from snakemake.iocontainers import InputFiles, Wildcards

        if not resource.is_evaluable():
            return resource.value
        raw = str(resource.raw)  # the expression: what it reads decides what its value is kept per
        key = (rule, resource.name, attempt)
        key += (
            threads if "threads" in raw else None,
            tuple(sorted((wildcards or {}).items())) if "wildcards" in raw else None,
        )
        if key not in self._evaluated:
            try:
                self._evaluated[key] = resource.evaluate(
                    wildcards=Wildcards(fromdict=wildcards or {}),
                    input=InputFiles(),
                    attempt=attempt,
                    threads=threads,
                    rulename=rule,
                    async_run=None,
                ).value
            except Exception as err:
                raise ConfigError(
                    f"profile resource {resource.name} of rule {rule}: cannot evaluate {resource.raw!r} "
                    f"({type(err).__name__}: {err}); the check evaluates it without the job's input files"
                ) from err
        return self._evaluated[key]

    def request(self, rule: str, threads: int, job: Job | None = None, attempt: int = 1) -> Request:
        """What a job of ``rule`` with ``threads`` threads (the rule's, unless set-threads overrides them) is
        submitted with, at ``attempt``."""
        wildcards = {"method": job.method, "i": job.task} if job is not None and job.method else {}
        if rule in self.threads:
            threads = self._evaluate(self.threads[rule], rule, threads, attempt, wildcards)

        def get(name):
            return self.value(rule, name, threads, attempt, wildcards)

        cpus = get("cpus_per_task")
        return Request(
            mem_mb=get("mem_mb"),
            runtime=get("runtime"),
            gpus=get("gpu") or 0,
            gpu_mem_mb=get("gpu_mem_mb"),
            cpus=cpus if cpus and cpus > 0 else threads,
            nodes=get("nodes"),
            partition=get("slurm_partition"),
        )

    def gpus(self, rule: str) -> int:
        """GPUs a job of ``rule`` asks for (``gpu``; 0 when unset)."""
        return self.value(rule, "gpu") or 0

    def named_rules(self) -> list[str]:
        return list(self.rules)


# --- the check


@dataclass(frozen=True)
class Refusal:
    key: tuple  # what it is about: one refusal per key is shown (the job's that exceeds its request most)
    excess: float  # need / request
    text: str


@dataclass
class Fit:
    """A job's need beside its request, the group job it joins (None: submitted alone), what does not fit."""

    job: Job
    need: Need
    request: Request
    group: str | None
    refusals: list[Refusal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Report:
    fits: list[Fit]
    groups: dict[str, list[Fit]]
    group_refusals: list[Refusal]
    other_rules: dict[str, Request]  # the profile's rules the check does not cover: their requests
    notes: list[str]

    def refusals(self) -> list[str]:
        """One refusal per rule and reason (per method for memory: its fix may be to leave it out), of the
        job that exceeds its request most; ``codyra check-resources`` lists every job."""
        worst: dict[tuple, Refusal] = {}
        for refusal in [r for f in self.fits for r in f.refusals] + self.group_refusals:
            if refusal.key not in worst or refusal.excess > worst[refusal.key].excess:
                worst[refusal.key] = refusal
        return [r.text for r in worst.values()]

    def warnings(self) -> list[str]:
        return list(dict.fromkeys(w for f in self.fits for w in f.warnings))


def check(cfg: dict, profile: ProfileResources, costs, gpu: str | None = None) -> Report:
    """Every covered job of ``cfg`` against ``profile``'s request for its rule, and every group job's
    runtime against the sum its members request (see the module's docstring)."""
    from codyra.experiment.costs import TARGET_GPU

    configs = study_configs(cfg)
    estimator = Estimator(configs, costs, gpu or TARGET_GPU)
    fits, groups = [], {}
    for job in planned_jobs(configs):
        gpus = profile.gpus(job.rule)
        need = estimator.need(job, gpus)
        request = profile.request(job.rule, _rule_threads(configs[job.study], job, gpus), job)
        fit = Fit(job, need, request, group_of(cfg, job))
        _compare(fit)
        fits.append(fit)
        if fit.group is not None:
            groups.setdefault(fit.group, []).append(fit)
    group_refusals = [r for name, members in groups.items() for r in _group_runtime(name, members)]
    for name, members in groups.items():
        _idle_gpus(name, members)
    for fit in fits:  # a group job's CPUs are its members' most
        members = groups.get(fit.group, [fit])
        cpus, needed = max(f.request.cpus for f in members), max(f.need.cpus for f in members)
        if needed > cpus:
            fit.warnings.append(
                f"{fit.job.rule}: runs {needed} threads and processes on {cpus} CPUs (slower, not killed)"
            )
    covered = {f.job.rule for f in fits}
    others = {rule: profile.request(rule, 1) for rule in profile.named_rules() if rule not in covered}
    return Report(fits, groups, group_refusals, others, sorted(set(costs.notes)))


THREADED = ("train_task", "train_lm_task", "eval_row", "eval_lm_row", "eval_row0", "eval_cache")  # threads: job_threads


def _rule_threads(cfg: dict, job: Job, gpus: int) -> int:
    """The threads the job's rule declares (``threads:`` in workflow/rules)."""
    if job.rule in THREADED:
        return job_threads(cfg, job.rule, job.method, job.task, gpus, job.method_class)
    from codyra.experiment.jobs import job_threads as config_threads
    from codyra.experiment.resolve import resolve_job

    return (
        resolve_job(cfg, job.method, 1)["train"]["threads"] if job.rule in TRAINING else config_threads(cfg, job.rule)
    )


def _compare(fit: Fit) -> None:
    """Fill in ``fit``'s refusals and warnings (a grouped job's runtime is its group's: ``_group_runtime``)."""
    job, need, req, label = fit.job, fit.need, fit.request, fit.job.label()
    rule = job.rule
    leave_out = f", or leave {job.method} out (for one backbone: backbones.<name>.leave_out)" if job.method else ""

    def refuse(kind: str, why: str, excess: float = 0.0) -> None:
        key = (rule, kind, job.method if kind in ("host", "gpu") else None)
        fit.refusals.append(Refusal(key, excess, f"{label}: {why}"))

    if req.mem_mb is None:
        refuse("unset mem_mb", f"the profile requests no mem_mb; set set-resources.{rule}.mem_mb")
    elif need.host_bytes > req.mem_mb * MIB:
        refuse(
            "host",
            f"needs {_gib(need.host_bytes)} of host memory ({_parts(need.host)}); the profile requests mem_mb "
            f"{req.mem_mb} ({_gib(req.mem_mb * MIB)}). Fix: set-resources.{rule}.mem_mb: "
            f"{math.ceil(need.host_bytes / MIB)} or more, on nodes that hold it{leave_out}",
            need.host_bytes / (req.mem_mb * MIB),
        )
    if need.gpus and req.gpus < need.gpus:
        refuse(
            "gpus",
            f"runs {need.gpus} ranks, one per GPU (llm.deepspeed.nproc), on the {req.gpus} GPU(s) the profile "
            f"requests. Fix: set-resources.{rule}.gpu: {need.gpus}, or llm.deepspeed.nproc: {max(req.gpus, 1)}",
        )
    if need.gpus and req.gpu_mem_mb is None:
        refuse("unset gpu_mem_mb", "the profile does not say what a GPU holds; set default-resources gpu_mem_mb")
    elif need.gpus and need.gpu_bytes > req.gpu_mem_mb * MIB:
        refuse(
            "gpu",
            f"needs {_gib(need.gpu_bytes)} per GPU ({_parts(need.gpu)}); a GPU holds gpu_mem_mb {req.gpu_mem_mb} "
            f"({_gib(req.gpu_mem_mb * MIB)}). Fix: GPUs with more memory (their partition and gpu_mem_mb), a "
            f"smaller train.batch_size{leave_out}; ZeRO-3 or CPU offload would partition the replica and "
            "gradients, but codyra offers ZeRO-2 only",
            need.gpu_bytes / (req.gpu_mem_mb * MIB),
        )
    if req.gpus > 1 and req.nodes != 1:
        refuse(
            "nodes",
            f"asks for {req.gpus} GPUs without nodes: 1, so SLURM may place them on several nodes while the ranks "
            "start on one (torchrun --standalone). Fix: default-resources nodes: 1",
        )
    if req.runtime is None:
        refuse("unset runtime", f"the profile requests no runtime; set set-resources.{rule}.runtime")
    elif fit.group is None and need.seconds > req.runtime * 60:
        refuse(
            "runtime",
            f"needs about {need.seconds / 3600:.1f} h; the profile requests runtime {req.runtime} min. Fix: "
            f"set-resources.{rule}.runtime: {math.ceil(need.seconds / 60)} or more (on a partition that allows it)",
            need.seconds / (req.runtime * 60),
        )
    if req.gpus > need.gpus:
        fit.warnings.append(f"{rule}: requests {req.gpus} GPU(s), uses {need.gpus}")


def _idle_gpus(name: str, members: list[Fit]) -> None:
    """Warn about a group job's members that use fewer GPUs than the job holds (the most its members
    request: they run one after another on one member's resources), as the rest wait idle meanwhile."""
    widest = max(members, key=lambda f: f.request.gpus)
    for fit in members:
        idle = widest.request.gpus - max(fit.need.gpus, fit.request.gpus)
        if idle > 0:
            fit.warnings.append(
                f"group job {name}: holds {widest.request.gpus} GPU(s) for its {widest.job.rule}, and {idle} of them "
                f"idle while its {fit.job.rule} runs. Fix: the same gpu for both rules in the profile (set-resources)"
            )


def _group_runtime(name: str, members: list[Fit]) -> list[Refusal]:
    """A group job runs its members one after another within the sum of their requested runtimes."""
    if any(f.request.runtime is None for f in members):
        return []  # refused per job
    need = sum(f.need.seconds for f in members)
    request = sum(f.request.runtime for f in members)
    if need <= request * 60:
        return []
    rules = sorted({f.job.rule for f in members})
    over = max(members, key=lambda f: f.need.seconds - f.request.runtime * 60)
    text = (
        f"group job {name} ({len(members)} jobs: {', '.join(rules)}): needs about {need / 3600:.1f} h; it requests "
        f"{request} min, the sum of its members' runtime. Its {over.job.label()} needs about "
        f"{over.need.seconds / 60:.0f} min of the {over.request.runtime} it requests. Fix: raise "
        f"set-resources.{over.job.rule}.runtime (on a partition that allows the sum)"
    )
    return [Refusal(("group runtime", *rules), need / (request * 60), text)]


def _gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def _parts(parts: dict[str, float]) -> str:
    """The three largest parts, with their sizes."""
    largest = sorted(((v, k) for k, v in parts.items() if v), reverse=True)[:3]
    return ", ".join(f"{k} {_gib(v)}" for v, k in largest)


def refuse_unfit(cfg: dict, profile: ProfileResources, record: str | Path | None = None) -> Report:
    """``check``, raising a ConfigError that lists what does not fit (see ``Report.refusals``)."""
    from codyra.experiment.costs import read_record

    report = check(cfg, profile, read_record(record))
    refusals = report.refusals()
    if refusals:
        raise ConfigError(
            f"jobs of {cfg['benchmark']} would fail on the cluster as the profile requests them "
            "(codyra check-resources --config <config> lists every job):\n  " + "\n  ".join(refusals)
        )
    return report


def check_profile(cfg: dict, profile: str | Path, record: str | Path | None = None) -> Report:
    """``cfg``'s jobs against the profile folder ``profile``; raises a ConfigError for what does not fit."""
    return refuse_unfit(cfg, ProfileResources.read(profile), record)


# --- codyra check-resources


def register_cli(subparsers) -> None:
    """Add ``codyra check-resources`` to the main CLI (registration builds argparse objects only)."""
    p = subparsers.add_parser(
        "check-resources",
        help="each job's estimated host memory, GPU memory, runtime and CPUs beside what the SLURM profile requests",
        description="Estimates every job of the config (trainings, rows, held-out rows, single-task studies) from "
        "the model's shape, the methods' declared state and the measured GPU costs, and prints it beside the "
        "profile's request for its rule, group jobs as Snakemake assembles them (the sum of their members' "
        "runtimes). What would fail on the cluster is refused with the fix, as the workflow refuses it before "
        "submitting. Exit code 0 when everything fits, 1 otherwise.",
        epilog="example: codyra check-resources --config config/trace.yaml --set backbone=gemma-2b-it",
    )
    p.add_argument("--log", default=argparse.SUPPRESS, metavar="FILE", help="append this command's log to this file")
    p.add_argument("--config", required=True, type=Path, metavar="FILE", help="the config, e.g. config/trace.yaml")
    add_set_option(p)
    p.add_argument(
        "--profile", type=Path, default=DEFAULT_PROFILE, metavar="DIR", help=f"the profile (default {DEFAULT_PROFILE})"
    )
    p.add_argument(
        "--gpu-record", type=Path, metavar="FILE", help="a benchmarks/gpu_costs.py record (default: the docs')"
    )
    p.set_defaults(handler=_cmd_check_resources)


def _cmd_check_resources(args) -> int:
    from codyra.experiment.config import apply_sets, load_config, read_config_file
    from codyra.experiment.costs import read_record

    cfg = load_config(apply_sets(read_config_file(args.config), args.set))
    report = check(cfg, ProfileResources.read(args.profile), read_record(args.gpu_record))
    print("\n".join(render(cfg, report, args.profile)))
    return 1 if report.refusals() else 0


def render(cfg: dict, report: Report, profile) -> list[str]:
    """The report as Markdown: a row per rule (its neediest job against the request), the group jobs,
    the profile's other rules, then what would fail and what is only warned about."""
    lines = [
        f"# {cfg['benchmark']}: each job's needs (estimated) against {profile}'s requests",
        "",
        "| rule | jobs | host memory, GiB | GPU memory, GiB | runtime, h | CPUs | GPUs |",
        "|---|---|---|---|---|---|---|",
    ]
    by_rule: dict[str, list[Fit]] = {}
    for fit in report.fits:
        by_rule.setdefault(fit.job.rule, []).append(fit)
    for rule, fits in by_rule.items():
        host = max(fits, key=lambda f: f.need.host_bytes)
        gpu = max(fits, key=lambda f: f.need.gpu_bytes)
        runtime = max(fits, key=lambda f: f.need.seconds)
        req = host.request
        cells = [
            f"{host.need.host_bytes / GIB:.1f} of {_of(req.mem_mb, MIB / GIB)}",
            f"{gpu.need.gpu_bytes / GIB:.1f} of {_of(gpu.request.gpu_mem_mb, MIB / GIB)}" if gpu.need.gpus else "-",
            f"{runtime.need.seconds / 3600:.2f} of {_of(runtime.request.runtime, 1 / 60, 2)}",
            f"{max(f.need.cpus for f in fits)} of {req.cpus}",
            f"{max(f.need.gpus for f in fits)} of {req.gpus}",
        ]
        lines.append(f"| {rule} | {len(fits)} | " + " | ".join(cells) + " |")
    kinds: dict[str, list[list[Fit]]] = {}
    for members in report.groups.values():
        kinds.setdefault(" + ".join(sorted({f.job.rule for f in members})), []).append(members)
    if kinds:
        lines += ["", "Group jobs (one SLURM job each; its runtime the sum of its members'):", ""]
        for rules, groups in kinds.items():
            worst = max(groups, key=lambda g: sum(f.need.seconds for f in g))
            need, request = sum(f.need.seconds for f in worst) / 3600, sum(f.request.runtime or 0 for f in worst) / 60
            lines.append(
                f"- {rules}: {len(groups)} per seed; the longest needs {need:.2f} h of the {request:.2f} h requested"
            )
    if report.other_rules:
        lines += ["", "The profile's other rules (not estimated: caches, probes, analyses, other families'):", ""]
        for rule, req in report.other_rules.items():
            lines.append(
                f"- {rule}: mem_mb {req.mem_mb}, runtime {req.runtime} min, {req.gpus} GPU(s), {req.partition}"
            )
    if report.notes:
        lines += ["", "Scaled, not measured: " + "; ".join(report.notes) + "."]
    refusals, warnings = report.refusals(), report.warnings()
    lines += ["", f"Refused ({len(refusals)}):" if refusals else "Every job fits what the profile requests."]
    lines += [f"- {r}" for r in refusals]
    if warnings:
        lines += ["", "Warnings:", *(f"- {w}" for w in warnings)]
    return lines


def _of(value, scale: float, digits: int = 1) -> str:
    return "unset" if value is None else f"{value * scale:.{digits}f}"
