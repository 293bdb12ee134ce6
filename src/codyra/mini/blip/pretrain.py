"""Pretrain the mini BLIP: a BLIP image-text model of ``model_configs/<model.name>.json`` with a
WordPiece tokenizer over the mini's words, trained on the mini CLIP's corpus by its contrastive
loop (:func:`codyra.mini.clip.pretrain.contrastive_pretrain`), written as a Hugging Face model
folder (weights, tokenizer, image processor) that :func:`codyra.blip.model.pretrained_blip` loads.

The logit scale is the family's fixed one, 1 / ``blip.temperature``: the BLIP family trains with
it (:mod:`codyra.blip.model`), so the pretraining does too. The images are the mini's 32 x 32
scenes at the model's resolution, normalised with the image processor's (CLIP's) mean and std.
"""

from __future__ import annotations

import logging
import re
import string
import time
from pathlib import Path

import torch

from codyra.blip.model import BlipImageText, BlipTokenizer, image_config, set_temperature
from codyra.data.scenes import TASK_NAMES
from codyra.data.scenes.tasks import build_mini_task
from codyra.device import use_threads
from codyra.llm.model import MODEL_BUILD_LOCK, mini_model_config
from codyra.mini.clip.pretrain import contrastive_pretrain, pretraining_corpus
from codyra.store.theta0 import write_model_folder

log = logging.getLogger(__name__)
MODEL_CONFIG_DIR = Path(__file__).resolve().parent / "model_configs"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# any ASCII text outside the mini's still tokenizes, letter by letter (never [UNK])
FALLBACK = (
    *string.ascii_lowercase,
    *string.digits,
    *string.punctuation,
    *(f"##{c}" for c in string.ascii_lowercase + string.digits),
)


def mini_texts(mini: dict) -> list[str]:
    """Every class prompt of the mini's tasks (each template with each class name)."""
    texts = []
    for name in TASK_NAMES:
        task = build_mini_task(name, mini, image=None)  # names and templates only: no image is built
        texts += [template.format(c) for template in task.templates for c in task.classnames]
    return texts


def vocabulary(texts) -> list[str]:
    """The special tokens, every word and punctuation mark of ``texts`` (lowercased, split as BERT's
    pre-tokenizer splits), then the letter-by-letter fallback; deterministic in ``texts``."""
    words = sorted({w for text in texts for w in re.findall(r"\w+|[^\w\s]", text.lower())})
    return list(dict.fromkeys([*SPECIAL_TOKENS, *words, *FALLBACK]))


def unit_variance_init(model: torch.nn.Module) -> None:
    """Every matrix ~ N(0, 1 / fan_in), so each layer's outputs start at unit variance. At transformers'
    0.02 the tiny towers start with every caption's feature alike (cosine 0.9999 between any two) and
    1,200 steps barely separate them: the loss stays near chance. The model config sets the vision
    tower's ``initializer_range`` to 0.02 too: BLIP's default of 1e-10 would leave its class and
    position embeddings (not matrices) at zero."""
    with torch.no_grad():
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0.0, weight.shape[1] ** -0.5)


def pretrain_mini_blip(cfg: dict, out_path: str | Path) -> dict:
    """theta_0 of the mini BLIP: the model folder holding ``out_path`` (its ``model.safetensors``),
    replaced whole once written."""
    with MODEL_BUILD_LOCK:  # transformers: see codyra.llm.model.MODEL_BUILD_LOCK
        from transformers import BertTokenizerFast, BlipConfig, BlipImageProcessor

    mini = cfg["mini"]
    architecture = mini_model_config(cfg["model"]["name"], MODEL_CONFIG_DIR)
    use_threads(mini["pretrain_threads"])
    start = time.time()
    images, captions = pretraining_corpus(mini)
    vocab = vocabulary([*captions, *mini_texts(mini)])
    tokenizer = BertTokenizerFast(vocab={word: k for k, word in enumerate(vocab)})
    ids = {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.cls_token_id}
    text = {**architecture["text_config"], "vocab_size": len(vocab), "sep_token_id": tokenizer.sep_token_id, **ids}
    size = architecture["vision_config"]["image_size"]
    processor = BlipImageProcessor(size={"height": size, "width": size})
    torch.manual_seed(mini["pretrain_seed"])  # transformers initialises from the global RNG
    with MODEL_BUILD_LOCK:
        model = BlipImageText(BlipConfig(**{**architecture, "text_config": text}))
    unit_variance_init(model)
    set_temperature(model, cfg["blip"]["temperature"])
    wrapped = BlipTokenizer(tokenizer, cfg["blip"]["max_text_len"])
    loss = contrastive_pretrain(mini, model, wrapped, image_config(processor), images, captions)

    out = Path(out_path).parent
    write_model_folder(out, model, tokenizer, processor)
    seconds = time.time() - start
    log.info("pretrained mini BLIP in %.1fs, final loss %.3f -> %s", seconds, loss, out)
    return {"seconds": seconds, "final_loss": loss, "steps": mini["pretrain_steps"]}
