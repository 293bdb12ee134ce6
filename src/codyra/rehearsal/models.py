"""theta_0 stand-ins: for each paper backbone, a model of the same architecture at tiny width and
depth, written where and as the real loaders read the real one, so a rehearsal runs every loading,
verification, adaptation and evaluation path of the paper grid with only sizes shrunk.

- CLIP (``ViT-B-16``): open_clip's own model built from a packaged config beside the mini's
  (``codyra/mini/clip/model_configs/<name>-standin.json``): ViT-B-16's module structure (both towers of
  ``ResidualAttentionBlock`` with ``nn.MultiheadAttention``'s fused ``in_proj``; the image tower's real
  12 blocks, the text tower's 8, the most any paper method prompts (DIKI's), so options that name
  blocks, such as DualPrompt's 2 + 3 prefixed ones, hold), QuickGELU as the OpenAI
  weights use, the real BPE vocabulary, its 16 px patches; a tiny width (16 at least: InfLoRA designs
  as many down-projection directions as its rank, 16, from a matrix's input space), a 32 px image and 32 text
  positions (77 in ViT-B-16: a row's class prompts, hundreds of them with every template, take a
  fifth of the time, and the paper's prompts fit). Written as an open_clip safetensors checkpoint
  that ``model.pretrained`` points at.
- Causal LMs (config/trace.yaml's backbones): the real model class with the real config's
  distinctive flags (:data:`LM_STANDINS`) and a byte-level BPE tokenizer trained on the mini TRACE's
  prompts (every text is representable) whose special tokens carry the real tokenizer's names, in a
  Hugging Face hub cache under the world (``models--org--name/{blobs,refs,snapshots}``): ``model.name``
  stays the hub id, ``model.cache_dir`` points at that cache, and the jobs run with ``HF_HUB_OFFLINE=1``.
- BLIP (``Salesforce/blip-itm-base-coco``): a tiny ``BlipForImageTextRetrieval`` with a WordPiece
  tokenizer and a ``BlipImageProcessor`` at the stand-in's image size, in the hub cache laid out as the
  real repository is: ``main`` without safetensors weights, the pull request ``refs/pr/5`` with them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from codyra.errors import ConfigError
from codyra.family import family_of
from codyra.store.io import save_safetensors
from codyra.store.theta0 import file_sha256

# No stand-in is on the hub: a job that reached for the network would fail at once, as on compute nodes.
OFFLINE = {"HF_HUB_OFFLINE": "1"}
SEED = 0  # every stand-in's initialisation
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16}  # LMs, all backbones
LM_VOCAB_SIZE = 512  # byte-level BPE: 256 bytes, 4 special tokens, the rest merges of the mini TRACE's texts
TOKENIZER_EXAMPLES = 32  # examples per mini TRACE task the LM tokenizers are trained on


@dataclass(frozen=True)
class StandIn:
    overrides: dict  # nested config keys that point the real loaders at the stand-in
    env: dict[str, str]  # environment every job needs


@dataclass(frozen=True)
class LMStandIn:
    """A causal-LM backbone's stand-in, from the real repository's config.json, generation_config.json
    and tokenizer: its flags as they are, its sizes (:data:`TINY`, ``intermediate_size``) shrunk."""

    config: dict  # config.json: model_type and the flags that set the architecture
    tokens: dict  # the tokenizer's bos / eos / pad / unk token names (absent: the tokenizer has none)
    extra_tokens: tuple[str, ...]  # its other special tokens (chat format, stop tokens)
    stop: tuple[str, ...]  # generation_config.json eos_token_id: the tokens generation stops at
    generation: dict = field(default_factory=dict)  # generation_config.json's decoding defaults
    dtype: torch.dtype = torch.bfloat16  # config.json torch_dtype: the published weights'


LM_STANDINS = {
    # meta-llama/Llama-2-7b-chat-hf: LlamaForCausalLM, 32 heads = 32 key-value heads (MHA), untied
    # embeddings, no rope scaling; intermediate 11008 / hidden 4096; fp16 weights; no pad token
    "meta-llama/Llama-2-7b-chat-hf": LMStandIn(
        config={
            "model_type": "llama",
            **TINY,
            "num_key_value_heads": 4,
            "intermediate_size": 172,
            "hidden_act": "silu",
            "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
        },
        tokens={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        extra_tokens=(),
        stop=("</s>",),
        generation={"do_sample": True, "temperature": 0.6, "top_p": 0.9},
        dtype=torch.float16,
    ),
    # meta-llama/Llama-3.2-1B-Instruct: LlamaForCausalLM, 32 heads over 8 key-value heads (GQA), tied
    # embeddings, llama3 rope scaling (factor 32 of 8192 positions), rope_theta 500000; intermediate
    # 8192 / hidden 2048; bf16; Instruct's tokenizer ends a turn with <|eot_id|>, has no pad token
    "meta-llama/Llama-3.2-1B-Instruct": LMStandIn(
        config={
            "model_type": "llama",
            **TINY,
            "num_key_value_heads": 2,
            "intermediate_size": 256,
            "hidden_act": "silu",
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "factor": 32.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
            "tie_word_embeddings": True,
        },
        tokens={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        extra_tokens=("<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>"),
        stop=("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"),
        generation={"do_sample": True, "temperature": 0.6, "top_p": 0.9},
    ),
    # google/gemma-2b-it: GemmaForCausalLM, 8 heads of head_dim 256 over 1 key-value head (MQA), GeLU
    # activation, tied embeddings scaled by sqrt(hidden); intermediate 16384 / hidden 2048; bf16;
    # <bos>, <eos>, <pad>, <unk> and the chat turns' <start_of_turn>, <end_of_turn>
    "google/gemma-2b-it": LMStandIn(
        config={
            "model_type": "gemma",
            **TINY,
            "num_key_value_heads": 1,
            "intermediate_size": 512,
            "hidden_act": "gelu",  # as config.json has it: transformers reads it as the tanh approximation
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "tie_word_embeddings": True,
        },
        tokens={"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"},
        extra_tokens=("<start_of_turn>", "<end_of_turn>"),
        stop=("<eos>",),
    ),
}

# Salesforce/blip-itm-base-coco: BLIP ViT-B/16 at 384 px and a BERT-base text encoder (transformers'
# BlipConfig defaults); sizes shrunk, the image to 32 px (2 x 2 patches of 16)
BLIP_STANDINS = {
    "Salesforce/blip-itm-base-coco": {
        "vision_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 16,
        },
        "text_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "encoder_hidden_size": 32,
        },
        "image_text_hidden_size": 16,
        "projection_dim": 16,
    }
}
BLIP_WEIGHTS_REVISION = "refs/pr/5"  # the hub's safetensors conversion; main holds pickled weights only


def write_standin(cfg: dict, world: Path) -> StandIn:
    """Write theta_0's stand-in for the validated paper config ``cfg`` under ``world``; returns the
    config overrides that point the real loaders at it and the environment its jobs need."""
    writers = {"clip": write_clip, "causal_lm": write_lm, "blip": write_blip}
    world = Path(world).absolute()
    world.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)  # open_clip and transformers initialise from the global RNG
    return writers[family_of(cfg).name](cfg, world)


def unknown(cfg: dict, known) -> ConfigError:
    return ConfigError(
        f"config key model.name: no packaged stand-in for {cfg['model']['name']!r} (codyra.rehearsal.models); "
        f"known: {', '.join(sorted(known))}"
    )


def write_clip(cfg: dict, world: Path) -> StandIn:
    import open_clip

    from codyra.clip.model import MODEL_CONFIG_DIR  # registers the packaged configs with open_clip

    name = f"{cfg['model']['name']}-standin"
    if not (MODEL_CONFIG_DIR / f"{name}.json").is_file():
        raise unknown(cfg, (p.stem.removesuffix("-standin") for p in MODEL_CONFIG_DIR.glob("*-standin.json")))
    model = open_clip.create_model(name)
    path = world / "clip" / f"{name}.safetensors"
    save_safetensors(path, {key: t.contiguous() for key, t in model.state_dict().items()})
    return StandIn({"model": {"name": name, "pretrained": str(path)}}, OFFLINE)


def trace_texts() -> list[str]:
    """Prompts and answers of every mini TRACE task (the rehearsal's TRACE fixture data is its output)."""
    from codyra.mini.trace.tasks import MINI_TRACE_TASKS, generate_task

    sizes = {"train": TOKENIZER_EXAMPLES, "eval": 0, "test": 0}
    drawn = [e for task in MINI_TRACE_TASKS for e in generate_task(task, SEED, sizes)["train"]]
    return [text for e in drawn for text in (e.prompt, e.answer)]


def lm_tokenizer(spec: LMStandIn):
    """A byte-level BPE tokenizer (:func:`codyra.mini.trace.tokenizer.train_bpe_tokenizer`) with the real
    tokenizer's special tokens: those its vocabulary lacks are added as special tokens."""
    from tokenizers import AddedToken

    from codyra.llm.model import MODEL_BUILD_LOCK
    from codyra.mini.trace.tokenizer import train_bpe_tokenizer

    with MODEL_BUILD_LOCK:
        from transformers import PreTrainedTokenizerFast

    backend = train_bpe_tokenizer(trace_texts(), LM_VOCAB_SIZE).backend_tokenizer
    vocabulary = backend.get_vocab()
    names = [*spec.tokens.values(), *spec.extra_tokens]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in names if t not in vocabulary])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, **spec.tokens, extra_special_tokens=list(spec.extra_tokens)
    )


def write_lm(cfg: dict, world: Path) -> StandIn:
    from codyra.llm.model import MODEL_BUILD_LOCK

    with MODEL_BUILD_LOCK:
        import transformers

    repo_id = cfg["model"]["name"]
    spec = LM_STANDINS.get(repo_id)
    if spec is None:
        raise unknown(cfg, LM_STANDINS)
    tokenizer = lm_tokenizer(spec)
    stop = [tokenizer.convert_tokens_to_ids(t) for t in spec.stop]
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": stop if len(stop) > 1 else stop[0],
        "pad_token_id": tokenizer.pad_token_id,
    }
    with MODEL_BUILD_LOCK:
        config = transformers.AutoConfig.for_model(**spec.config, vocab_size=len(tokenizer), **ids)
        model = transformers.AutoModelForCausalLM.from_config(config)
        model.generation_config = transformers.GenerationConfig(**ids, **spec.generation)
    with tempfile.TemporaryDirectory(dir=world) as staging:
        model.to(spec.dtype).save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        publish(world / "hub", repo_id, {cfg["model"]["revision"] or "main": Path(staging)})
    return StandIn({"model": {"cache_dir": str(world / "hub"), "pretrained": None}}, OFFLINE)


def write_blip(cfg: dict, world: Path) -> StandIn:
    from codyra.llm.model import MODEL_BUILD_LOCK
    from codyra.mini.blip.pretrain import vocabulary

    with MODEL_BUILD_LOCK:
        from transformers import BertTokenizerFast, BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor

    repo_id = cfg["model"]["name"]
    architecture = BLIP_STANDINS.get(repo_id)
    if architecture is None:
        raise unknown(cfg, BLIP_STANDINS)
    vocab = vocabulary(["a photo of a"])  # BERT's special tokens ([PAD] = 0), then every letter and digit
    tokenizer = BertTokenizerFast(vocab={word: k for k, word in enumerate(vocab)})
    text = {
        **architecture["text_config"],
        "vocab_size": len(vocab),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.cls_token_id,
        "sep_token_id": tokenizer.sep_token_id,
    }
    size = architecture["vision_config"]["image_size"]
    with MODEL_BUILD_LOCK:
        model = BlipForImageTextRetrieval(BlipConfig(**{**architecture, "text_config": text}))
    with tempfile.TemporaryDirectory(dir=world) as staging:
        weights, main = Path(staging) / "weights", Path(staging) / "main"
        for part in (model, tokenizer, BlipImageProcessor(size={"height": size, "width": size})):
            part.save_pretrained(weights)
        shutil.copytree(weights, main, ignore=shutil.ignore_patterns("*.safetensors"))
        publish(world / "hub", repo_id, {"main": main, BLIP_WEIGHTS_REVISION: weights})
    return StandIn({"model": {"cache_dir": str(world / "hub"), "pretrained": None}}, OFFLINE)


def publish(cache: Path, repo_id: str, revisions: dict[str, Path]) -> None:
    """Lay out model folders as huggingface_hub's cache holds a repository: each file once in
    ``blobs/`` (named by its sha256), each revision a ``snapshots/<commit>/`` of links to them, and
    ``refs/<revision>`` naming that commit (a pull request ``refs/pr/5`` is ``refs/refs/pr/5``)."""
    from huggingface_hub.file_download import repo_folder_name

    repo = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    shutil.rmtree(repo, ignore_errors=True)
    (repo / "blobs").mkdir(parents=True)
    for revision, folder in revisions.items():
        digests = {f.name: file_sha256(f) for f in sorted(folder.iterdir())}
        commit = hashlib.sha1(json.dumps(digests, sort_keys=True).encode()).hexdigest()  # 40 hex digits, as git's
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        for name, digest in digests.items():
            blob = repo / "blobs" / digest
            if not blob.exists():
                shutil.copyfile(folder / name, blob)
            (snapshot / name).symlink_to(Path("..", "..", "blobs", digest))
        ref = repo / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
