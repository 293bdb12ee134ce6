"""The rehearsal's theta_0 stand-ins: each paper backbone's architecture at tiny width, written as the
real loaders read the real weights, loads through its family's theta_0 loader offline, verifies and runs."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants as hub_constants
from huggingface_hub.utils import filter_repo_objects

from codyra.errors import ConfigError, WeightsUnavailableError
from codyra.experiment.config import load_config, overlay, read_config_file
from codyra.family import family_of
from codyra.hub import FETCH_PATTERNS
from codyra.rehearsal.models import write_standin
from codyra.store.io import read_json
from codyra.store.paths import WEIGHTS_DIGEST, results_path

REPO = Path(__file__).resolve().parents[2]
PAPER = {  # a paper config per stand-in: (file, --set values)
    "clip": ("mtil_5shot.yaml", {}),
    "llama-2-7b-chat": ("trace.yaml", {"backbone": "llama-2-7b-chat"}),
    "llama-3.2-1b-instruct": ("trace.yaml", {"backbone": "llama-3.2-1b-instruct"}),
    "gemma-2b-it": ("trace.yaml", {"backbone": "gemma-2b-it"}),
    "blip": ("blip_xtail_16shot.yaml", {}),
}
LM_KINDS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def paper_raw(name: str, results: Path) -> dict:
    file, sets = PAPER[name]
    return {**read_config_file(REPO / "config" / file), **sets, "results": str(results)}


@pytest.fixture(scope="session")
def standin_world(tmp_path_factory):
    """name -> (the paper config as written, its stand-in), every stand-in written once."""
    root = tmp_path_factory.mktemp("standins")
    return {
        name: (raw, write_standin(load_config(copy.deepcopy(raw)), root / name))
        for name in PAPER
        for raw in [paper_raw(name, root / "results")]
    }


@pytest.fixture
def offline(monkeypatch):
    """The stand-ins' environment: HF_HUB_OFFLINE=1, as huggingface_hub reads it at import."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)


def rehearsed(standin_world, name: str, tmp_path, **model) -> dict:
    """The paper config with the stand-in's overrides (and ``model`` keys), its results under tmp_path."""
    raw, standin = standin_world[name]
    return load_config(
        overlay(raw, {**standin.overrides, "results": str(tmp_path), "model": {**standin.overrides["model"], **model}})
    )


def test_every_standin_asks_for_the_hub_offline_and_stays_small(standin_world):
    for _, standin in standin_world.values():
        assert standin.env == {"HF_HUB_OFFLINE": "1"}
        where = Path(standin.overrides["model"].get("cache_dir") or standin.overrides["model"]["pretrained"])
        files = [where] if where.is_file() else [f for f in where.rglob("*") if f.is_file()]
        assert sum(f.stat().st_size for f in files) < 5_000_000


def test_clip_standin_is_vit_b_16_at_tiny_width_loaded_from_its_checkpoint(standin_world, tmp_path, offline):
    import open_clip
    from open_clip.model import QuickGELU
    from open_clip.transformer import ResidualAttentionBlock

    cfg = rehearsed(standin_world, "clip", tmp_path)
    assert cfg["model"]["name"] == "ViT-B-16-standin" and cfg["model"]["pretrained"].endswith(".safetensors")
    bundle = family_of(cfg).pretrained(cfg)
    model = bundle.model
    real = open_clip.get_model_config("ViT-B-16")
    for tower in (model.visual.transformer, model.transformer):  # both towers, the real block type
        assert all(isinstance(block, ResidualAttentionBlock) for block in tower.resblocks)
        assert isinstance(tower.resblocks[0].attn, torch.nn.MultiheadAttention)
        assert tower.resblocks[0].attn.in_proj_weight is not None  # fused Q, K, V
        assert isinstance(tower.resblocks[0].mlp.gelu, QuickGELU)
    assert model.visual.conv1.kernel_size == (real["vision_cfg"]["patch_size"],) * 2
    assert len(model.visual.transformer.resblocks) == real["vision_cfg"]["layers"]  # DualPrompt names blocks
    assert len(model.transformer.resblocks) == 8  # DIKI prompts 8 text blocks (config/mtil_full.yaml)
    assert model.token_embedding.num_embeddings == real["text_cfg"]["vocab_size"]
    tokens = bundle.tokenizer(["a photo of a dog."])
    assert tokens.shape == (1, 32) and tokens[0, 0] == 49406  # the real BPE tokenizer (start token), 32 positions
    size = bundle.image.size
    with torch.no_grad():
        images, texts = model.encode_image(torch.zeros(2, 3, size, size)), model.encode_text(tokens)
    assert images.shape[1] == texts.shape[1] and torch.isfinite(images).all()
    assert list(read_json(results_path(cfg, WEIGHTS_DIGEST))) == [cfg["model"]["pretrained"]]  # verified, recorded


@pytest.mark.parametrize(
    "name, architecture, tied, key_value_heads",
    [
        ("llama-2-7b-chat", "LlamaForCausalLM", False, 4),  # MHA, untied
        ("llama-3.2-1b-instruct", "LlamaForCausalLM", True, 2),  # GQA, tied
        ("gemma-2b-it", "GemmaForCausalLM", True, 1),  # MQA, tied
    ],
)
def test_lm_standin_loads_by_its_hub_id_offline(
    standin_world, tmp_path, offline, name, architecture, tied, key_value_heads
):
    from codyra.llm.targets import lm_targets

    cfg = rehearsed(standin_world, name, tmp_path)
    repo = cfg["model"]["name"]
    assert "/" in repo and cfg["model"]["pretrained"] is None  # the hub id, read from the stand-in's cache
    bundle = family_of(cfg).pretrained(cfg)
    model, tokenizer = bundle.model, bundle.tokenizer
    assert type(model).__name__ == architecture and model.dtype == torch.float32
    assert (model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()) is tied
    assert (model.config.num_attention_heads, model.config.num_key_value_heads) == (4, key_value_heads)
    assert {t.kind for t in lm_targets(model)} == LM_KINDS  # the placement vocabulary's projections
    assert f"{repo}: model.safetensors" in read_json(results_path(cfg, WEIGHTS_DIGEST))

    prompt = "Stance: 我们支持这个 Answer:"  # TRACE's prompts hold Chinese (C-STANCE) and German text
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == prompt and tokenizer.unk_token_id not in ids
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[tokenizer.bos_token_id, *ids]])).logits
    assert logits.shape == (1, len(ids) + 1, len(tokenizer)) and torch.isfinite(logits).all()


def test_lm_standins_carry_their_backbones_distinctive_flags_and_tokens(standin_world, tmp_path, offline):
    loaded = {
        name: family_of(cfg).pretrained(cfg)
        for name in ("llama-2-7b-chat", "llama-3.2-1b-instruct", "gemma-2b-it")
        for cfg in [rehearsed(standin_world, name, tmp_path / name)]
    }
    llama2, llama3, gemma = (loaded[n] for n in ("llama-2-7b-chat", "llama-3.2-1b-instruct", "gemma-2b-it"))
    assert (llama2.tokenizer.bos_token, llama2.tokenizer.eos_token) == ("<s>", "</s>")
    assert llama2.tokenizer.pad_token == "</s>"  # the real one has none: TRACE pads with EOS
    assert llama2.model.config.rope_parameters["rope_type"] == "default"
    assert (llama3.tokenizer.bos_token, llama3.tokenizer.eos_token) == ("<|begin_of_text|>", "<|eot_id|>")
    assert llama3.model.config.rope_parameters["rope_type"] == "llama3"
    stops = llama3.model.generation_config.eos_token_id
    assert [llama3.tokenizer.convert_ids_to_tokens(i) for i in stops] == ["<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"]
    assert (gemma.tokenizer.bos_token, gemma.tokenizer.eos_token, gemma.tokenizer.pad_token) == (
        "<bos>",
        "<eos>",
        "<pad>",
    )
    assert gemma.model.config.hidden_act == "gelu_pytorch_tanh" and gemma.model.config.head_dim == 16
    assert "<start_of_turn>" in gemma.tokenizer.get_vocab()


def test_blip_standin_mirrors_the_hub_repository_weights_only_on_its_pull_request(standin_world, tmp_path, offline):
    from transformers import BlipForImageTextRetrieval

    cfg = rehearsed(standin_world, "blip", tmp_path)
    assert cfg["model"]["revision"] == "refs/pr/5"  # config/blip_xtail_16shot.yaml
    bundle = family_of(cfg).pretrained(cfg)
    assert isinstance(bundle.model, BlipForImageTextRetrieval)
    assert bundle.image.size == 32
    assert "Salesforce/blip-itm-base-coco@refs/pr/5: model.safetensors" in read_json(results_path(cfg, WEIGHTS_DIGEST))
    with torch.no_grad():
        images = bundle.model.encode_image(torch.zeros(2, 3, 32, 32))
        texts = bundle.model.encode_text(bundle.tokenizer(["a photo of a dog.", "a cat"]))
    assert images.shape == texts.shape == (2, 16)

    snapshot = Path(cfg["model"]["cache_dir"]) / "models--Salesforce--blip-itm-base-coco" / "snapshots"
    converted = tmp_path / "converted"  # a local folder of converted weights, as model.pretrained
    shutil.copytree(next(s for s in snapshot.iterdir() if (s / "model.safetensors").exists()), converted)
    local = rehearsed(standin_world, "blip", tmp_path / "local", pretrained=str(converted))
    assert family_of(local).pretrained(local).image.size == 32

    main = rehearsed(standin_world, "blip", tmp_path / "main", revision=None)
    with pytest.raises(WeightsUnavailableError, match=r"holds no safetensors weights.*set config key model\.revision"):
        family_of(main).pretrained(main)


def test_standin_files_are_those_a_fetch_brings(standin_world):
    for name in ("llama-2-7b-chat", "gemma-2b-it", "blip"):
        hub = Path(standin_world[name][1].overrides["model"]["cache_dir"])
        for snapshot in hub.glob("models--*/snapshots/*"):
            files = sorted(f.name for f in snapshot.iterdir())
            assert files == sorted(filter_repo_objects(files, allow_patterns=list(FETCH_PATTERNS))), name
            assert all(f.is_symlink() and f.resolve().parent.name == "blobs" for f in snapshot.iterdir())


def test_a_config_without_a_packaged_standin_is_refused(tmp_path):
    raw = {
        **paper_raw("gemma-2b-it", tmp_path),
        "backbone": "llama-2-7b-chat",
        "backbones": {"llama-2-7b-chat": "org/other"},
    }
    with pytest.raises(ConfigError, match="no packaged stand-in for 'org/other'.*known: google/gemma-2b-it"):
        write_standin(load_config(raw), tmp_path / "world")
    clip = load_config({**paper_raw("clip", tmp_path), "model": {"name": "ViT-L-14", "pretrained": "openai"}})
    with pytest.raises(ConfigError, match="no packaged stand-in for 'ViT-L-14'.*known: ViT-B-16"):
        write_standin(clip, tmp_path / "world")
