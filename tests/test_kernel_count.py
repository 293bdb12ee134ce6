"""benchmarks/kernel_count.py counts what a step launches: eager operators one by one, and a step
replayed as CUDA graphs one launch per graph plus a copy per non-parameter input."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from .conftest import load_benchmark

pytestmark = pytest.mark.slow  # compiles (inductor's C++ kernels)


def test_a_graph_replay_is_one_launch_and_one_copy_per_input_it_takes_besides_parameters():
    count_kernels = load_benchmark("kernel_count").count_kernels
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 4)

    def loss(x, w):
        return (x @ w).relu().sum()

    compiled = torch.compile(loss)
    count_kernels(lambda: compiled(x, w).backward())  # compiles, with a profiler event per generated kernel
    eager = count_kernels(lambda: loss(x, w).backward())
    assert eager["aten::mm"] == 2  # x @ w, and the backward's g @ w.T (w takes no gradient)
    kernels = count_kernels(lambda: compiled(x, w).backward())
    assert any("cpp_fused_" in name for name in kernels) and "graph replay" not in kernels
    graphed = count_kernels(lambda: compiled(x, w).backward(), graph_inputs=2)
    # the forward graph and the backward graph; x and w copied into the forward's buffers, the
    # loss's gradient into the backward's
    assert (graphed["graph replay"], graphed["graph input copy"]) == (2, 3)
    inside = Counter({name: n for name, n in kernels.items() if "cpp_fused_" in name or name.startswith("aten::mm")})
    assert not (set(inside) & set(graphed))  # what a graph computes is not launched apart
