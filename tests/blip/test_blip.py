"""The BLIP family on a tiny random BLIP (no download): features and logits, placement, LoRA /
CoDyRA adapters and their merge, training and evaluation through the real loop, config errors."""

from __future__ import annotations

import copy
import string

import pytest
import torch

from codyra.errors import ConfigError
from codyra.experiment.config import load_config

WIDTH, MLP, LAYERS, RANK = 32, 64, 2, 4
TEMPERATURE = 0.05


def write_tiny_blip(folder):
    """A random BlipForImageTextRetrieval (2 layers per tower, width 32, 32 x 32 images in 8 x 8
    patches), its WordPiece tokenizer over single letters and the image processor, as a local model folder."""
    from transformers import BertTokenizerFast, BlipConfig, BlipImageProcessor

    from codyra.blip.model import BlipImageText

    folder.mkdir(parents=True, exist_ok=True)
    letters = string.ascii_lowercase
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{c}" for c in letters), ".", ","]
    BertTokenizerFast(vocab={word: i for i, word in enumerate(vocab)}).save_pretrained(folder)
    tower = {"hidden_size": WIDTH, "intermediate_size": MLP, "num_hidden_layers": LAYERS, "num_attention_heads": 4}
    config = BlipConfig(
        vision_config={**tower, "image_size": 32, "patch_size": 8},
        text_config={
            **tower,
            "vocab_size": len(vocab),
            "max_position_embeddings": 64,
            "encoder_hidden_size": WIDTH,
            "pad_token_id": 0,
            "bos_token_id": 2,
            "sep_token_id": 3,
        },
        image_text_hidden_size=16,
    )
    torch.manual_seed(0)
    model = BlipImageText(config)
    with torch.no_grad():  # weights of unit-variance outputs: transformers' 0.02 makes every prompt's feature alike
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
    model.save_pretrained(folder)
    BlipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_blip(tmp_path_factory):
    return write_tiny_blip(tmp_path_factory.mktemp("tiny-blip") / "model")


def blip_cfg(tmp_path, folder, **extra) -> dict:
    cfg = {
        "benchmark": "tiny-blip",
        "results": str(tmp_path / "results"),
        "seeds": [0],
        "methods": ["zeroshot", "lora-r4", "codyra"],
        "model": {"family": "blip", "name": "tiny-blip", "pretrained": str(folder)},
        "blip": {"temperature": TEMPERATURE},
        "data": {"kind": "mini", "label_space": "union"},
        "tasks": ["colour", "digits"],
        "train": {"iterations": 3, "batch_size": 8, "lr": 0.003, "checkpoint_every": 2},
        "eval": {"batch_size": 32},
        "method_configs": {
            "zeroshot": {"kind": "zeroshot"},
            "lora-r4": {"kind": "lora", "rank": RANK},
            "codyra": {"kind": "codyra", "rank": RANK, "dense_ratio": 0.5, "kappa_max": 0.05},
            "codyra-dagger": {"kind": "codyra_dagger", "rank": RANK, "dense_ratio": 0.5, "kappa_max": 0.05},
            "rail-primal": {"kind": "rail", "hidden_dim": 16, "prompts": "dataset"},
        },
        "mini": {"train_per_task": 16, "test_per_task": 10},
    }
    cfg.update(extra)
    return cfg


@pytest.fixture
def cfg(tmp_path, tiny_blip):
    return load_config(blip_cfg(tmp_path, tiny_blip))


def unit(x: torch.Tensor) -> torch.Tensor:
    """x / ||x|| row by row, written out."""
    return x / x.pow(2).sum(dim=-1, keepdim=True).sqrt()


def test_features_match_transformers_itc_head_and_the_session_logits_are_cosines_over_temperature(cfg):
    from codyra.blip.family import BLIP
    from codyra.experiment.resolve import resolve_job

    bundle = BLIP.pretrained(cfg)
    model = bundle.model
    assert bundle.image.size == 32 and model.logit_scale.exp().item() == pytest.approx(1 / TEMPERATURE)
    assert "logit_scale" not in model.state_dict()  # not a weight: never stored nor trained
    images = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    ids = bundle.tokenizer(["a red cat.", "two dogs", "x"])
    assert ids.shape[0] == 3 and (ids[2] == 0).any()  # the short prompt is padded
    with torch.no_grad():
        image, text = model.encode_image(images), model.encode_text(ids)
        # transformers' own ITC similarity of the same inputs (normalised projections of the [CLS] states)
        itc = model(input_ids=ids, pixel_values=images, use_itm_head=False, attention_mask=(ids != 0).long())
        alone = model.encode_text(bundle.tokenizer(["x"]))  # unpadded: the mask hides the padding
    torch.testing.assert_close(unit(image) @ unit(text).T, itc.itm_score, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(alone[0], text[2], atol=1e-5, rtol=1e-5)

    session = BLIP.fit_session(cfg, resolve_job(cfg, "lora-r4", 1), "lora-r4", 0, 1, "cpu")
    batch = next(iter(session.batches(0)))[0]
    with torch.no_grad():
        outputs = session.forward(session.model, batch)
        image = session.model.encode_image(batch["images"])
        text = session.model.encode_text(bundle.tokenizer(session.prompts))
    expected = (unit(image) @ unit(text).T) / TEMPERATURE
    torch.testing.assert_close(outputs["logits"], expected, atol=1e-5, rtol=1e-5)
    assert outputs["logits"].shape == (8, session.task.num_classes)
    assert (outputs["logits"].std(dim=-1) > 0.1).all()  # the class prompts' features differ


def test_targets_are_qkv_row_blocks_and_linears_of_both_towers_never_cross_attention(cfg):
    from codyra.adapters.targets import select_targets
    from codyra.blip.family import BLIP

    model = BLIP.pretrained(cfg).model
    targets = BLIP.targets(model)
    assert len(targets) == 2 * LAYERS * 6  # Q, K, V, O, FC, Proj per block, both towers
    layer0 = {(t.name, t.param, t.rows, t.tower, t.kind) for t in targets if ".0." in t.name}
    v, x = "vision_model.encoder.layers.0.", "text_encoder.encoder.layer.0."
    assert layer0 == {
        (f"{v}self_attn.qkv.q", f"{v}self_attn.qkv.weight", (0, WIDTH), "vision", "q"),
        (f"{v}self_attn.qkv.k", f"{v}self_attn.qkv.weight", (WIDTH, 2 * WIDTH), "vision", "k"),
        (f"{v}self_attn.qkv.v", f"{v}self_attn.qkv.weight", (2 * WIDTH, 3 * WIDTH), "vision", "v"),
        (f"{v}self_attn.projection", f"{v}self_attn.projection.weight", None, "vision", "o"),
        (f"{v}mlp.fc1", f"{v}mlp.fc1.weight", None, "vision", "fc"),
        (f"{v}mlp.fc2", f"{v}mlp.fc2.weight", None, "vision", "proj"),
        (f"{x}attention.self.query", f"{x}attention.self.query.weight", None, "text", "q"),
        (f"{x}attention.self.key", f"{x}attention.self.key.weight", None, "text", "k"),
        (f"{x}attention.self.value", f"{x}attention.self.value.weight", None, "text", "v"),
        (f"{x}attention.output.dense", f"{x}attention.output.dense.weight", None, "text", "o"),
        (f"{x}intermediate.dense", f"{x}intermediate.dense.weight", None, "text", "fc"),
        (f"{x}output.dense", f"{x}output.dense.weight", None, "text", "proj"),
    }
    assert any(".crossattention." in n for n in model.state_dict())  # present (ITM), never adapted
    assert not any("crossattention" in t.name or "itm_head" in t.name or "_proj" in t.name for t in targets)
    chosen = select_targets(targets, ["vision", "attn"], BLIP.vocabulary)
    assert {t.kind for t in chosen} == {"q", "k", "v", "o"} and len(chosen) == 4 * LAYERS
    assert len(select_targets(targets, ["text", "mlp"], BLIP.vocabulary)) == 2 * LAYERS


@pytest.mark.parametrize("kind", ["lora", "codyra"])
def test_lora_and_codyra_adapt_every_target_and_the_merge_reproduces_the_adapted_model(cfg, kind):
    from codyra.adapters.attach import LoRALinear, LoRARowBlockLinear
    from codyra.blip.family import BLIP
    from codyra.methods import build_method
    from codyra.methods.base import standalone_context
    from codyra.store.updates import apply_update

    bundle = BLIP.pretrained(cfg)
    model, fresh = bundle.model, copy.deepcopy(bundle.model)
    names = set(dict(model.named_parameters()))
    method = build_method({"kind": kind, "rank": RANK})
    method.setup(standalone_context(model, BLIP, torch.Generator().manual_seed(0), 0.0))
    fused = {n: m for n, m in model.named_modules() if isinstance(m, LoRARowBlockLinear)}
    plain = {n for n, m in model.named_modules() if type(m) is LoRALinear}
    assert set(fused) == {f"vision_model.encoder.layers.{i}.self_attn.qkv" for i in range(LAYERS)}
    assert all(m.rows == [(0, WIDTH), (WIDTH, 2 * WIDTH), (2 * WIDTH, 3 * WIDTH)] for m in fused.values())
    assert len(plain) == 2 * LAYERS * 6 - 3 * LAYERS and len(method.adapters) == 2 * LAYERS * 6
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for adapter in method.adapters.values():
            adapter.B.normal_(0, 0.5, generator=g)
        if method.gated:  # a pruned component is left out of the stored update
            next(iter(method.adapters.values())).w[0] = 0.0
    images = torch.randn(2, 3, 32, 32, generator=g)
    ids = bundle.tokenizer(["a red cat.", "two dogs"])

    def outputs(m):
        with torch.no_grad():
            return torch.cat([m.encode_image(images), m.encode_text(ids)])

    adapted, base = outputs(model), outputs(fresh)
    assert (adapted - base).abs().max() > 1e-3  # the adapters reach the features
    update, summary = method.finish(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    assert set(dict(model.named_parameters())) == names  # the backbone keeps its parameter names
    torch.testing.assert_close(outputs(model), adapted, atol=1e-5, rtol=1e-5)
    apply_update(fresh, update)  # the stored update on a fresh theta_0 is the same theta_1
    torch.testing.assert_close(outputs(fresh), adapted, atol=1e-5, rtol=1e-5)
    # rank 4 per block: Q, K, V, O 4 x (32 + 32); FC and Proj 4 x (32 + 64); 2 blocks x 2 towers
    factors = 2 * LAYERS * (4 * RANK * 2 * WIDTH + 2 * RANK * (WIDTH + MLP))
    assert summary["trainable_params"] == factors + (2 * LAYERS * 6 * RANK if method.gated else 0)
    assert summary["active_rank_total"] == 2 * LAYERS * 6 * RANK - (1 if method.gated else 0)


@pytest.mark.slow
def test_codyra_rail_and_the_dagger_train_and_evaluate_through_the_real_loop(tmp_path, tiny_blip):
    from codyra.blip.family import BLIP
    from codyra.evaluation.evaluate import evaluate_row
    from codyra.experiment.train_job import train_task

    cfg = load_config(blip_cfg(tmp_path, tiny_blip, methods=["zeroshot", "codyra", "codyra-dagger", "rail-primal"]))
    row0 = [c["accuracy"] for c in evaluate_row(cfg, "pretrained", None, 0)]
    summary = train_task(cfg, "codyra", 0, 1).summary
    assert summary["steps"] == 3 and set(summary["matrices"]) == {
        t.name for t in BLIP.targets(BLIP.pretrained(cfg).model)
    }
    train_task(cfg, "codyra", 0, 2)
    cells = evaluate_row(cfg, "codyra", 0, 2)
    assert [c["num_classes"] for c in cells] == [cells[0]["num_classes"]] * 2  # the union label space
    theta_0, theta_2 = BLIP.pretrained(cfg).model.state_dict(), BLIP.rebuild(cfg, "codyra", 0, 2).model.state_dict()
    changed = {n for n in theta_0 if not torch.equal(theta_0[n], theta_2[n])}
    assert changed == {t.param for t in BLIP.targets(BLIP.pretrained(cfg).model)}  # only the adapted matrices moved
    # the dagger trains as codyra; an unseen task is classified by theta_i, so its A[1, 2] is codyra's
    train_task(cfg, "codyra-dagger", 0, 1)
    dagger, plain = evaluate_row(cfg, "codyra-dagger", 0, 1), evaluate_row(cfg, "codyra", 0, 1)
    assert dagger[1]["accuracy"] == plain[1]["accuracy"] and "routing" in dagger[0]
    # RAIL fits on the frozen BLIP's image features and keeps the zero-shot prediction on the unseen task
    train_task(cfg, "rail-primal", 0, 1)
    rail = evaluate_row(cfg, "rail-primal", 0, 1)
    assert rail[1]["accuracy"] == row0[1] and rail[0]["routing"]["router"] == "zero_shot"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"methods": ["lwf"], "method_configs": {"lwf": {"kind": "lwf"}}}, "does not run on model family 'blip'"),
        (
            {"method_configs": {"lora-r4": {"kind": "lora", "placement": ["q_proj"]}}},
            "unknown placement token 'q_proj'",
        ),
        ({"data": {"kind": "trace"}}, "a blip model classifies images"),
        ({"heldout_tasks": ["shape"]}, "held-out evaluation runs CLIP models only"),
        ({"blip": {"temperature": 0}}, r"blip.temperature: 0 is less than or equal to the minimum of 0"),
        ({"train": {"gradient_accumulation": 2}}, "takes each batch in one pass"),
    ],
)
def test_config_validation_names_the_problem(tmp_path, change, message):
    raw = blip_cfg(tmp_path, tmp_path / "model")
    for key, value in change.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) and key != "data" else value
    with pytest.raises(ConfigError, match=message):
        load_config(raw)


def test_the_blip_table_holds_each_methods_means_over_tasks(tmp_path):
    from codyra.evaluation.tables import grid_layout, means_table, table_names

    raw = blip_cfg(tmp_path, tmp_path / "model", methods=["zeroshot", "codyra", "rail-primal"], seeds=[0, 1])
    cfg = load_config(raw)
    assert "blip" in table_names(cfg)
    # A[i][j]: rows i = 0 (pretrained), 1, 2; columns tasks 1, 2
    runs = {
        "zeroshot": [{"A": [[40, 50], [40, 50], [40, 50]]}] * 2,
        "codyra": [{"A": [[40, 50], [80, 54], [70, 90]]}, {"A": [[40, 50], [82, 52], [72, 88]]}],
        "rail-primal": [{"A": [[40, 50], [90, 50], [88, 94]]}] * 2,
    }
    table = means_table(cfg, runs, grid_layout(cfg))
    assert table.name == "blip" and table.columns == ["Transfer", "Average", "Last"]
    rows = {label: [s[0] for s in stats] for _, label, stats in table.stats()}
    # Transfer = A[1, 2]; Average = mean over tasks of the mean over rows 1..2; Last = mean of row 2
    assert rows["Zero-shot"] == [50.0, 45.0, 45.0]
    assert rows["CoDyRA"] == pytest.approx([53.0, ((75 + 72) + (77 + 70)) / 2 / 2, (80 + 80) / 2])
    assert rows["RAIL-Primal†"] == pytest.approx([50.0, (89 + 72) / 2, 91.0])  # the paper's dagger and groups
    assert table.groups["RAIL-Primal†"] == "Model complementation"


def test_a_blip_config_is_compared_with_the_papers_blip_table():
    from codyra.analysis.paper_metrics import metrics, paper_row, paper_setting

    cfg = load_config("config/blip_xtail_16shot.yaml")
    setting = paper_setting(cfg)
    assert (setting.benchmark, setting.why_not) == ("xtail-16shot-blip", None)
    found = {m.name: m for m in metrics(cfg, setting)}
    published = {
        (method, block): found[block].published(paper_row(cfg, method)[0]).mean
        for method in ("zeroshot", "codyra-dagger", "rail-primal")
        for block in ("Transfer", "Last")
    }
    assert published == {  # codyra.tex table tab:blip
        ("zeroshot", "Transfer"): 51.03,
        ("zeroshot", "Last"): 46.45,
        ("codyra-dagger", "Transfer"): 51.59,
        ("codyra-dagger", "Last"): 76.36,
        ("rail-primal", "Transfer"): 51.03,
        ("rail-primal", "Last"): 75.72,
    }
    clip = load_config("config/xtail_16shot.yaml")
    assert paper_setting(clip).benchmark == "xtail-16shot"  # a CLIP config keeps CLIP's tables


def test_blip_jobs_take_clips_rules_and_its_settings_enter_the_fingerprints(tmp_path):
    from codyra.experiment.fingerprints import train_fingerprint
    from codyra.experiment.jobs import eval_rule, job_group, train_rule
    from codyra.family import family_of

    cfg = load_config(blip_cfg(tmp_path, tmp_path / "model"))
    assert (train_rule(cfg), eval_rule(cfg), job_group(cfg)) == ("train_task", "eval_row", "run-{method}-seed{seed}")
    assert family_of(cfg).settings(cfg) == {"blip": {"temperature": TEMPERATURE, "max_text_len": 35}}
    hotter = load_config(blip_cfg(tmp_path, tmp_path / "model", blip={"temperature": 0.1}))
    assert train_fingerprint(cfg, "codyra", 1) != train_fingerprint(hotter, "codyra", 1)


def mini_blip_cfg(tmp_path) -> dict:
    """config/mini_blip.yaml with a pretraining of seconds (a 256-image corpus, 3 steps)."""
    cfg = load_config("config/mini_blip.yaml")
    cfg["results"] = str(tmp_path / "results")
    cfg["mini"].update(corpus_size=256, pretrain_steps=3, pretrain_batch_size=32, pretrain_threads=1)
    return cfg


def test_the_mini_blip_pretrains_its_own_theta0_deterministically_and_refuses_a_changed_one(tmp_path):
    from safetensors.torch import load_file, save_file

    from codyra.blip.model import pretrained_blip
    from codyra.experiment.pretraining import own_pretraining, pretrain_own
    from codyra.mini.blip.pretrain import SPECIAL_TOKENS, mini_texts
    from codyra.store.io import ResultError

    cfg = mini_blip_cfg(tmp_path)
    weights = own_pretraining(cfg)
    assert weights == f"{cfg['results']}/mini-blip/pretrain/model.safetensors"
    pretrain_own(cfg)
    bundle = pretrained_blip(cfg)  # the folder the pretraining wrote, checked against its digest
    assert bundle.image.size == 32 and bundle.model.logit_scale.exp().item() == pytest.approx(1 / 0.07)
    unknown = SPECIAL_TOKENS.index("[UNK]")
    assert not (bundle.tokenizer(mini_texts(cfg["mini"])) == unknown).any()  # every class prompt is in the vocabulary
    assert not (bundle.tokenizer(["a zebra-striped quokka."]) == unknown).any()  # other words: letter by letter
    # initialised to learn (codyra.mini.blip.pretrain.unit_variance_init): distinct prompts, distinct features;
    # position embeddings not at BLIP's default initializer_range of 1e-10
    with torch.no_grad():
        features = unit(bundle.model.encode_text(bundle.tokenizer(["a red shape.", "a handwritten seven."])))
    assert (features[0] @ features[1]).item() < 0.99  # 0.9999 at transformers' init
    assert bundle.model.vision_model.embeddings.position_embedding.std().item() > 0.01
    first = load_file(weights)
    again = copy.deepcopy(cfg)
    again["results"] = str(tmp_path / "again")
    pretrain_own(again)
    second = load_file(own_pretraining(again))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    shorter = copy.deepcopy(cfg)
    shorter["results"], shorter["mini"]["pretrain_steps"] = str(tmp_path / "shorter"), 1
    pretrain_own(shorter)
    assert not torch.equal(first["vision_proj.weight"], load_file(own_pretraining(shorter))["vision_proj.weight"])

    first["vision_proj.weight"][0, 0] += 1.0
    save_file(first, weights, metadata={"format": "pt"})
    with pytest.raises(ResultError, match="changed since its pretraining wrote it.*rerun the mini pretraining"):
        pretrained_blip(cfg)
