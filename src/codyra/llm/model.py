"""Causal LMs for TRACE: theta_0 and theta_i = theta_0 + stored updates, plus task folders.

theta_0 comes from ``model.pretrained`` (a local Hugging Face model folder) or else
``model.name`` (a hub id such as ``meta-llama/Llama-2-7b-chat-hf``, at revision ``model.revision``,
read from the snapshot of that revision in the cache ``model.cache_dir``: :mod:`codyra.hub`). For the
mini TRACE (config block ``llm.mini``) it is the folder the workflow's pretraining writes,
``results/{benchmark}/pretrain/``. Weights are read from safetensors only and kept in fp32 on the CPU,
so stored updates merge exactly (:mod:`codyra.llm.rebuild`); training and generation cast where they run.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from codyra.errors import WeightsUnavailableError
from codyra.hub import download_snapshot, fetch_command, hub_label, hub_model, weight_files
from codyra.store.paths import MINI_PRETRAINED, mini_data_dir, results_path
from codyra.store.theta0 import check_finite, record_first_use, verify_first_use, verify_own
from codyra.trace.data import LengthLimits, prepare_tokenizer

MODEL_CONFIG_DIR = (
    Path(__file__).resolve().parent.parent / "mini" / "trace" / "model_configs"
)  # the mini TRACE's tiny LMs
# transformers builds models under process-wide patches (torch.nn.init functions, the default
# dtype, the meta device), and its lazy module imports a submodule on first access to a name:
# jobs running as threads of one process (Snakemake's local mode) must import from it and build
# one at a time, or one sees another's half-applied state or half-imported module ("cannot import
# name 'AutoModelForCausalLM'").
MODEL_BUILD_LOCK = threading.Lock()


@dataclass
class LMBundle:
    model: torch.nn.Module  # a transformers PreTrainedModel with a causal-LM head
    tokenizer: object  # its PreTrainedTokenizerFast, prepared for TRACE (pad token, left padding)


def is_mini(cfg: dict) -> bool:
    return cfg["llm"]["mini"] is not None


def mini_model_dir(cfg: dict) -> Path:
    """Where the mini TRACE's pretraining writes theta_0 (a Hugging Face model folder)."""
    return results_path(cfg, MINI_PRETRAINED).parent


def mini_model_config(name: str, folder: Path = MODEL_CONFIG_DIR) -> dict:
    """The architecture of a packaged tiny model (``<folder>/<name>.json``; by default the mini TRACE's)."""
    path = folder / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.json")))
        where = folder.relative_to(Path(__file__).resolve().parents[1]).as_posix()
        raise ValueError(f"config key model.name: no packaged tiny model {name!r} in codyra/{where}; known: {known}")
    return json.loads(path.read_text())


def trace_root(cfg: dict) -> Path:
    """The folder holding one sub-folder per TRACE task (``C-STANCE/``, ``FOMC/``, ...)."""
    if cfg["data"]["root"] is not None:
        return Path(cfg["data"]["root"]).expanduser()
    if is_mini(cfg):
        return mini_data_dir(cfg)
    raise ValueError(
        "config key data.root is not set: point it at the TRACE benchmark folder that holds one folder per "
        "task (C-STANCE/, FOMC/, ... each with train.json, eval.json, test.json)"
    )


def task_folder(cfg: dict, j: int) -> Path:
    return trace_root(cfg) / cfg["tasks"][j - 1]


def length_limits(cfg: dict) -> LengthLimits:
    llm = cfg["llm"]
    return LengthLimits(llm["max_prompt_len"], llm["max_answer_len"], llm["tokenization"])


def pretrained_source(cfg: dict) -> tuple[str, bool]:
    """(where theta_0 is, whether that is a local folder rather than a hub id)."""
    if cfg["model"]["pretrained"] is not None:
        return cfg["model"]["pretrained"], True
    if is_mini(cfg):
        return str(mini_model_dir(cfg)), True
    return cfg["model"]["name"], Path(cfg["model"]["name"]).expanduser().is_dir()


def check_local_model(folder: Path) -> None:
    if weight_files(folder) is None:
        raise FileNotFoundError(
            f"no safetensors weights in {folder} (expected model.safetensors, or model.safetensors.index.json and "
            "its shards). For the mini TRACE run `codyra pretrain-mini --config <config>` first; codyra never loads "
            "pickled weights (pytorch_model.bin)."
        )


def model_folder(source: str, *, local: bool, revision: str | None, cache_dir: str | None) -> Path:
    """The local folder a Hugging Face model is read from: ``source`` itself, or the cached snapshot of
    the hub model ``source`` at ``revision`` (fetched first if the hub is online)."""
    if not local:
        return hub_model(source, revision, cache_dir)
    folder = Path(source).expanduser().absolute()
    check_local_model(folder)
    return folder


def refetch(source: str, folder: Path, *, local: bool, revision: str | None, cache_dir: str | None) -> str:
    """How to get a good copy of a model folder back."""
    if local:
        return f"restore the model folder {folder}"
    command = fetch_command(source, cache_dir, revision=revision)
    return f"delete {folder} and fetch {hub_label(source, revision)} again ({command})"


def load_causal_lm(
    source: str,
    *,
    local: bool,
    cache_dir: str | None = None,
    revision: str | None = None,
    dtype: torch.dtype | None = torch.float32,
) -> LMBundle:
    """Model (CPU, eval mode; ``dtype``, None: the checkpoint's own) and tokenizer from a local folder or a
    hub id (:func:`model_folder`)."""
    folder = model_folder(source, local=local, revision=revision, cache_dir=cache_dir)
    with MODEL_BUILD_LOCK:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one carriage-return bar per load would clutter every job log
    try:
        with MODEL_BUILD_LOCK:
            model = AutoModelForCausalLM.from_pretrained(
                folder, use_safetensors=True, dtype=dtype or "auto", local_files_only=True
            )
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except OSError as err:  # a file of the folder missing or corrupt
        fix = refetch(source, folder, local=local, revision=revision, cache_dir=cache_dir)
        raise WeightsUnavailableError(f"could not load the causal LM {source!r} from {folder}: {err}\n{fix}") from err
    return LMBundle(model.eval(), prepare_tokenizer(tokenizer))


def check_loads(folder: Path) -> None:
    """Check, without reading the weights' values, that a Hugging Face model folder loads: the model
    class its config names is built on the meta device and every one of its parameters is found, with
    its shape, in the safetensors files (transformers' own matching of names); its tokenizer and image
    processor (if any) load. Cheap for any size, so a login node can check a 7B download."""
    with MODEL_BUILD_LOCK:
        import transformers
        from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer

    try:
        with MODEL_BUILD_LOCK:
            config = AutoConfig.from_pretrained(folder, local_files_only=True)
            names = [getattr(transformers, a, None) for a in config.architectures or []]
            if not names or names[0] is None:
                raise ValueError(f"{folder}/config.json names no model class of transformers: {config.architectures}")
            _, info = names[0].from_pretrained(
                folder, use_safetensors=True, device_map="meta", output_loading_info=True, local_files_only=True
            )
            AutoTokenizer.from_pretrained(folder, local_files_only=True)
            if (folder / "preprocessor_config.json").is_file():
                AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    except (OSError, RuntimeError) as err:  # a file missing or corrupt; a tensor of another shape
        raise ValueError(f"the model in {folder} does not load: {err}") from err
    if info["missing_keys"]:
        missing = sorted(info["missing_keys"])
        raise ValueError(
            f"the weights in {folder} do not fit {config.architectures[0]}: {len(missing)} parameter(s) missing "
            f"(e.g. {missing[0]}), which would be randomly initialised"
        )


def fetch_hub_model(repo_id: str, revision: str | None, cache_dir: str | None) -> Path:
    """Download what codyra loads of a hub model into the cache (once, on a machine with internet) and
    check it loads (:func:`check_loads`); returns its snapshot folder."""
    folder = download_snapshot(repo_id, revision, cache_dir)
    check_loads(folder)
    return folder


def pretrained_lm(cfg: dict, dtype: torch.dtype | None = torch.float32) -> LMBundle:
    """theta_0 (in ``dtype``; None: the checkpoint's own), verified (:func:`verify_hf_theta0`)."""
    source, local = pretrained_source(cfg)
    m = cfg["model"]
    bundle = load_causal_lm(source, local=local, cache_dir=m["cache_dir"], revision=m["revision"], dtype=dtype)
    verify_hf_theta0(cfg, bundle.model, source, local=local, own=is_mini(cfg) and m["pretrained"] is None)
    return bundle


def verify_hf_theta0(cfg: dict, model: torch.nn.Module, source: str, *, local: bool, own: bool) -> None:
    """Check a Hugging Face theta_0 just loaded from ``source`` (a local folder, or a hub id read at
    ``model.revision``): its weights files against the digests its mini pretraining recorded (``own``)
    or those recorded at their first use by this benchmark (:mod:`codyra.store.theta0`), its values
    for being finite. The files are those of the folder the model was loaded from (:func:`model_folder`)."""
    m = cfg["model"]
    folder = model_folder(source, local=local, revision=m["revision"], cache_dir=m["cache_dir"])
    weights = weight_files(folder)
    unrecorded = {}
    if own:
        fix = (
            f"rerun the mini pretraining (snakemake -f {folder / 'model.safetensors'}, "
            "or codyra pretrain-mini --config <config>)"
        )
        verify_own(weights, fix)
    else:
        label = hub_label(source, m["revision"])
        files = {str(f) if local else f"{label}: {f.name}": f for f in weights}
        fix = refetch(source, folder, local=local, revision=m["revision"], cache_dir=m["cache_dir"])
        unrecorded = verify_first_use(cfg, files, fix)
    check_finite(model, folder, fix)
    record_first_use(cfg, unrecorded)
