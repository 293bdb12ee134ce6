"""L2P and DualPrompt on CLIP's image encoder, and DIKI: their defining computations against
values worked out by hand on tiny tensors, their errors, and a run of each on the tiny mini
benchmark through the command line (training, the family's or the routed cells)."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from codyra.cli import main
from codyra.experiment.config import ConfigError, load_config
from codyra.methods._prompting import pools
from codyra.methods._prompting.clip import Plan, PrefixAttention, PromptedImages, prefixed_attention
from codyra.methods.diki import clip as diki
from codyra.methods.dualprompt import clip as dualprompt
from codyra.methods.dualprompt.clip import DualPromptPrefixes
from codyra.methods.l2p.clip import ImagePromptPool
from codyra.store.paths import HISTORY_FILE, SUMMARY_FILE, cell_path, task_dir

from ..conftest import write_yaml

# the tiny mini CLIP has 2 blocks per tower and 64-d embeddings: the references' layer counts scaled down
SPECS = {
    "l2p": {"kind": "l2p", "pool_size": 4, "length": 2, "top_k": 2, "pull_coeff": 1.0, "vote_group": 4},
    "dualprompt": {
        "kind": "dualprompt",
        "g_length": 2,
        "e_length": 2,
        "pool_size": 3,
        "g_layers": 1,
        "e_layers": 1,
        "vote_group": 4,
    },
    "diki": {
        "kind": "diki",
        "vision_depth": 2,
        "text_depth": 1,
        "vision_length": 2,
        "text_length": 2,
        "eval_batch_size": 16,
        "weight_scale": 64.0,
    },
}


def test_batchwise_vote_takes_each_group_s_most_chosen_prompts_lower_index_on_ties():
    idx = torch.tensor([[0, 1], [1, 2], [1, 0], [3, 2]])
    # group 1: prompt 1 twice, 0 and 2 once each -> [1, 0]; group 2: all once -> [0, 1]
    assert pools.vote(idx, 4, 2).tolist() == [[1, 0], [1, 0], [0, 1], [0, 1]]
    assert pools.vote(idx, 4, 4).tolist() == [[1, 0]] * 4  # 1: 3 times, 0 and 2: twice, 3: once
    assert pools.vote(idx, 4, None) is idx


def test_l2p_key_query_top_k_prepends_the_chosen_prompts_in_rank_order():
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    prompts = torch.arange(3 * 1 * 2, dtype=torch.float32).view(3, 1, 2)  # prompt k = [[2k, 2k + 1]]
    pool = ImagePromptPool(prompts, keys, top_k=2, vote_group=None)
    plan = pool(torch.tensor([[2.0, 1.0]]))
    # cosines of (2, 1): key 0 2/sqrt(5) = 0.894, key 1 1/sqrt(5) = 0.447, key 2 3/sqrt(10) = 0.949
    assert plan.inputs.tolist() == [[[4.0, 5.0], [0.0, 1.0]]]  # prompts 2 then 0
    assert pool.pull.item() == pytest.approx(3 / math.sqrt(10) + 2 / math.sqrt(5))
    assert plan.prefixes == {}


def _tiny_clip():
    from codyra.clip.model import build_clip  # registers the mini's model config

    torch.manual_seed(0)
    return build_clip("codyra-mini", None, {}).model  # random weights: the computations, not accuracy


def test_l2p_prompts_go_in_front_of_the_encoder_tokens_and_their_outputs_mean_is_the_feature():
    model = _tiny_clip()
    images = torch.randn(3, 3, 32, 32)
    prompts = torch.randn(3, 4, model.visual.transformer.width)
    seen = {}
    model.visual.transformer.resblocks[0].register_forward_pre_hook(
        lambda m, a: seen.setdefault("inputs", []).append(a[0])
    )
    model.visual.transformer.register_forward_hook(lambda m, a, out: seen.setdefault("outputs", []).append(out))

    class Fixed(nn.Module):
        def forward(self, query):
            seen["query"] = query
            return Plan(inputs=prompts)

    with torch.no_grad():
        plain = model.encode_image(images)
        attached = PromptedImages(model, Fixed(), pool="prompt")
        feature = model.encode_image(images)
        attached.remove()
        again = model.encode_image(images)
    tokens, query_tokens, prompted, _ = seen["inputs"]  # unprompted; with prompts: the query's, the prompted one
    assert torch.equal(query_tokens, tokens)
    assert torch.equal(seen["query"], plain)  # the query is the frozen encoder's image embedding
    assert prompted.shape == (3, 4 + tokens.shape[1], tokens.shape[2])
    assert torch.equal(prompted[:, :4], prompts) and torch.equal(prompted[:, 4:], tokens)
    out = seen["outputs"][2]  # the prompted transformer's output, before the pooling hook
    expected = model.visual.ln_post(out[:, :4]).mean(dim=1) @ model.visual.proj  # normalised, then averaged
    assert torch.allclose(feature, expected, atol=1e-6)
    assert torch.equal(again, plain) and not hasattr(model.visual, PromptedImages.NAME)  # removed: the model as it was


def _identity_attention(width: int = 2) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(width, 1, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(width)] * 3))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(width))
        mha.out_proj.bias.zero_()
    return mha


def test_prefix_tuning_attends_over_the_prefix_and_the_tokens_in_one_softmax():
    mha = _identity_attention()
    x = torch.tensor([[[1.0, 0.0]]])  # one token: q = k = v = (1, 0)
    pk, pv = torch.tensor([[[0.0, 0.0]]]), torch.tensor([[[0.0, 2.0]]])
    out = prefixed_attention(mha, x, pk, pv, "concat")
    # scores (q . pk, q . k) / sqrt(2) = (0, 0.707): softmax weights a = 1 / (1 + e^0.707) on the prefix
    a = 1 / (1 + math.exp(1 / math.sqrt(2)))
    assert out.squeeze().tolist() == pytest.approx([1 - a, 2 * a])


def test_residual_prefix_adds_weight_times_its_own_attention_and_keeps_the_frozen_output():
    mha = _identity_attention()
    x = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    frozen = mha(x, x, x, need_weights=False)[0]
    attention = PrefixAttention(mha, "residual")
    attention.prefix = (torch.tensor([[0.5, -1.0]]), torch.tensor([[0.0, 3.0]]))  # one prefix token for every sample
    attention.weight = torch.tensor([0.5, 0.25])
    out = attention(x, x, x)[0]
    # one prefix token: its attention is its value (0, 3), times each sample's weight, through the identity output
    assert torch.allclose(out, frozen + torch.tensor([[[0.0, 1.5]], [[0.0, 0.75]]]), atol=1e-6)
    attention.prefix = (torch.tensor([[0.5, -1.0]]), torch.zeros(1, 2))  # DIKI's values start at zero
    assert torch.allclose(attention(x, x, x)[0], frozen, atol=1e-6)


def test_dualprompt_trains_its_task_s_e_prefix_and_infers_one_by_key_query():
    g = torch.zeros(1, 2, 1, 2)
    e = torch.arange(1 * 2 * 3 * 1 * 2, dtype=torch.float32).view(1, 2, 3, 1, 2)  # 3 E-prefixes
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    query = torch.tensor([[0.1, 1.0], [1.0, 0.2], [0.0, 2.0]])  # best keys: 1, 0, 1
    inferred = DualPromptPrefixes(g, e, keys, vote_group=3)(query)
    assert set(inferred.prefixes) == {0, 1}  # G in block 0, E in block 1
    assert inferred.prefixes[0][0].shape == (3, 1, 2)
    assert inferred.prefixes[1][0].tolist() == [[e[0, 0, 1, 0].tolist()]] * 3  # the group's vote: E-prefix 1
    assert inferred.prefixes[1][1].tolist() == [[e[0, 1, 1, 0].tolist()]] * 3  # its values
    trained = DualPromptPrefixes(g, e, keys, vote_group=3, task=2)
    plan = trained(query)
    assert plan.prefixes[1][0].tolist() == [[e[0, 0, 2, 0].tolist()]] * 3  # the training task's, whatever matches
    # pull: cos(key 2, each query) = -0.1/|q0|, -1/|q1|, 0
    expected = (-0.1 / math.hypot(0.1, 1.0) - 1.0 / math.hypot(1.0, 0.2)) / 3
    assert trained.pull.item() == pytest.approx(expected)


def test_dualprompt_task_t_starts_from_task_t_minus_1_s_trained_e_prefix_as_its_shared_pool():
    """google-research/l2p train_continual.py with cifar100_dualprompt.py's shared_prompt_pool (top_k 1):
    before task t trains, E-prefix t is set to E-prefix t-1; keys only with shared_prompt_key."""
    e = torch.arange(1 * 2 * 3 * 1 * 2, dtype=torch.float32).view(1, 2, 3, 1, 2)  # 3 entries
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    carried, same_keys = dualprompt.transfer_previous(e, keys, 2, prompts=True, keys=False)
    assert carried[:, :, 2].tolist() == e[:, :, 1].tolist() and carried[:, :, :2].tolist() == e[:, :, :2].tolist()
    assert same_keys is keys and e[0, 0, 2].tolist() == [[4.0, 5.0]]  # the input is not edited
    _, shared = dualprompt.transfer_previous(e, keys, 1, prompts=False, keys=True)
    assert shared.tolist() == [[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]
    for t in (0, 3):  # the first task has no predecessor; a task beyond the pool selects, nothing is copied
        assert dualprompt.transfer_previous(e, keys, t, prompts=True, keys=True) == (e, keys)

    model = _tiny_clip()
    options = SimpleNamespace(g_layers=1, e_layers=1, g_length=2, e_length=2, pool_size=3, vote_group=None)
    width, embed = model.visual.transformer.width, model.visual.output_dim
    stored = {  # task 1's stored state: entry 0 trained to 5, the others at their initialisation 0
        "g_prefix": torch.zeros(1, 2, 2, width),
        "e_prefix": torch.zeros(1, 2, 3, 2, width).index_fill_(2, torch.tensor([0]), 5.0),
        "e_keys": torch.zeros(3, embed).index_fill_(0, torch.tensor([0]), 7.0),
        "selection": torch.tensor([0]),
    }
    for shared_pool, start in ((True, 5.0), (False, 0.0)):
        method = SimpleNamespace(
            options=SimpleNamespace(**vars(options), shared_prompt_pool=shared_pool, shared_prompt_key=False)
        )
        ctx = SimpleNamespace(
            model=model,
            previous_state=stored,
            task_index=2,
            device=torch.device("cpu"),
            generator=torch.Generator().manual_seed(0),
            weight_decay=0.0,
        )
        dualprompt.setup(method, ctx)
        method.attached.remove()
        assert method.pool.task == 1  # task 2 trains entry 1 ...
        assert set(method.pool.e[:, :, 1].flatten().tolist()) == {start}  # ... from task 1's entry 0 when shared
        assert set(method.pool.key[1].tolist()) == {0.0}  # its key its own (shared_prompt_key false)


def test_diki_gaussian_likelihood_and_calibration_weight_by_hand():
    mean, cov = diki.fit_gaussian(torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]]), eps=0.0)
    assert mean.tolist() == pytest.approx([2 / 3, 2 / 3])
    # deviations (-2/3, -2/3), (4/3, -2/3), (-2/3, 4/3): sums of products / (3 - 1)
    assert cov.tolist() == [pytest.approx([4 / 3, -2 / 3]), pytest.approx([-2 / 3, 4 / 3])]
    x = torch.tensor([[1.0, 2.0]])
    log_probs = diki.gaussian_log_probs(x, torch.zeros(1, 2), torch.eye(2).unsqueeze(0))
    assert log_probs.item() == pytest.approx(-math.log(2 * math.pi) - 0.5 * 5)  # N(0, I) in 2-D, |x|^2 = 5
    options = SimpleNamespace(weight_scale=2.0, weight_shift=1.0, batchwise=False)
    routes, weights = diki.calibrated_routes(torch.tensor([[-1.0, 3.0], [5.0, 0.0], [2.0, 4.0]]), options)
    assert routes.tolist() == [1, 0, 1]
    sigmoid = [1 / (1 + math.exp(-v)) for v in (3 / 2 - 1, 5 / 2 - 1, 4 / 2 - 1)]
    assert weights.tolist() == pytest.approx(sigmoid)
    batchwise, _ = diki.calibrated_routes(
        torch.tensor([[-1.0, 3.0], [5.0, 0.0], [2.0, 4.0]]), SimpleNamespace(**{**vars(options), "batchwise": True})
    )
    assert batchwise.tolist() == [1, 1, 1]  # the batch's most frequent best task


@pytest.mark.parametrize(
    "method, change, message",
    [
        ("l2p", {"top_k": 5}, r"l2p: top_k: must be <= pool_size \(4\), got 5"),
        ("dualprompt", {"vote_group": 0}, "dualprompt.vote_group: must be >= 1"),
        ("diki", {"vision_depth": 0}, "diki.vision_depth: must be >= 1"),
        ("diki", {"weight_scale": 0.0}, "diki.weight_scale: must be > 0"),
    ],
)
def test_bad_options_are_refused_at_config_validation(tiny_cfg_dict, method, change, message):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"][method] = {**SPECS[method], **change}
    cfg["methods"] = [*cfg["methods"], method]
    with pytest.raises(ConfigError, match=f"config key method_configs.{message}"):
        load_config(cfg)


def test_prompted_blocks_beyond_the_model_are_refused():
    model = _tiny_clip()
    options = SimpleNamespace(vision_depth=3, text_depth=2, vision_length=2, text_length=2)
    with pytest.raises(ValueError, match="vision_depth 3 exceeds the vision tower's 2 blocks"):
        diki.attach_training(model, options, torch.Generator().manual_seed(0), torch.device("cpu"))


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(SPECS))
def test_each_runs_through_the_loop_and_the_evaluation(tmp_path, tiny_cfg_dict, tiny_pretrained, method):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["model"]["pretrained"] = str(tiny_pretrained)
    cfg["methods"] = ["zeroshot", method]
    cfg["method_configs"][method] = {**SPECS[method], "train": {"weight_decay": 0.0}}
    if method in ("l2p", "dualprompt"):
        cfg["method_configs"][method]["train"].update(lr=0.03, lr_reference_batch=256, lr_schedule="constant")
    path = write_yaml(tmp_path / "cfg.yaml", cfg)
    for task in ("1", "2"):
        assert main(["train", "--config", path, "--method", method, "--seed", "0", "--task", task]) == 0
    for j in ("1", "3"):  # a learned task and one not yet learned
        assert main(["cell", "--config", path, "--method", method, "--seed", "0", "--i", "2", "--j", j]) == 0
    summary = json.loads((task_dir(cfg, method, 0, 2) / SUMMARY_FILE).read_text())
    assert summary["update_kind"] == "none" and summary["steps"] == 6 and summary["trainable_params"] > 0
    cells = [json.loads(cell_path(cfg, method, 0, 2, j).read_text()) for j in (1, 3)]
    assert all(0.0 <= c["accuracy"] <= 100.0 and c["num_samples"] == 40 for c in cells)
    if method in ("l2p", "dualprompt"):  # the reference's lr for a batch of 256, at this run's batch of 16
        history = (task_dir(cfg, method, 0, 2) / HISTORY_FILE).read_text().splitlines()
        assert {json.loads(line)["lr"] for line in history} == {0.03 * 16 / 256}
    if method == "diki":  # calibrated inference: every image goes to one of the 2 learned tasks' prefixes
        assert [sum(c["routing"]["routes"].values()) for c in cells] == [40, 40]
        assert set().union(*(c["routing"]["routes"] for c in cells)) <= {"0", "1"}
