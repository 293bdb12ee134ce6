"""The size and shape of a config's model: what a job's memory and runtime estimates are made of
(:mod:`codyra.experiment.resources`).

Read from the model's own configuration where this machine has it: a causal LM's ``config.json``
(``model.pretrained``'s folder, else the Hugging Face cache of ``model.name``), the mini TRACE's
packaged architecture, open_clip's model config (the paper's ViT-B/16 and the mini CLIP), the mini
BLIP's packaged config. Otherwise from :data:`PAPER_BACKBONES`, the architectures of the paper's
backbones, so a dry run on a machine without the weights still estimates the paper grid. Parameters
are counted from the architecture with the formulas of the model code (the tests check them against
transformers' and open_clip's own models); nothing here imports torch (every DAG build reads it).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from codyra.errors import ConfigError

Matrices = tuple[tuple[int, int], ...]  # (inputs, outputs) of each matrix a layer's adapters can reach


@dataclass(frozen=True)
class Tower:
    """One stack of transformer blocks: what its activations and its adapters scale with."""

    layers: int
    width: int  # the residual stream's width
    tokens: int  # tokens of one example (image patches and class token; a text's context)
    matrices: Matrices  # per layer

    def adapter_params(self, rank: int) -> int:
        """Parameters of rank-``rank`` adapters (A: r x in, B: out x r) on every matrix of every layer."""
        return self.layers * rank * sum(i + o for i, o in self.matrices)


@dataclass(frozen=True)
class ModelShape:
    name: str
    params: int  # every parameter of the model
    towers: tuple[Tower, ...]  # image and text towers of an image-text model; the decoder of a causal LM
    vocab: int  # the token vocabulary (a causal LM's logits per token)
    largest: int  # entries of the largest parameter tensor
    kv_width: int = 0  # keys per token and layer of a causal LM (its KV cache holds as many values)
    source: str = ""  # where the architecture was read

    def adapter_params(self, rank: int) -> int:
        """Adapters of rank ``rank`` on every matrix a placement can reach (an upper bound for any placement)."""
        return sum(t.adapter_params(rank) for t in self.towers)


def lm_shape(config: dict, name: str, source: str) -> ModelShape:
    """A LLaMA-style decoder (LLaMA, Gemma) from its Hugging Face ``config.json`` keys."""
    try:
        width, layers, mlp = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]
        heads, vocab = config["num_attention_heads"], config["vocab_size"]
    except KeyError as err:
        raise ConfigError(f"model {name}: its config ({source}) has no {err.args[0]}; is it a causal LM?") from None
    head = config.get("head_dim") or width // heads
    kv = (config.get("num_key_value_heads") or heads) * head
    query = heads * head
    attention_bias = (2 * query + 2 * kv) if config.get("attention_bias") else 0
    mlp_bias = (2 * mlp + width) if config.get("mlp_bias") else 0
    block = width * query + 2 * width * kv + query * width + 3 * width * mlp + 2 * width + attention_bias + mlp_bias
    tied = config.get("tie_word_embeddings", config.get("model_type") == "gemma")  # each model class's default
    params = vocab * width * (1 if tied else 2) + layers * block + width
    matrices = ((width, query), (width, kv), (width, kv), (query, width), (width, mlp), (width, mlp), (mlp, width))
    decoder = Tower(layers, width, tokens=0, matrices=matrices)
    largest = max(vocab * width, width * mlp, width * query)
    return ModelShape(name, params, (decoder,), vocab, largest, kv_width=kv, source=source)


def _open_clip_block(width: int, mlp: int) -> int:
    """An open_clip ResidualAttentionBlock: ln_1, fused in_proj and out_proj, ln_2, c_fc, c_proj."""
    return 3 * width * width + 3 * width + width * width + width + 4 * width + 2 * width * mlp + mlp + width


def open_clip_shape(config: dict, name: str, source: str) -> ModelShape:
    """An open_clip CLIP with a ViT image tower, from its model config (``embed_dim``, ``vision_cfg``, ``text_cfg``)."""
    vision, text, embed = config["vision_cfg"], config["text_cfg"], config["embed_dim"]
    vw, vl, patch, size = vision["width"], vision["layers"], vision["patch_size"], vision["image_size"]
    vm = int(vw * vision.get("mlp_ratio", 4))
    grid = (size // patch) ** 2 + 1
    image = 3 * patch * patch * vw + vw + grid * vw + 2 * vw + vl * _open_clip_block(vw, vm) + 2 * vw + vw * embed
    tw, tl, context, vocab = text["width"], text["layers"], text["context_length"], text["vocab_size"]
    tm = int(tw * text.get("mlp_ratio", 4))
    words = vocab * tw + context * tw + tl * _open_clip_block(tw, tm) + 2 * tw + tw * embed
    towers = (
        Tower(vl, vw, grid, ((vw, vw),) * 4 + ((vw, vm), (vm, vw))),
        Tower(tl, tw, context, ((tw, tw),) * 4 + ((tw, tm), (tm, tw))),
    )
    largest = max(vocab * tw, vw * vm, tw * tm, 3 * vw * vw)
    return ModelShape(name, image + words + 1, towers, vocab, largest, source=source)  # + the logit scale


# transformers' BlipConfig defaults, which Salesforce/blip-itm-base-coco keeps (ViT-B/16 at 384 px, BERT-base text)
BLIP_DEFAULTS = {
    "vision_config": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "image_size": 384,
        "patch_size": 16,
    },
    "text_config": {
        "vocab_size": 30524,
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "max_position_embeddings": 512,
        "encoder_hidden_size": 768,
    },
    "image_text_hidden_size": 256,
}
BLIP_TEXT_TOKENS = 35  # BLIP's retrieval prompts (codyra.blip.model)


def blip_shape(config: dict, name: str, source: str) -> ModelShape:
    """transformers' BlipForImageTextRetrieval (ViT image tower, BERT text tower with cross-attention to
    the image, ITM head) from its config, transformers' defaults filling what it leaves out."""
    vision = {**BLIP_DEFAULTS["vision_config"], **config.get("vision_config", {})}
    text = {**BLIP_DEFAULTS["text_config"], **config.get("text_config", {})}
    joint = config.get("image_text_hidden_size", BLIP_DEFAULTS["image_text_hidden_size"])
    vw, vm, vl = vision["hidden_size"], vision["intermediate_size"], vision["num_hidden_layers"]
    patch, grid = vision["patch_size"], (vision["image_size"] // vision["patch_size"]) ** 2 + 1
    vblock = 3 * vw * vw + 3 * vw + vw * vw + vw + 4 * vw + 2 * vw * vm + vm + vw
    image = 3 * patch * patch * vw + vw + vw + grid * vw + vl * vblock + 2 * vw
    tw, tm, tl, enc = (
        text["hidden_size"],
        text["intermediate_size"],
        text["num_hidden_layers"],
        text["encoder_hidden_size"],
    )
    attention = 4 * tw * tw + 4 * tw + 2 * tw  # q, k, v, output dense and its LayerNorm
    cross = 2 * tw * tw + 2 * tw + 2 * enc * tw + 2 * tw + 2 * tw  # q and output from text, k and v from the image
    tblock = attention + cross + tw * tm + tm + tm * tw + tw + 2 * tw
    vocab = text["vocab_size"]
    words = vocab * tw + text["max_position_embeddings"] * tw + 2 * tw + tl * tblock
    heads = vw * joint + joint + tw * joint + joint + tw * 2 + 2  # vision_proj, text_proj, itm_head
    towers = (
        Tower(vl, vw, grid, ((vw, vw),) * 4 + ((vw, vm), (vm, vw))),
        Tower(tl, tw, BLIP_TEXT_TOKENS, ((tw, tw),) * 6 + ((enc, tw),) * 2 + ((tw, tm), (tm, tw))),
    )
    return ModelShape(name, image + words + heads, towers, vocab, max(vocab * tw, vw * vm, tw * tm), source=source)


LLAMA_2_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32}
# The paper's backbones (Table 2's three causal LMs; the CLIP and BLIP of the image benchmarks), as their
# published configs state them: model.name -> (family, architecture).
PAPER_BACKBONES = {
    "meta-llama/Llama-2-7b-chat-hf": (
        "causal_lm",
        {**LLAMA_2_7B, "num_key_value_heads": 32, "vocab_size": 32000, "tie_word_embeddings": False},
    ),
    "google/gemma-2b-it": (
        "causal_lm",
        {
            "model_type": "gemma",
            "hidden_size": 2048,
            "intermediate_size": 16384,
            "num_hidden_layers": 18,
            "num_attention_heads": 8,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "vocab_size": 256000,
            "tie_word_embeddings": True,
        },
    ),
    "meta-llama/Llama-3.2-1B-Instruct": (
        "causal_lm",
        {
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "vocab_size": 128256,
            "tie_word_embeddings": True,
        },
    ),
    "Salesforce/blip-itm-base-coco": ("blip", {}),
}
READERS = {"causal_lm": lm_shape, "clip": open_clip_shape, "blip": blip_shape}


def model_shape(cfg: dict) -> ModelShape:
    """The shape of ``cfg``'s model (a validated config), from the first source this machine has."""
    family, name = cfg["model"]["family"], cfg["model"]["name"]
    found = _own_config(cfg)
    if found is not None:
        config, source = found
        return READERS[family](config, name, source)
    if name in PAPER_BACKBONES and PAPER_BACKBONES[name][0] == family:
        return READERS[family](PAPER_BACKBONES[name][1], name, "the paper's backbones (codyra.experiment.model_shapes)")
    raise ConfigError(
        f"config key model.name: no architecture of {name!r} ({family}) to estimate its jobs from: its config is "
        "not on this machine and it is not one of the paper's backbones "
        f"({', '.join(PAPER_BACKBONES)}). Fetch the model once (hf download {name} --cache-dir <cache>, then "
        "model.cache_dir) or point model.pretrained at its folder"
    )


def _own_config(cfg: dict) -> tuple[dict, str] | None:
    """(the model's configuration, where it was read) where this machine has it, else None."""
    family, name, pretrained = cfg["model"]["family"], cfg["model"]["name"], cfg["model"]["pretrained"]
    if family == "clip":  # model.pretrained holds weights (a tag or a file); the architecture is the name's
        folders = [PACKAGE / "mini" / "clip" / "model_configs", *_open_clip_config_folders()]
        return _first_file([folder / f"{name}.json" for folder in folders])
    if pretrained is not None:  # a local Hugging Face model folder
        return _first_file([Path(pretrained).expanduser() / "config.json"])
    packaged = _first_file([PACKAGE / "mini" / MINI_FOLDERS[family] / "model_configs" / f"{name}.json"])
    if packaged is not None:  # a mini's architecture, the vocabulary the mini TRACE trains
        config, source = packaged
        mini = cfg["llm"]["mini"] if family == "causal_lm" else None
        return ({**config, "vocab_size": mini["vocab_size"]} if mini else config), source
    local = _first_file([Path(name).expanduser() / "config.json"])
    if local is not None:
        return local
    from huggingface_hub import try_to_load_from_cache

    model = cfg["model"]
    cached = try_to_load_from_cache(name, "config.json", cache_dir=model["cache_dir"], revision=model.get("revision"))
    return _first_file([Path(cached)]) if isinstance(cached, str) else None


PACKAGE = Path(__file__).resolve().parents[1]  # src/codyra
MINI_FOLDERS = {"causal_lm": "trace", "blip": "blip"}


def _first_file(paths: list[Path]) -> tuple[dict, str] | None:
    for path in paths:
        if path.is_file():
            return json.loads(path.read_text()), str(path)
    return None


def _open_clip_config_folders() -> list[Path]:
    """open_clip's packaged model configs, found without importing open_clip (it imports torch)."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(next(iter(spec.submodule_search_locations))) / "model_configs"]
