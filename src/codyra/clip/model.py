"""Create open_clip CLIP models with real weights, offline-friendly and unpickle-free.

``pretrained`` is either an open_clip tag (``openai``, ``laion2b_s34b_b88k``, ...), resolved
through open_clip's download cache, or a path to a ``.safetensors`` state dict (such as the
mini benchmark's pretrained model). Only safetensors files are accepted as paths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import open_clip
import torch
from safetensors import SafetensorError, safe_open

from codyra.tasks import ImageConfig

MODEL_CONFIG_DIR = Path(__file__).resolve().parent.parent / "mini" / "model_configs"
open_clip.add_model_config(MODEL_CONFIG_DIR)


class WeightsUnavailableError(RuntimeError):
    pass


@dataclass
class ClipBundle:
    model: torch.nn.Module
    tokenizer: object
    image: ImageConfig


def default_cache_dir(cache_dir: str | None) -> str:
    if cache_dir:
        return str(cache_dir)
    return os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub"
    )


CHECKPOINT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")


def is_weights_path(pretrained: str) -> bool:
    """A file path rather than an open_clip tag (tags have no directories or file suffixes)."""
    return os.sep in pretrained or pretrained.endswith(CHECKPOINT_SUFFIXES) or Path(pretrained).exists()


def check_state_file(path: str | Path, what: str, producer: str) -> Path:
    """Fail early, with the file and the fix, on a missing, pickled or corrupted weights file."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ValueError(f"{what} {path} is not a .safetensors file; codyra never unpickles checkpoints")
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}. {producer}")
    try:
        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{what} {path} is corrupted or truncated ({err}). Delete it; {producer}") from err
    return path


def create_clip(name: str, pretrained: str | None, *, cache_dir: str | None = None, device="cpu") -> ClipBundle:
    if name not in open_clip.list_models():
        raise ValueError(f"unknown open_clip model {name!r} (config key model.name); see open_clip.list_models()")
    if pretrained and is_weights_path(pretrained):
        path = check_state_file(pretrained, "model weights", "rerun the step that produces it (mini: the pretrain job)")
        try:  # open_clip loads safetensors with safetensors itself, strictly
            model = open_clip.create_model(name, pretrained=str(path), device="cpu")
        except RuntimeError as err:
            raise ValueError(f"weights {path} do not fit model {name!r}: {err}") from err
    else:
        model = _create_with_tag(name, pretrained, cache_dir)
    model = model.to(device).eval()
    pp = open_clip.get_model_preprocess_cfg(model)
    size = pp["size"][0] if isinstance(pp["size"], (tuple, list)) else pp["size"]
    image = ImageConfig(size=int(size), mean=tuple(pp["mean"]), std=tuple(pp["std"]))
    return ClipBundle(model, open_clip.get_tokenizer(name), image)


def _create_with_tag(name: str, tag: str | None, cache_dir: str | None) -> torch.nn.Module:
    if tag and tag not in open_clip.list_pretrained_tags_by_model(name):
        known = ", ".join(open_clip.list_pretrained_tags_by_model(name)) or "none"
        raise ValueError(f"open_clip has no pretrained tag {tag!r} for {name!r} (known: {known}); or give a .safetensors path")
    try:
        return open_clip.create_model(name, pretrained=tag, cache_dir=cache_dir, require_pretrained=bool(tag))
    except Exception as err:  # network and hub errors come in many types; all mean "weights not available"
        raise WeightsUnavailableError(
            f"could not load {name} weights {tag!r}: {type(err).__name__}: {err}\n"
            f"Looked in the cache {default_cache_dir(cache_dir)} (config key model.cache_dir). On a machine "
            f"without internet, fetch them once where there is: codyra fetch-weights --model {name} "
            f"--pretrained {tag} --cache-dir <shared dir>, then set model.cache_dir to that dir and "
            "HF_HUB_OFFLINE=1 on compute nodes."
        ) from err
