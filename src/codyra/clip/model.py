"""Create open_clip CLIP models with real weights, offline-friendly and unpickle-free.

``pretrained`` is either an open_clip tag (``openai``, ``laion2b_s34b_b88k``, ...) or a path
to a ``.safetensors`` state dict (such as the mini benchmark's pretrained model). Only
safetensors files are ever loaded.

A tag resolves to its safetensors file on the Hugging Face hub, kept in the hub's cache
layout under ``model.cache_dir`` (default: huggingface_hub's cache, ``$HF_HUB_CACHE``). A
cached file is used without touching the network. On a miss the file is downloaded,
unless the hub is offline (``HF_HUB_OFFLINE=1``, as on compute nodes without internet):
then ``WeightsUnavailableError`` names the cache and the ``codyra fetch-weights`` command
that fills it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import open_clip
import torch
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import LocalEntryNotFoundError
from open_clip.constants import HF_SAFE_WEIGHTS_NAME, HF_WEIGHTS_NAME
from safetensors import SafetensorError, safe_open

from codyra import hub
from codyra.clip.weights import own_weights, pretrained_weights
from codyra.data.tasks import ImageConfig
from codyra.errors import ConfigError, WeightsUnavailableError
from codyra.store.theta0 import check_finite, record_first_use, verify_first_use, verify_own

MODEL_CONFIG_DIR = Path(__file__).resolve().parent.parent / "mini" / "clip" / "model_configs"  # the mini CLIP's
open_clip.add_model_config(MODEL_CONFIG_DIR)


_SHARED_TOKENIZERS: dict[str, open_clip.SimpleTokenizer] = {}
_SHARED_TOKENIZERS_LOCK = threading.Lock()


def clip_tokenizer(name: str):
    """open_clip's tokenizer of model ``name``. Its BPE tokenizer (CLIP's, the mini's) is built once per
    process and shared, as every model build, probe and distillation job of a grid would rebuild it from
    its vocabulary file: it keeps no state across calls but a memo of encoded words, which threads
    may share. Others (Hugging Face tokenizers, not safe to share between threads) are built anew."""
    with _SHARED_TOKENIZERS_LOCK:
        tokenizer = _SHARED_TOKENIZERS.get(name)
        if tokenizer is None:
            tokenizer = open_clip.get_tokenizer(name)
            if type(tokenizer) is open_clip.SimpleTokenizer:
                _SHARED_TOKENIZERS[name] = tokenizer
    return tokenizer


@dataclass
class ClipBundle:
    model: torch.nn.Module
    tokenizer: object
    image: ImageConfig


@dataclass(frozen=True)
class HubFile:
    """Where a tag's safetensors weights live on the Hugging Face hub."""

    repo_id: str
    filename: str

    def __str__(self) -> str:
        return f"{self.repo_id}/{self.filename}"


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


def pretrained_tag_config(name: str, tag: str) -> dict:
    """open_clip's record of a pretrained tag (hub location, QuickGELU, preprocessing)."""
    config = open_clip.get_pretrained_cfg(name, tag)
    if not config:
        known = ", ".join(open_clip.list_pretrained_tags_by_model(name)) or "none"
        raise ValueError(
            f"open_clip has no pretrained tag {tag!r} for {name!r} (known: {known}); or give a .safetensors path"
        )
    return config


def hub_file(name: str, tag: str) -> HubFile:
    """The tag's safetensors file: open_clip names its pickled file; the hub holds both."""
    config = pretrained_tag_config(name, tag)
    if not config.get("hf_hub"):
        raise WeightsUnavailableError(
            f"open_clip publishes {name} / {tag} only as a pickled file ({config.get('url')}); codyra loads "
            "safetensors only. Convert it once (load the state dict, save it with safetensors.torch.save_file) "
            "and set model.pretrained to the .safetensors path"
        )
    repo_id, filename = os.path.split(config["hf_hub"])
    filename = filename or HF_WEIGHTS_NAME
    safe = HF_SAFE_WEIGHTS_NAME if filename == HF_WEIGHTS_NAME else str(Path(filename).with_suffix(".safetensors"))
    return HubFile(repo_id, safe)


def fetch_command(name: str, tag: str, cache_dir: str | None) -> str:
    return hub.fetch_command(name, cache_dir, pretrained=tag)


def fetch_fix(name: str, tag: str, cache_dir: str | None) -> str:
    return (
        f"Fetch them once on a machine with internet (e.g. a login node): {fetch_command(name, tag, cache_dir)} "
        f"and point model.cache_dir at {hub.cache_path(cache_dir)} (a directory the compute nodes can read)."
    )


def cached_tag_file(name: str, tag: str, cache_dir: str | None = None) -> Path:
    """The cached safetensors file of an open_clip tag, found without the network (whatever
    HF_HUB_OFFLINE says); else WeightsUnavailableError naming the cache and the fetch command."""
    remote = hub_file(name, tag)
    cache = hub.cache_path(cache_dir)
    try:
        return Path(hf_hub_download(remote.repo_id, remote.filename, cache_dir=cache, local_files_only=True))
    except LocalEntryNotFoundError:
        offline = " and the Hugging Face hub is offline (HF_HUB_OFFLINE=1)" if hub.is_offline() else ""
        raise WeightsUnavailableError(
            f"{name} weights {tag!r} ({remote}) are not in the weights cache {cache}{offline}. "
            f"{fetch_fix(name, tag, cache_dir)}"
        ) from None


def pretrained_file(name: str, tag: str, cache_dir: str | None = None) -> Path:
    """The local safetensors file of an open_clip tag: from the cache, else downloaded.

    Raises WeightsUnavailableError when it is not cached and cannot be downloaded (hub
    offline, no network), naming the cache and the fetch command.
    """
    try:
        path = cached_tag_file(name, tag, cache_dir)
    except WeightsUnavailableError:
        if hub.is_offline():
            raise
        remote, cache = hub_file(name, tag), hub.cache_path(cache_dir)
        try:
            path = hf_hub_download(remote.repo_id, remote.filename, cache_dir=cache)
        except Exception as err:  # network and hub errors come in many types; all mean "not available"
            raise WeightsUnavailableError(
                f"could not download {name} weights {tag!r} ({remote}) into {cache}: {type(err).__name__}: {err}. "
                f"{fetch_fix(name, tag, cache_dir)}"
            ) from err
    return check_state_file(path, f"cached {name} weights {tag!r}", f"then run {fetch_command(name, tag, cache_dir)}")


def resolve_weights(name: str, pretrained: str | None, cache_dir: str | None = None) -> tuple[Path | None, dict]:
    """(the local safetensors file of ``pretrained``, a path or an open_clip tag; the tag's
    record, {} for a path); (None, {}) without ``pretrained``: random initialisation."""
    if name not in open_clip.list_models():
        raise ValueError(f"unknown open_clip model {name!r} (config key model.name); see open_clip.list_models()")
    if pretrained and is_weights_path(pretrained):
        return check_state_file(
            pretrained, "model weights", "rerun the step that produces it (mini: the pretrain job)"
        ), {}
    if pretrained:
        return pretrained_file(name, pretrained, cache_dir), pretrained_tag_config(name, pretrained)
    return None, {}


def create_clip(name: str, pretrained: str | None, *, cache_dir: str | None = None, device="cpu") -> ClipBundle:
    return build_clip(name, *resolve_weights(name, pretrained, cache_dir), device=device)


def build_clip(name: str, path: Path | None, tag_config: dict, *, device="cpu") -> ClipBundle:
    """open_clip model ``name`` with the weights file ``path`` (None: random initialisation)."""
    try:  # open_clip loads safetensors with safetensors itself, strictly
        model = open_clip.create_model(
            name,
            pretrained=None if path is None else str(path),
            # OpenAI's weights were trained with QuickGELU; open_clip builds a tag's model with
            # the architecture's own activation unless told (the official code's open_clip
            # 2.12 built OpenAI models with QuickGELU)
            force_quick_gelu=bool(tag_config.get("quick_gelu")),
            force_preprocess_cfg=tag_config,  # the tag's mean/std/interpolation (open_clip filters keys)
            device="cpu",
        )
    except RuntimeError as err:
        if path is None:
            raise
        raise ValueError(f"weights {path} do not fit model {name!r}: {err}") from err
    model = model.to(device).eval()
    pp = open_clip.get_model_preprocess_cfg(model)
    size = pp["size"][0] if isinstance(pp["size"], (tuple, list)) else pp["size"]
    image = ImageConfig(size=int(size), mean=tuple(pp["mean"]), std=tuple(pp["std"]))
    return ClipBundle(model, clip_tokenizer(name), image)


def fetch_weights(name: str, tag: str, cache_dir: str | None = None) -> Path:
    """Download a tag's weights into the cache (once, on a machine with internet) and check
    they load into the model; returns the cached file."""
    path = pretrained_file(name, tag, cache_dir)
    create_clip(name, tag, cache_dir=cache_dir)
    return path


def check_no_revision(cfg: dict) -> None:
    if cfg["model"]["revision"] is not None:
        raise ConfigError(
            f"config key model.revision: {cfg['model']['revision']!r} is set, but an open_clip model reads no hub "
            "revision (a tag names its file, model.pretrained a local file); remove it"
        )


def pretrained_clip(cfg: dict) -> ClipBundle:
    """theta_0: ``model.pretrained`` (an open_clip tag or a safetensors file), else the mini
    benchmark's own pretraining; its file verified against its recorded digest (:mod:`codyra.store.theta0`)
    before it is loaded, and its values checked to be finite."""
    m = cfg["model"]
    pretrained = pretrained_weights(cfg)
    check_no_revision(cfg)
    path, tag_config = resolve_weights(m["name"], pretrained, m["cache_dir"])
    if path is None:
        return build_clip(m["name"], None, tag_config)
    unrecorded = {}
    if own_weights(cfg) is not None:
        fix = f"rerun the mini pretraining (snakemake -f {path}, or codyra pretrain-mini --config <config>)"
        verify_own([path], fix)
    elif is_weights_path(pretrained):
        fix = f"restore {path} (model.pretrained) or rerun the step that wrote it"
        unrecorded = verify_first_use(cfg, {str(path.expanduser().absolute()): path}, fix)
    else:
        fix = (
            f"delete the cached file {path} and fetch it again ({fetch_command(m['name'], pretrained, m['cache_dir'])})"
        )
        unrecorded = verify_first_use(
            cfg, {f"open_clip {m['name']} {pretrained}: {hub_file(m['name'], pretrained)}": path}, fix
        )
    bundle = build_clip(m["name"], path, tag_config)
    check_finite(bundle.model, path, fix)
    record_first_use(cfg, unrecorded)
    return bundle
