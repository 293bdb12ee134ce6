"""Seconds of GPU work per unit (an image trained or classified, a sequence trained, a token generated),
from a ``benchmarks/gpu_costs.py`` record: the one cost model of ``scripts/estimate-cost.py`` (a grid's
GPU-hours) and of the resource check (:mod:`codyra.experiment.resources`: each job's runtime).

The record measures one GPU (docs/results/gpu.md: an H200); the paper grid runs on H100 nodes. Work is
moved from the measured GPU to another by the ratio of their datasheet figures (:data:`GPUS`): training
and image evaluation by the bf16 peak (compute-bound), generation by the memory bandwidth (decoding a
token reads every weight once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from codyra.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
DEFAULT_RECORD = Path("docs") / "results" / "gpu" / "gpu_costs-nvidia-h200-2026-11-29.json"  # under the repository
# Examples per TRACE task where the task folders are not there to count, by the release data.root names:
# TRACE samples 5,000 training and 2,000 test examples (TRACE's paper, section 3.1); the 500-example release
# TreeLoRA trains on (ZinYY/TreeLoRA data/LLM-CL-Benchmark/LLM-CL-Benchmark_500.tar.xz) holds 500 and 100,
# NumGLUE-cm 81 test examples
TRACE_EXAMPLES = {"train": 5000, "test": 2000}
TRACE_RELEASES = {"LLM-CL-Benchmark_500": {"train": 500, "test": 100, "NumGLUE-cm/test": 81}}
# The measured ratio of generated to reference answer length per task (scripts/answer-lengths.py)
DEFAULT_ANSWER_RECORD = Path("docs") / "results" / "trace-answers" / "answer_lengths-mini-trace.json"
# name as torch reports it -> (bf16 dense peak FLOP/s, memory bandwidth B/s), NVIDIA's datasheets (SXM)
GPUS = {
    "NVIDIA H100 80GB HBM3": (989.4e12, 3.35e12),
    "NVIDIA H200": (989.4e12, 4.8e12),
}
TARGET_GPU = "NVIDIA H100 80GB HBM3"  # the paper configs' nodes (profiles/slurm)
# train.compile_mode -> the suffix of the record's compiled step (benchmarks/gpu_costs.py measures bf16 ones)
COMPILED_STEPS = {"default": "compiled", "reduce-overhead": "graphed"}


def read_record(path: str | Path | None = None) -> UnitCosts:
    """The unit costs of a ``benchmarks/gpu_costs.py`` record (default: the one the docs ship)."""
    path = Path(path) if path is not None else REPO / DEFAULT_RECORD
    if not path.is_file():
        raise ConfigError(
            f"GPU cost record not found: {path}; pass a benchmarks/gpu_costs.py record (--gpu-record), "
            f"e.g. {DEFAULT_RECORD} of a repository checkout"
        )
    return UnitCosts(json.loads(path.read_text()), path)


@dataclass
class UnitCosts:
    """Seconds of one GPU per unit, from a gpu_costs.py record."""

    record: dict
    path: Path
    notes: list[str] = field(default_factory=list)

    @property
    def device(self) -> str:
        return self.record["device"]["name"]

    @property
    def peak(self) -> float:
        return self.record["device"]["datasheet_peak_flops"]["bf16"]

    @property
    def measured_lm_params(self) -> int:
        """Parameters of the LLaMA-2-7B-shaped model the record trained and generated with."""
        from codyra.experiment.model_shapes import lm_shape

        lm = self.record["llm_train"]
        return lm_shape({**lm["shape"], "vocab_size": lm["vocab"]}, "measured", str(self.path)).params

    def clip_scale(self, cfg: dict) -> float:
        """Compute of the config's image model relative to the measured ViT-B/16 at 224 px (image tokens)."""
        measured = self.record["clip_train"]["model"]
        size = {"clip": 224, "blip": 384}.get(cfg["model"]["family"], 224)
        if cfg["model"]["name"] == measured:
            return 1.0
        scale = ((size // 16) ** 2 + 1) / ((224 // 16) ** 2 + 1)
        self.notes.append(f"{cfg['model']['name']}: the measured {measured} scaled by image tokens (x{scale:.2f})")
        return scale

    def lm_scale(self, params: int, name: str) -> float:
        """Compute of a causal LM of ``params`` parameters relative to the measured shape."""
        measured = self.measured_lm_params
        if params != measured:
            self.notes.append(f"{name}: the measured LLaMA-2-7B shape scaled by parameters")
        return params / measured

    def to_gpu(self, gpu: str, bound: str) -> float:
        """The factor from the measured GPU's seconds to ``gpu``'s for ``bound`` work ("compute" or
        "bandwidth"): the ratio of their datasheet figures (1 for the measured GPU itself)."""
        if gpu == self.device:
            return 1.0
        unknown = [name for name in (gpu, self.device) if name not in GPUS]
        if unknown:
            raise ConfigError(f"no datasheet figures of {unknown[0]!r}: add it to codyra.experiment.costs.GPUS")
        column = {"compute": 0, "bandwidth": 1}[bound]
        return GPUS[self.device][column] / GPUS[gpu][column]

    def clip_steps(self, train: dict) -> tuple[str, str]:
        """(the record's step that a CLIP job of the ``train`` settings runs, the eager step of its precision).
        The eager one: tf32 at its own rate where the record measured it, else fp32's (its upper bound). With
        ``compile``: the record's compiled step of its ``compile_mode`` and precision where measured, else the
        eager one (noted)."""
        clip, precision = self.record["clip_train"], train["precision"]
        eager = {"auto": "bf16", "tf32": "tf32" if "tf32" in clip else "fp32"}.get(precision, precision)
        if not train["compile"]:
            return eager, eager
        compiled = f"{eager}_{COMPILED_STEPS[train['compile_mode']]}"
        if compiled in clip:
            return compiled, eager
        self.notes.append(
            f"a {compiled} step (train.compile_mode {train['compile_mode']}) as the {eager} eager step, "
            "without its compilation and with the eager activations"
        )
        return eager, eager

    def train_image_s(self, kind: str, train: dict) -> float:
        """One image of a training step of the ``train`` settings (LoRA's step; CoDyRA-kind methods at
        their measured ratio), at :meth:`clip_steps`' rate."""
        step, _ = self.clip_steps(train)
        phase = self.record["clip_train"][step]["phases"]["sparse"]
        return phase["step_s_median"][_variant(kind)] / self.record["clip_train"]["batch"]

    def compile_s(self, train: dict) -> float:
        """Seconds a CLIP job of the ``train`` settings spends compiling its step and recording its CUDA
        graphs (the measured model's), counted once per task: at most, as the tasks of a run's group job
        share one process, which compiles once. The record's warm-up steps of the compiled step less
        as many of its steady steps, the larger of its two variants' (the first compiled with cold caches,
        the second found torch's caches warm, as a later job on the node may). 0 uncompiled, or where the
        record did not time the warm-up (noted)."""
        step, eager = self.clip_steps(train)
        if step == eager:
            return 0.0
        measured = self.record["clip_train"][step]
        if "warmup" not in measured:
            self.notes.append(f"the {step} step's compilation as none (the GPU record did not time it)")
            return 0.0
        warmup, steady = measured["warmup"], measured["phases"]["dense"]["step_s_median"]
        return max(0.0, *(seconds - warmup["steps"] * steady[v] for v, seconds in warmup["seconds"].items()))

    def activation_scale(self, train: dict) -> float:
        """A CLIP job's activation memory relative to the eager step of its precision: what the record's
        compiled step reserves beyond its weights (activations, or the CUDA graphs' memory pool) over what
        the eager step reserves. 1 uncompiled, or where the record did not measure both (noted)."""
        step, eager = self.clip_steps(train)
        if step == eager:
            return 1.0
        clip = self.record["clip_train"]
        compiled, plain = reserved_beyond_weights(clip[step]), reserved_beyond_weights(clip[eager])
        if compiled is None or plain is None:
            self.notes.append(
                f"the {step} step's memory as the {eager} eager step's (the GPU record did not measure both)"
            )
            return 1.0
        return compiled / plain

    def train_image_flops(self) -> float:
        return self.record["clip_train"]["bf16"]["lora_step_flops"] / self.record["clip_train"]["batch"]

    def eval_image_s(self) -> float:
        return 1 / self.record["clip_eval"]["images_per_s"]["cell_cache"]

    def eval_image_flops(self) -> float:
        return self.record["clip_eval"]["encode_image_flops"]

    def cache_image_s(self) -> float:
        """One image decoded into an evaluation cache (CPU work of the job's loader processes)."""
        return 1 / self.record["clip_eval"]["cache_build_images_per_s"]

    def lm_sequence(self, kind: str) -> tuple[float, float, int]:
        """(seconds, FLOPs, tokens) of one training sequence of the measured length."""
        lm = self.record["llm_train"]
        rate = lm["phases"]["sparse"]["tokens_per_s"]["codyra" if kind.startswith("codyra") else "lora"]
        return lm["sequence_tokens"] / rate, lm["step_flops"], lm["sequence_tokens"]

    def generated_token_s(self) -> float:
        """One generated token of a row: in batches of the token budget where the record measured them
        (``eval.batch_tokens``), of a fixed count of prompts in an older record."""
        rates = self.record["generate"]["tokens_per_s"]
        return 1 / rates.get("budget", rates["batched"])

    def startup_s(self) -> float:
        return self.record["startup"]["median_s"]

    def theta_build_s(self, updates: int) -> float:
        """Seconds a row of the measured causal LM spends building theta_i from ``updates`` stored updates,
        its GPU held: the measured merge of ``rank_tasks`` rank-16 updates, per update (scale other models
        with :meth:`lm_scale`). Its deltas are made on the CPU, as the rebuild makes them, so no GPU ratio
        applies; 0 for a record that did not measure it."""
        gen = self.record["generate"]
        if "row_build_s" not in gen:
            return 0.0
        return gen["row_build_s"] / gen.get("config", self.record["config"])["rank_tasks"] * updates

    def lm_activation_bytes(self) -> float:
        """Activation memory of the measured LoRA training step per token, layer and unit of width (bf16
        under ZeRO-2): its peak less the resident replica, the logits (bf16, their fp32 copy and its
        gradient: 10 bytes per vocabulary entry and token) and the adapters' state (16 bytes a parameter)."""
        from codyra.experiment.model_shapes import lm_shape

        lm, gib = self.record["llm_train"], 2**30
        shape = lm_shape({**lm["shape"], "vocab_size": lm["vocab"]}, "measured", str(self.path))
        tokens, (decoder,) = lm["sequence_tokens"], shape.towers
        resident = lm["memory"]["resident_gib_both_models"] / 2 * gib  # both variants' replicas were resident
        peak = lm["memory"]["peak_gib_lora_sparse"] * gib - resident
        adapters = shape.adapter_params(lm["adapter"]["rank"]) * 16
        return (peak - 2 * shape.params - tokens * lm["vocab"] * 10 - adapters) / (
            tokens * decoder.layers * decoder.width
        )


def reserved_beyond_weights(step: dict) -> float | None:
    """GiB the most that a ``clip_train`` step of a gpu_costs.py record (both variants) reserved beyond
    their weights; None for a record that did not measure it."""
    if "resident_gib_both_variants" not in step:
        return None
    peak = max(phase["peak_reserved_gib_both_variants"] for phase in step["phases"].values())
    return peak - step["resident_gib_both_variants"]


def _variant(kind: str) -> str:
    """The measured variant a method kind's step is costed at: CoDyRA's for CoDyRA kinds, else LoRA's."""
    return "codyra" if kind.startswith("codyra") else "lora"


def evaluated_examples(cfg: dict, task: str) -> int:
    """Test examples of ``task`` (a task or held-out task of ``cfg``): the catalog's size of an MTIL or
    X-TAIL dataset, the mini's generated count, a TRACE folder's count (TRACE's 2,000 without it)."""
    kind = cfg["data"]["kind"]
    if kind in ("mtil", "xtail"):
        from codyra.data.catalog import EXPECTED

        return EXPECTED[kind][task].test
    if kind == "mini" or cfg["llm"]["mini"] is not None:
        return cfg["mini"]["test_per_task"]
    return trace_examples(cfg, task, "test")


def trained_examples(cfg: dict, task: str) -> int:
    """Training examples of a TRACE task (its folder's count, else TRACE's 5,000; the mini's generated count)."""
    if cfg["llm"]["mini"] is not None:
        return cfg["mini"]["train_per_task"]
    return trace_examples(cfg, task, "train")


def trace_examples(cfg: dict, task: str, split: str) -> int:
    path = trace_split(cfg, task, split)
    if path.is_file():
        return len(json.loads(path.read_text()))
    sizes = TRACE_RELEASES.get(Path(cfg["data"]["root"] or "data").name, TRACE_EXAMPLES)
    return sizes.get(f"{task}/{split}", sizes[split])


def trace_split(cfg: dict, task: str, split: str) -> Path:
    return Path(cfg["data"]["root"] or "data") / task / f"{split}.json"


def read_answer_record(path: str | Path | None = None) -> dict:
    """A ``scripts/answer-lengths.py`` record (default: the mini TRACE's that the docs ship)."""
    path = Path(path) if path is not None else REPO / DEFAULT_ANSWER_RECORD
    if not path.is_file():
        raise ConfigError(f"answer-length record not found: {path}; write one with scripts/answer-lengths.py")
    return json.loads(path.read_text())


def expected_answer_tokens(cfg: dict, task: str, ratios: dict, count_tokens) -> float | None:
    """Tokens one generated answer to ``task`` is expected to take, the end token included: its reference
    answers' mean length (``count_tokens`` of each, plus the end token) times the measured ratio of generated
    to reference length of the task (``ratios``: task -> ratio, a :func:`read_answer_record`'s), at most
    ``llm.max_new_tokens``; None without the task's test set to measure."""
    path = trace_split(cfg, task, "test")
    if not path.is_file():
        return None
    if task not in ratios:
        raise ConfigError(
            f"no measured answer-length ratio for task {task!r} (the record has {', '.join(sorted(ratios))}): "
            "measure one with scripts/answer-lengths.py on a grid that has the task, or pass --answer-tokens"
        )
    lengths = [count_tokens(record["answer"]) + 1 for record in json.loads(path.read_text())]
    return min(sum(lengths) / len(lengths) * ratios[task], cfg["llm"]["max_new_tokens"])
