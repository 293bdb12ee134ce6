"""Pretrain the mini CLIP contrastively on the synthetic corpus (theta_0 of the mini benchmark);
the mini BLIP (:mod:`codyra.mini.blip`) is pretrained by the same loop.

Two-way CLIP loss in which identical captions within a batch are positives of each other
(short captions such as "a red shape." repeat often). AdamW with weight decay on matrices,
linear warm-up then cosine decay, logit scale capped at 100. Deterministic given the seeds.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from codyra.clip.model import create_clip
from codyra.data.scenes.corpus import make_corpus
from codyra.device import use_threads
from codyra.progress import progress_bar
from codyra.steps.optim import decay_groups
from codyra.steps.schedules import warmup_cosine
from codyra.store.io import save_safetensors
from codyra.store.theta0 import record_written

log = logging.getLogger(__name__)
WARMUP_FRACTION = 0.05
MAX_LOGIT_SCALE = math.log(100.0)


def soft_clip_loss(image_emb, text_emb, same_caption, logit_scale):
    logits = logit_scale * image_emb @ text_emb.T
    targets = same_caption / same_caption.sum(dim=1, keepdim=True)
    return 0.5 * (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets))


def pretrain_mini(cfg: dict, out_path: str | Path) -> dict:
    """The mini CLIP's theta_0 (``model.name``, an open_clip config of ``model_configs``) as one
    safetensors file ``out_path``."""
    mini = cfg["mini"]
    use_threads(mini["pretrain_threads"])
    start = time.time()
    images, captions = pretraining_corpus(mini)
    torch.manual_seed(mini["pretrain_seed"])  # open_clip initialises from the global RNG
    bundle = create_clip(cfg["model"]["name"], None)
    loss = contrastive_pretrain(mini, bundle.model, bundle.tokenizer, bundle.image, images, captions)
    state = {k: v.detach().contiguous() for k, v in bundle.model.state_dict().items()}
    save_safetensors(out_path, state, {"codyra": "mini-pretrained"})
    record_written([Path(out_path)])  # every load of theta_0 checks it against this digest
    seconds = time.time() - start
    log.info("pretrained mini CLIP in %.1fs, final loss %.3f -> %s", seconds, loss, out_path)
    return {"seconds": seconds, "final_loss": loss, "steps": mini["pretrain_steps"]}


def pretraining_corpus(mini: dict):
    """The corpus of config block ``mini``: uint8 NHWC images and their captions."""
    start = time.time()
    images, captions = make_corpus(mini["corpus_size"], mini["data_seed"])
    log.info("corpus: %d image-caption pairs in %.1fs", len(captions), time.time() - start)
    return images, captions


def contrastive_pretrain(mini: dict, model, tokenizer, image_cfg, images, captions) -> float:
    """Train ``model`` (CLIP's interface: ``encode_image``, ``encode_text``, ``logit_scale``) in place
    on the corpus with config block ``mini``'s schedule; returns the last step's loss."""
    model.train()
    mean = torch.tensor(image_cfg.mean).view(1, 3, 1, 1)
    std = torch.tensor(image_cfg.std).view(1, 3, 1, 1)
    # the uint8 images, normalised a batch at a time: the same values as normalising the corpus at
    # once (elementwise), without its float copies (4 bytes a value, and three temporaries)
    nchw = torch.from_numpy(images).permute(0, 3, 1, 2)
    distinct = list(dict.fromkeys(captions))
    # each distinct caption tokenised once (about a quarter of the mini's corpus); a caption's row of
    # tokens does not depend on the others (open_clip pads to its context length, BLIP's tokenizer to
    # the longest caption, which is among the distinct ones)
    tokens = tokenizer(distinct)
    ids = {text: k for k, text in enumerate(distinct)}
    caption_ids = torch.tensor([ids[c] for c in captions])

    opt = torch.optim.AdamW(
        decay_groups(model.parameters(), 0.1),
        lr=mini["pretrain_lr"],
        betas=(0.9, 0.98),
        # one kernel over all tensors: unfused, the update of the 3.2 M-entry token embedding takes a fifth of each step
        fused=True,
    )
    steps, batch = mini["pretrain_steps"], mini["pretrain_batch_size"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(steps, int(WARMUP_FRACTION * steps)))
    gen = torch.Generator().manual_seed(mini["pretrain_seed"])
    order, cursor = torch.randperm(len(captions), generator=gen), 0
    bar = progress_bar(total=steps, desc="pretrain mini")
    for _step in range(steps):
        if cursor + batch > len(order):
            order, cursor = torch.randperm(len(captions), generator=gen), 0
        idx = order[cursor : cursor + batch]
        cursor += batch
        pixels = (nchw[idx].float() / 255.0 - mean) / std
        batch_ids = caption_ids[idx]
        image_emb = F.normalize(model.encode_image(pixels), dim=-1)
        text_emb = F.normalize(model.encode_text(tokens[batch_ids]), dim=-1)
        same = (batch_ids[:, None] == batch_ids[None, :]).float()
        loss = soft_clip_loss(image_emb, text_emb, same, model.logit_scale.exp())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, MAX_LOGIT_SCALE)
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()
    model.eval()
    return loss.item()
