"""BLIP image-text models (Hugging Face ``transformers``) behind the CLIP interface.

The model is :class:`BlipForImageTextRetrieval`, for its image-text contrastive (ITC) head: the
features BLIP aligns images and texts with are the [CLS] states of its ViT and of its BERT text
encoder (text-only mode, no cross-attention), projected by ``vision_proj`` / ``text_proj`` and
L2-normalised (transformers' ``forward(use_itm_head=False)``; salesforce/BLIP
models/blip_retrieval.py). Its released checkpoints (``Salesforce/blip-itm-base-coco``, ...) hold
those trained projections; ``BlipModel``'s ``visual_projection`` / ``text_projection`` are not in
any released BLIP checkpoint. :class:`BlipImageText` adds CLIP's ``encode_image`` /
``encode_text``, so CLIP's zero-shot heads, training session, cells and routed inference run it
unchanged; its tokenizer returns token ids as open_clip's does.

The logit scale: transformers' port drops BLIP's learned ITC temperature ``temp`` (its
classification is an argmax, scale-free); training's cross-entropy needs one, config key
``blip.temperature`` (BLIP initialises ``temp`` at 0.07, salesforce/BLIP models/blip_retrieval.py),
held as the non-persistent buffer ``logit_scale`` = log(1 / temperature), open_clip's convention:
it is not in the weights and no method trains it.

theta_0 comes from ``model.pretrained`` (a local Hugging Face model folder), on the mini benchmark
from its own pretraining (:mod:`codyra.mini.blip`, ``results/{benchmark}/pretrain/``), or else
``model.name`` (a hub id at revision ``model.revision``, read through the cache ``model.cache_dir``,
:mod:`codyra.hub`): weights from safetensors only, kept in fp32 on the CPU so stored updates merge
exactly; its image settings (resolution, normalisation) from the folder's image processor. The hub's
``Salesforce/blip-itm-base-coco`` holds safetensors weights only on its pull-request revision
``refs/pr/5`` (the hub's automatic conversion; ``main`` holds pickled and TensorFlow files), so
config/blip_xtail_16shot.yaml reads that revision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from codyra.clip.weights import own_weights
from codyra.data.tasks import ImageConfig
from codyra.errors import WeightsUnavailableError
from codyra.llm.model import MODEL_BUILD_LOCK, model_folder, refetch, verify_hf_theta0

with MODEL_BUILD_LOCK:  # transformers' lazy module: see codyra.llm.model.MODEL_BUILD_LOCK
    from transformers import BlipForImageTextRetrieval


class BlipImageText(BlipForImageTextRetrieval):
    """BLIP's retrieval model with CLIP's interface: unnormalised ITC features of images and texts."""

    def encode_image(self, pixel_values: torch.Tensor) -> torch.Tensor:
        hidden = self.vision_model(pixel_values=pixel_values).last_hidden_state
        return self.vision_proj(hidden[:, 0, :])

    def encode_text(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Features of token ids padded with the text config's pad id (the attention mask follows)."""
        mask = (input_ids != self.config.text_config.pad_token_id).long()
        hidden = self.text_encoder(input_ids=input_ids, attention_mask=mask).last_hidden_state
        return self.text_proj(hidden[:, 0, :])


class BlipTokenizer:
    """Texts -> a (texts, length) tensor of token ids, padded to the longest and truncated to
    ``max_length`` tokens (BLIP's retrieval: 35), as open_clip's tokenizers are called."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length = tokenizer, max_length

    def __call__(self, texts) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        encoded = self.tokenizer(
            texts, padding="longest", truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return encoded["input_ids"]


@dataclass
class BlipBundle:
    model: BlipImageText
    tokenizer: BlipTokenizer
    image: ImageConfig


def set_temperature(model: BlipImageText, temperature: float) -> None:
    """The logit scale exp(logit_scale) = 1 / temperature (a buffer: not in the weights, never trained)."""
    model.register_buffer("logit_scale", torch.tensor(math.log(1.0 / temperature)), persistent=False)


def image_config(processor) -> ImageConfig:
    """The resolution and normalisation of a BLIP image processor (BLIP resizes to a square)."""
    size = processor.size
    height, width = size["height"], size["width"]
    if height != width:
        raise ValueError(f"BLIP image processor size {height}x{width}: codyra's image pipeline takes square images")
    return ImageConfig(size=int(height), mean=tuple(processor.image_mean), std=tuple(processor.image_std))


def load_blip(
    source: str, *, local: bool, blip: dict, cache_dir: str | None = None, revision: str | None = None
) -> BlipBundle:
    """Model (fp32, CPU, eval mode), tokenizer and image settings from a local folder or a hub id
    (:func:`codyra.llm.model.model_folder`); ``blip`` is the config block (``temperature``, ``max_text_len``)."""
    folder = model_folder(source, local=local, revision=revision, cache_dir=cache_dir)
    with MODEL_BUILD_LOCK:
        from transformers import AutoTokenizer, BlipImageProcessor
        from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        with MODEL_BUILD_LOCK:
            model = BlipImageText.from_pretrained(
                folder, use_safetensors=True, dtype=torch.float32, local_files_only=True
            )
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            processor = BlipImageProcessor.from_pretrained(folder, local_files_only=True)
    except OSError as err:  # a file of the folder missing or corrupt
        fix = refetch(source, folder, local=local, revision=revision, cache_dir=cache_dir)
        raise WeightsUnavailableError(f"could not load the BLIP model {source!r} from {folder}: {err}\n{fix}") from err
    pad = model.config.text_config.pad_token_id
    if tokenizer.pad_token_id != pad:
        raise ValueError(
            f"BLIP model {source!r}: its tokenizer pads with id {tokenizer.pad_token_id}, its text config with {pad}; "
            "the text features mask the padding by that id, so both must agree"
        )
    set_temperature(model, blip["temperature"])
    return BlipBundle(model.eval(), BlipTokenizer(tokenizer, blip["max_text_len"]), image_config(processor))


def pretrained_source(cfg: dict) -> tuple[str, bool]:
    """(where theta_0 is, whether that is a local folder rather than a hub id)."""
    if cfg["model"]["pretrained"] is not None:
        return cfg["model"]["pretrained"], True
    own = own_weights(cfg)  # the mini benchmark's (codyra.mini.blip)
    if own is not None:
        return str(Path(own).parent), True
    return cfg["model"]["name"], Path(cfg["model"]["name"]).expanduser().is_dir()


def pretrained_blip(cfg: dict) -> BlipBundle:
    """theta_0, verified (:func:`codyra.llm.model.verify_hf_theta0`)."""
    source, local = pretrained_source(cfg)
    m = cfg["model"]
    bundle = load_blip(source, local=local, blip=cfg["blip"], cache_dir=m["cache_dir"], revision=m["revision"])
    verify_hf_theta0(cfg, bundle.model, source, local=local, own=own_weights(cfg) is not None)
    return bundle
