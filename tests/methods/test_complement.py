"""Model-complementation math: RAIL's closed forms, the domain routers, L2P / DualPrompt prompt
pools, against hand-computed values and direct solves."""

from __future__ import annotations

import pytest
import torch

from codyra.methods import _routing as routing
from codyra.methods._prompting import pools as prompts
from codyra.methods.rail import regression as rail


def _task(generator, n, dim, first_class, classes):
    x = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    y = torch.randint(first_class, first_class + classes, (n,), generator=generator)
    return x, y


def _batches(x, y, size):
    return [(x[s : s + size], y[s : s + size]) for s in range(0, len(x), size)]


def test_rail_primal_recursion_equals_the_joint_ridge_solution():
    g = torch.Generator().manual_seed(0)
    dim, gamma = 12, 0.1
    tasks = [_task(g, 40, dim, 0, 3), _task(g, 25, dim, 3, 4), _task(g, 31, dim, 7, 2)]
    ridge = rail.PrimalRidge(dim, gamma, dtype=torch.float64)
    seen_classes = 0
    for t, (x, y) in enumerate(tasks, 1):
        seen_classes = int(y.max()) + 1
        ridge.fit_task(_batches(x, y, 7), seen_classes)
        # the direct solve of ridge regression over every sample seen so far
        xs = torch.cat([a for a, _ in tasks[:t]])
        ys = torch.nn.functional.one_hot(torch.cat([b for _, b in tasks[:t]]), seen_classes).double()
        direct = torch.linalg.solve(xs.T @ xs + gamma * torch.eye(dim, dtype=torch.float64), xs.T @ ys)
        torch.testing.assert_close(ridge.W, direct, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(ridge.R, torch.linalg.inv(xs.T @ xs + gamma * torch.eye(dim, dtype=torch.float64)))
    # the stored state rebuilds the same regression
    again = rail.PrimalRidge.from_state(ridge.state(), gamma)
    torch.testing.assert_close(again.scores(tasks[0][0]), ridge.scores(tasks[0][0]))


def test_rail_primal_rejects_bad_input():
    with pytest.raises(ValueError, match="gamma must be positive"):
        rail.PrimalRidge(4, 0.0)
    ridge = rail.PrimalRidge(3, 0.1)
    with pytest.raises(ValueError, match="no training samples"):
        ridge.fit_task([], 2)
    with pytest.raises(ValueError, match="labels must lie in 0..1"):
        ridge.fit_task([(torch.ones(2, 3), torch.tensor([0, 2]))], 2)


def test_rail_dual_is_kernel_ridge_over_the_whole_memory():
    g = torch.Generator().manual_seed(1)
    (x1, y1), (x2, y2) = _task(g, 9, 5, 0, 2), _task(g, 7, 5, 2, 3)
    krr = rail.DualKernelRidge(gamma=0.1, lam=0.001, dtype=torch.float64)
    krr.fit_task(x1, y1, 2)
    krr.fit_task(x2, y2, 5)
    xs, ys = torch.cat([x1, x2]), torch.nn.functional.one_hot(torch.cat([y1, y2]), 5).double()
    # Gaussian kernel by its definition, entry by entry
    k = torch.tensor([[torch.exp(-0.1 * ((a - b) ** 2).sum()).item() for b in xs] for a in xs], dtype=torch.float64)
    alpha = torch.linalg.inv(k + 0.001 * torch.eye(len(xs), dtype=torch.float64)) @ ys
    probe = torch.randn(4, 5, generator=g, dtype=torch.float64)
    kp = torch.tensor([[torch.exp(-0.1 * ((a - b) ** 2).sum()).item() for b in xs] for a in probe], dtype=torch.float64)
    torch.testing.assert_close(krr.scores(probe), kp @ alpha)
    again = rail.DualKernelRidge.from_state(krr.state(), 0.1, 0.001)
    torch.testing.assert_close(again.scores(probe), krr.scores(probe))


def test_rail_expansion_is_relu_of_normalised_features():
    w = torch.tensor([[1.0, 0.0], [0.0, -1.0], [1.0, 1.0]])
    out = rail.expand(torch.tensor([[3.0, 4.0]]), w)
    torch.testing.assert_close(out, torch.tensor([[0.6, 0.0, 1.4]]))
    weight = rail.expansion_weight(16, 100, torch.Generator().manual_seed(0))
    assert weight.shape == (100, 16) and weight.abs().max() <= 0.25 and weight.abs().max() > 0.2


def test_rail_fusion_routes_only_learned_domain_predictions():
    # 2 learned classes, 3 classes in the label space; zero-shot argmax 0 (learned) and 2 (not)
    zs = torch.tensor([[2.0, 1.0, 0.0], [0.0, 1.0, 3.0]])
    adapter = torch.tensor([[0.1, 0.9], [0.7, 0.2]])
    fused, mask = rail.fuse(zs, adapter, fusion_weight=0.9)
    assert mask.tolist() == [True, False]
    p = zs.softmax(-1)
    torch.testing.assert_close(fused[0], 0.1 * p[0] + 0.9 * torch.tensor([0.1, 0.9, 0.0]))
    torch.testing.assert_close(fused[1], p[1])  # kept zero-shot: RAIL's Transfer is zero-shot's
    assert fused[0].argmax() == 1  # the adapter overrules the zero-shot class within the learned domain


def test_zero_shot_router_on_hand_made_features():
    # three domains with 2, 1, 3 classes; class embeddings on the axes of R^6
    classes = torch.eye(6)
    features = torch.tensor(
        [
            [0.9, 0.1, 0, 0, 0, 0],  # class 0 -> domain 0
            [0, 0.2, 0.8, 0, 0, 0],  # class 2 -> domain 1
            [0, 0, 0, 0, 0.1, 0.7],  # class 5 -> domain 2
            [0, 0.6, 0, 0.5, 0, 0],  # class 1 -> domain 0
        ]
    )
    domains = routing.zero_shot_domains(features @ classes.T, [2, 1, 3])
    assert domains.tolist() == [0, 1, 2, 0]
    # after learning 2 tasks, domain 2 stays with the zero-shot model
    routes = routing.route_learned(domains, learned=2)
    assert routes.tolist() == [0, 1, routing.ZERO_SHOT, 0]
    tally = routing.RoutingTally("zero_shot", true_domain=0, learned=2)
    tally.add(routes)
    summary = tally.to_json()
    assert summary["accuracy"] == 50.0 and summary["to_zero_shot"] == 25.0 and summary["samples"] == 4
    assert summary["routes"] == {"-1": 1, "0": 2, "1": 1}
    # a not-yet-learned task is routed correctly when it stays zero-shot
    unseen = routing.RoutingTally("zero_shot", true_domain=2, learned=2)
    unseen.add(routes)
    assert unseen.to_json()["accuracy"] == 25.0
    with pytest.raises(ValueError, match="label space 6"):
        routing.zero_shot_domains(torch.zeros(1, 5), [2, 1, 3])


def test_ddas_picks_the_best_reconstruction_or_zero_shot():
    assert routing.ddas_route(torch.tensor([0.30, 0.10, 0.20]), threshold=0.5) == 1
    assert routing.ddas_route(torch.tensor([0.30, 0.10, 0.10]), threshold=0.5) == 1  # first on ties
    assert routing.ddas_route(torch.tensor([0.70, 0.60]), threshold=0.5) == routing.ZERO_SHOT
    assert routing.ddas_route(torch.tensor([]), threshold=0.5) == routing.ZERO_SHOT
    # losses are the batch-mean squared reconstruction error of sigmoid inputs
    ae = routing.DomainAutoencoder(3, 2)
    feats = torch.randn(4, 3)
    inputs = torch.sigmoid(feats)
    expected = ((ae(inputs) - inputs) ** 2).mean()
    torch.testing.assert_close(routing.reconstruction_losses([ae], feats)[0], expected)


def test_l2p_key_query_selection_on_hand_made_embeddings():
    # pool of 4 prompts of 2 tokens in R^3; keys = token means
    pool = torch.tensor(
        [
            [[2.0, 0, 0], [0, 0, 0]],  # key (1, 0, 0)
            [[0, 2.0, 0], [0, 0, 0]],  # key (0, 1, 0)
            [[0, 0, 2.0], [0, 0, 0]],  # key (0, 0, 1)
            [[1.0, 1.0, 0], [1.0, 1.0, 0]],  # key (1, 1, 0)
        ]
    )
    keys = prompts.prompt_keys(pool)
    torch.testing.assert_close(keys[3], torch.tensor([1.0, 1.0, 0]))
    # sample 0's tokens average to (3, 1, 0); sample 1's to (0, 0.5, 1) -- padding rows count
    embeds = torch.tensor([[[6.0, 2.0, 0], [0, 0, 0]], [[0, 0, 0], [0, 1.0, 2.0]]])
    q = prompts.query(embeds, "mean")
    idx, pull = prompts.select(q, keys, top_k=2)
    # cosines: sample 0 -> key0 .949, key3 .894; sample 1 -> key2 .894, key1 .447
    assert idx.tolist() == [[0, 3], [2, 1]]
    s = 10**0.5
    expected = (3 / s + 4 / (s * 2**0.5) + 2 / 5**0.5 + 1 / 5**0.5) / 2
    torch.testing.assert_close(pull, torch.tensor(expected))
    prefix = prompts.l2p_prefix(pool, idx)
    assert prefix.shape == (2, 4, 3)
    torch.testing.assert_close(prefix[1], torch.cat([pool[2], pool[1]]))
    with pytest.raises(ValueError, match="top_k must be in 1..4"):
        prompts.select(q, keys, top_k=5)
    torch.testing.assert_close(prompts.query(embeds, "mean_max")[0], torch.tensor([6.0, 2.0, 0]) + 2 * q[0])


def test_prompt_placement_masks_and_labels():
    embeds, mask, labels = (
        torch.ones(2, 3, 4),
        torch.tensor([[0, 1, 1], [1, 1, 1]]),
        torch.tensor([[-100, -100, 5], [-100, 7, 8]]),
    )
    g, e = torch.full((2, 4), 2.0), torch.full((1, 4), 3.0)
    prefix = prompts.dualprompt_prefix(g, e, batch=2)
    assert prefix[:, :, 0].tolist() == [[3.0, 2.0, 2.0]] * 2  # [E; G]
    out, m, lab = prompts.prepend(prefix, embeds, mask, labels)
    assert out.shape == (2, 6, 4) and out[0, :, 0].tolist() == [3, 2, 2, 1, 1, 1]
    assert m.tolist() == [[1, 1, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1]]
    assert lab.tolist() == [[-100, -100, -100, -100, -100, 5], [-100, -100, -100, -100, 7, 8]]
    pool = prompts.random_token_prompts(
        torch.arange(12.0).view(4, 3), 5, 2, torch.Generator().manual_seed(0), scale=100
    )
    assert pool.shape == (5, 2, 3) and all(
        any(torch.allclose(row * 100, t) for t in torch.arange(12.0).view(4, 3)) for row in pool.view(-1, 3)
    )


def test_moe_top_k_gates_and_mixture_by_hand():
    from codyra.methods.moe_adapters import layer as moe

    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    w_gate = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])  # logits: [3, 1, 2] and [0, 5, 4]
    gates, load = moe.top_k_gates(x, w_gate, torch.zeros(2, 3), top_k=2)
    e = torch.exp(torch.tensor(1.0))
    expected = torch.tensor([[e / (e + 1), 0, 1 / (e + 1)], [0, e / (e + 1), 1 / (e + 1)]])
    torch.testing.assert_close(gates, expected)
    torch.testing.assert_close(load, torch.tensor([1.0, 1.0, 2.0]))
    # cv^2 of importance (0.731, 0.731, 0.538) and of load (1, 1, 2), times 1e-2
    imp = expected.sum(0)
    cv = lambda v: v.var() / v.mean() ** 2
    torch.testing.assert_close(moe.balance_loss(gates, load), 1e-2 * (cv(imp) + cv(torch.tensor([1.0, 1.0, 2.0]))))
    # experts: constant maps; sample 0 mixes experts 0 and 2, sample 1 experts 1 and 2
    experts = torch.nn.ModuleList([_Const(c) for c in (1.0, 10.0, 100.0)])
    out = moe.mixture(torch.zeros(2, 4, 2), gates, experts)
    torch.testing.assert_close(out[0, 0], torch.full((2,), float(expected[0, 0] * 1 + expected[0, 2] * 100)))
    torch.testing.assert_close(out[1, 3], torch.full((2,), float(expected[1, 1] * 10 + expected[1, 2] * 100)))
    with pytest.raises(ValueError, match="top_k must be in 1..3"):
        moe.top_k_gates(x, w_gate, torch.zeros(2, 3), top_k=4)


def test_moe_noisy_gating_load_is_the_probability_of_staying_in_the_top_k():
    from codyra.methods.moe_adapters import layer as moe

    x = torch.tensor([[1.0, 0.0]])
    w_gate, w_noise = torch.tensor([[2.0, 1.0, 0.0], [0, 0, 0]]), torch.zeros(2, 3)
    noise = torch.tensor([[0.0, 0.0, 0.0]])  # noisy logits = clean: thresholds 1 (2nd) and 0 (3rd)
    gates, load = moe.top_k_gates(x, w_gate, w_noise, top_k=2, noise=noise)
    std = torch.nn.functional.softplus(torch.tensor(0.0)) + 1e-2
    normal = torch.distributions.Normal(0.0, 1.0)
    # experts 0, 1 are in (compare with the 3rd value 0); expert 2 is out (compare with the 2nd value 1)
    expected = torch.stack([normal.cdf((2 - 0) / std), normal.cdf((1 - 0) / std), normal.cdf((0 - 1) / std)])
    torch.testing.assert_close(load, expected)
    assert gates[0, 2] == 0 and torch.isclose(gates.sum(), torch.tensor(1.0))
    adapter = moe.Adapter(8).eval()
    assert torch.count_nonzero(adapter(torch.randn(3, 8))) == 0  # the up projection starts at zero


class _Const(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return torch.full_like(x, self.c)


def test_ddas_lr_counts_epochs_over_the_whole_training_split_as_moe_adapters():
    """few_shot_AutoEncoder.py: exp_lr_scheduler(optimizer, int(iteration / num_batches), 0.003) with
    num_batches = len(dataset.train_loader), the full split's: Aircraft 3,334 images / 64 -> 53.
    So the lr stays 0.003 through the 301 steps (epoch <= 5 < 10), where counting the 8 five-shot
    batches (500 images) would reach epoch 30 by iteration 240: 0.003 x 0.1^3."""
    assert [routing.ddas_lr(t, 0.003, 10, 53) for t in (0, 240, 300, 529)] == [0.003] * 4
    assert routing.ddas_lr(530, 0.003, 10, 53) == pytest.approx(3e-4)  # epoch 10
    assert routing.ddas_lr(240, 0.003, 10, 8) == pytest.approx(3e-6)
    assert routing.ddas_lr(79, 0.003, 10, 8) == 0.003 and routing.ddas_lr(80, 0.003, 10, 8) == pytest.approx(3e-4)


class _Recording(routing.DomainAutoencoder):
    """Records which batch (its first feature, before the sigmoid) each forward sees."""

    def __init__(self):
        super().__init__(2, 2, generator=torch.Generator().manual_seed(0))
        self.seen = []

    def forward(self, x):
        self.seen.append(round(float(torch.logit(x[0, 0])), 3))
        return super().forward(x)


def test_ddas_batches_restart_at_every_split_epoch_and_when_exhausted():
    """The reference re-creates its few-shot iterator when iteration % num_batches == 0 (l.199)
    and when it runs out (l.205): batch (t % num_batches) % len(batches) at iteration t."""
    batches = [torch.full((2, 2), float(k)) for k in range(3)]
    ae = _Recording()
    routing.fit_autoencoder(ae, batches, iterations=12, lr=0.01, weight_decay=0.0, decay_epochs=10, epoch_batches=5)
    assert ae.seen[:12] == [0, 1, 2, 0, 1, 0, 1, 2, 0, 1, 0, 1]
    ae = _Recording()
    routing.fit_autoencoder(
        ae, batches, iterations=5, lr=0.01, weight_decay=0.0, decay_epochs=10
    )  # epochs of its own batches
    assert ae.seen[:5] == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError, match="at least one batch"):
        routing.fit_autoencoder(ae, batches, iterations=1, lr=0.01, weight_decay=0.0, decay_epochs=10, epoch_batches=0)


def test_moe_experts_start_from_the_jobs_generator_not_the_global_rng():
    """Task 1's experts are a function of the job's generator alone: the global RNG's state depends on
    whatever ran before in the process (jobs run as threads of one Snakemake process)."""
    from codyra.methods.moe_adapters.layer import Adapter

    def experts(seed: int, global_seed: int) -> torch.Tensor:
        torch.manual_seed(global_seed)
        return Adapter(8, 4, generator=torch.Generator().manual_seed(seed)).down_proj.weight.detach().clone()

    assert torch.equal(experts(0, global_seed=1), experts(0, global_seed=2))
    assert not torch.equal(experts(0, global_seed=1), experts(1, global_seed=1))
