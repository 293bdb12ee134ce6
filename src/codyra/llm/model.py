"""Causal LMs for TRACE: theta_0 and theta_i = theta_0 + stored updates, plus task folders.

theta_0 comes from ``model.pretrained`` (a local Hugging Face model folder) or else
``model.name`` (a hub id such as ``meta-llama/Llama-2-7b-chat-hf``, read through the cache
``model.cache_dir``). For the mini TRACE (config block ``llm.mini``) it is the folder the
workflow's pretraining writes, ``results/{benchmark}/pretrain/``. Weights are read from
safetensors only and kept in fp32 on the CPU, so stored updates merge exactly
(:mod:`codyra.llm.rebuild`); training and generation cast where they run.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from codyra.errors import WeightsUnavailableError
from codyra.store.paths import MINI_PRETRAINED, mini_data_dir, results_path
from codyra.store.theta0 import check_finite, local_weight_files, record_first_use, verify_first_use, verify_own
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
    return trace_root(cfg) / cfg["tasks"][j - 1]["name"]


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
    if not (folder / "model.safetensors").is_file() and not (folder / "model.safetensors.index.json").is_file():
        raise FileNotFoundError(
            f"no safetensors weights in {folder} (expected model.safetensors or model.safetensors.index.json). "
            "For the mini TRACE run `codyra pretrain-mini --config <config>` first; codyra never loads "
            "pickled weights (pytorch_model.bin)."
        )


def load_causal_lm(source: str, *, local: bool, cache_dir: str | None = None) -> LMBundle:
    """Model (fp32, CPU, eval mode) and tokenizer from a local folder or a hub id."""
    from huggingface_hub.constants import HF_HUB_CACHE

    with MODEL_BUILD_LOCK:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one carriage-return bar per load would clutter every job log
    if local:
        source = str(Path(source).expanduser())
        check_local_model(Path(source))
    try:
        with MODEL_BUILD_LOCK:
            model = AutoModelForCausalLM.from_pretrained(
                source, cache_dir=cache_dir, use_safetensors=True, dtype=torch.float32, local_files_only=local
            )
            tokenizer = AutoTokenizer.from_pretrained(source, cache_dir=cache_dir, local_files_only=local)
    except OSError as err:
        raise WeightsUnavailableError(
            f"could not load the causal LM {source!r}: {err}\nLooked in the cache {cache_dir or HF_HUB_CACHE} "
            "(config key model.cache_dir). On a machine without internet, download it once where there is "
            f"(`hf download {source} --cache-dir <shared dir>`; gated models such as LLaMA need an accepted "
            "licence and HF_TOKEN), then set model.cache_dir to that dir and HF_HUB_OFFLINE=1 on compute nodes."
        ) from err
    return LMBundle(model.eval(), prepare_tokenizer(tokenizer))


def pretrained_lm(cfg: dict) -> LMBundle:
    """theta_0, verified (:func:`verify_hf_theta0`)."""
    source, local = pretrained_source(cfg)
    bundle = load_causal_lm(source, local=local, cache_dir=cfg["model"]["cache_dir"])
    verify_hf_theta0(cfg, bundle.model, source, local=local, own=is_mini(cfg) and cfg["model"]["pretrained"] is None)
    return bundle


def verify_hf_theta0(cfg: dict, model: torch.nn.Module, source: str, *, local: bool, own: bool) -> None:
    """Check a Hugging Face theta_0 just loaded from ``source`` (a local folder or a hub id): its
    weights files against the digests its mini pretraining recorded (``own``) or those recorded at
    their first use by this benchmark (:mod:`codyra.store.theta0`), its values for being finite."""
    if local:
        folder = Path(source).expanduser().absolute()
        files = {str(f): f for f in local_weight_files(folder)}
    else:
        folder = hub_snapshot(source, cache_dir=cfg["model"]["cache_dir"])
        files = {f"{source}: {f.name}": f for f in local_weight_files(folder)}
    unrecorded = {}
    if own:
        fix = (
            f"rerun the mini pretraining (snakemake -f {folder / 'model.safetensors'}, "
            "or codyra pretrain-mini --config <config>)"
        )
        verify_own(list(files.values()), fix)
    else:
        fix = (
            f"restore the model folder {folder}"
            if local
            else f"delete {folder} and download {source} again (hf download {source} --cache-dir <cache>)"
        )
        unrecorded = verify_first_use(cfg, files, fix)
    check_finite(model, folder, fix)
    record_first_use(cfg, unrecorded)


def hub_snapshot(repo_id: str, cache_dir: str | None) -> Path:
    """The cached snapshot folder of a hub model that has just been loaded."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir)
    if not isinstance(config, str):
        raise WeightsUnavailableError(
            f"{repo_id} loaded, but its files are not in the cache {cache_dir or 'of huggingface_hub'}: "
            "its weights cannot be verified"
        )
    return Path(config).parent
