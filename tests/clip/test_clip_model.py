"""Pretrained weights: open_clip tags resolve to safetensors files in the Hugging Face hub
cache, offline use on compute nodes, and the errors that say how to fetch them.

No test touches the network: sockets are blocked, and a tiny model config gets a fake
pretrained tag whose file the tests place in the hub cache layout themselves.
"""

from __future__ import annotations

import socket
import threading
import time

import huggingface_hub.utils._http
import open_clip
import pytest
import torch
from huggingface_hub import constants as hub_constants
from open_clip.model import QuickGELU
from safetensors.torch import save_file

from codyra.cli import main
from codyra.clip.model import (
    HubFile,
    WeightsUnavailableError,
    clip_tokenizer,
    create_clip,
    fetch_weights,
    hub_file,
    pretrained_file,
)

TINY = "codyra-mini"
TAG = "codyra_test"
REPO = "codyra-test/tiny-clip"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TAG_MEAN = (0.25, 0.5, 0.75)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access is blocked in tests")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture
def offline(monkeypatch):
    """What HF_HUB_OFFLINE=1 in a job's environment sets when huggingface_hub is imported."""
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)


@pytest.fixture
def online(monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def tiny_tag(monkeypatch):
    """A pretrained tag for the tiny config, published like open_clip's OpenAI weights
    (hub repo with the default file name, QuickGELU, its own normalisation)."""
    record = {"hf_hub": f"{REPO}/", "quick_gelu": True, "mean": TAG_MEAN, "std": (0.5, 0.5, 0.5)}
    monkeypatch.setitem(open_clip.pretrained._PRETRAINED, TINY, {TAG: record})


def cache_file(cache, filename="open_clip_model.safetensors"):
    """The path huggingface_hub keeps a downloaded file at (models--org--name/snapshots/commit)."""
    repo = cache / ("models--" + REPO.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    path = repo / "snapshots" / COMMIT / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def cache_tiny_weights(cache) -> dict:
    state = open_clip.create_model(TINY).state_dict()
    save_file({name: tensor.contiguous() for name, tensor in state.items()}, cache_file(cache))
    return state


def test_openai_vit_b_16_resolves_to_its_safetensors_file_on_the_hub():
    assert hub_file("ViT-B-16", "openai") == HubFile(
        "timm/vit_base_patch16_clip_224.openai", "open_clip_model.safetensors"
    )


def test_offline_with_an_empty_cache_fails_fast_naming_the_cache_and_the_fix(tmp_path, offline):
    started = time.monotonic()
    with pytest.raises(WeightsUnavailableError) as error:
        create_clip("ViT-B-16", "openai", cache_dir=str(tmp_path))
    assert time.monotonic() - started < 2  # no retries, no timeouts
    message = str(error.value)
    assert str(tmp_path) in message
    assert "timm/vit_base_patch16_clip_224.openai/open_clip_model.safetensors" in message
    assert "HF_HUB_OFFLINE=1" in message
    assert f"codyra fetch-weights --model ViT-B-16 --pretrained openai --cache-dir {tmp_path}" in message


def test_a_cached_file_loads_without_the_network(tmp_path, tiny_tag, online):
    state = cache_tiny_weights(tmp_path)
    bundle = create_clip(TINY, TAG, cache_dir=str(tmp_path))
    loaded = bundle.model.state_dict()
    assert all(torch.equal(loaded[name], tensor) for name, tensor in state.items())
    # the tag's record decides the activation and the normalisation, as for OpenAI's weights
    assert isinstance(bundle.model.visual.transformer.resblocks[0].mlp.gelu, QuickGELU)
    assert bundle.image.mean == TAG_MEAN


def test_a_cached_file_loads_offline(tmp_path, tiny_tag, offline):
    cache_tiny_weights(tmp_path)
    assert pretrained_file(TINY, TAG, str(tmp_path)) == cache_file(tmp_path)


def test_online_but_unreachable_hub_names_the_fix(tmp_path, tiny_tag, online, monkeypatch):
    # huggingface_hub retries a failed connection 5 times over about 23 s (HF_HUB_OFFLINE=1
    # on compute nodes avoids that); skip the waits here
    monkeypatch.setattr(huggingface_hub.utils._http.time, "sleep", lambda seconds: None)
    with pytest.raises(WeightsUnavailableError, match=f"could not download .*codyra fetch-weights --model {TINY}"):
        pretrained_file(TINY, TAG, str(tmp_path))


def test_a_corrupted_cached_file_says_delete_and_refetch(tmp_path, tiny_tag, offline):
    cache_file(tmp_path).write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="corrupted or truncated.*codyra fetch-weights"):
        create_clip(TINY, TAG, cache_dir=str(tmp_path))


def test_unknown_tag_lists_the_known_ones():
    with pytest.raises(ValueError, match="no pretrained tag 'nope' for 'ViT-B-16' \\(known: openai, "):
        create_clip("ViT-B-16", "nope")


def test_pickle_only_tags_are_refused(monkeypatch):
    monkeypatch.setitem(open_clip.pretrained._PRETRAINED, TINY, {TAG: {"url": "https://example.org/w.pt"}})
    with pytest.raises(WeightsUnavailableError, match="only as a pickled file .*safetensors"):
        create_clip(TINY, TAG)


def test_fetch_weights_returns_and_prints_where_the_weights_are(tmp_path, tiny_tag, offline, capsys):
    cache_tiny_weights(tmp_path)
    assert fetch_weights(TINY, TAG, str(tmp_path)) == cache_file(tmp_path)
    assert main(["fetch-weights", "--model", TINY, "--pretrained", TAG, "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{TINY} / {TAG} weights: {cache_file(tmp_path)}" in out
    assert f"model.cache_dir: {tmp_path}" in out and "HF_HUB_OFFLINE=1" in out


def test_fetch_weights_failure_is_a_one_line_cli_error(tmp_path, offline, capsys):
    args = ["fetch-weights", "--model", "ViT-B-16", "--pretrained", "openai", "--cache-dir", str(tmp_path)]
    assert main(args) == 2
    assert capsys.readouterr().err.startswith("codyra: error: ViT-B-16 weights 'openai'")


def test_a_bpe_tokenizer_is_built_once_and_gives_a_fresh_one_s_tokens_from_threads_at_once():
    shared = clip_tokenizer(TINY)
    assert type(shared) is open_clip.SimpleTokenizer and clip_tokenizer(TINY) is shared
    assert create_clip(TINY, None).tokenizer is shared
    captions = [
        f"a {colour} {shape} beside {n} dots." for colour in ("red", "teal") for shape in "ab" for n in range(40)
    ]
    expected = open_clip.get_tokenizer(TINY)(captions)
    results = [None] * 4

    def tokenize(i):
        results[i] = shared(captions)  # every thread encodes the same new words into the shared memo

    threads = [threading.Thread(target=tokenize, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(torch.equal(tokens, expected) for tokens in results)


def test_a_tokenizer_other_than_open_clip_s_bpe_one_is_built_for_each_model(monkeypatch):
    built = []

    def hugging_face_like(name):
        built.append(object())  # not a SimpleTokenizer: not safe to share between threads
        return built[-1]

    monkeypatch.setattr(open_clip, "get_tokenizer", hugging_face_like)
    first, second = clip_tokenizer("hf-tokenized"), clip_tokenizer("hf-tokenized")
    assert first is not second and built == [first, second]
