"""The CLIP side of the distillation methods (LwF, LwF-VR, ZSCL): the image-text model's
features, temperature and token space that their distillation term
(:func:`codyra.methods.lwf.clip_distillation`) and LwF-VR's random vocabulary read."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from codyra.clip.model import clip_tokenizer


def image_embeddings(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """``model``'s L2-normalised fp32 image features of ``images`` (with their gradient, if any)."""
    return F.normalize(model.encode_image(images).float(), dim=-1)


def text_embeddings(model: nn.Module, tokens: torch.Tensor, chunk: int) -> torch.Tensor:
    """``model``'s L2-normalised fp32 text features of token rows, ``chunk`` rows per forward."""
    return F.normalize(torch.cat([model.encode_text(rows).float() for rows in tokens.split(chunk)]), dim=-1)


def logit_scale(model: nn.Module) -> torch.Tensor:
    """The temperature CLIP's logits are scaled by (``exp`` of the stored log scale)."""
    return model.logit_scale.exp()


def token_space(model: nn.Module, model_name: str) -> tuple[int, int, int, int]:
    """(start token id, end token id, vocabulary size, context length) of the text encoder."""
    tokenizer = clip_tokenizer(model_name)
    return tokenizer.sot_token_id, tokenizer.eot_token_id, model.vocab_size, model.context_length
