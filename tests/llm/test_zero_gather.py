"""ZeroBackend.gather holds at most ``gather_chunk`` elements on the device: the parameters' fp32
values are reduced onto rank 0 piece by piece (one process here; the ranks' real fragments are
exercised by test_llm_zero.py and test_trace_methods_zero.py, whose workers gather in small pieces)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from codyra.llm.deepspeed_backend import ZeroBackend

CHUNK = 7


def fragment_of(values: dict, start: int, numel: int):
    """A DeepSpeed ``_hp_mapping`` of this rank's fragment [start, start + numel) of a parameter whose
    fp32 masters / moments are ``values`` ({None or moment name: flat tensor})."""
    return SimpleNamespace(
        lp_fragment_address=SimpleNamespace(start=start, numel=numel),
        get_hp_fragment=lambda key=None: values[key][start : start + numel],
    )


def parameters():
    """(parameters with this rank's fragments, the full values this rank's fragments give, by key)."""
    shapes = [(5, 3), (4,), (10,), (0,), (2, 2)]
    owned = [(0, 15), None, (2, 5), None, (0, 4)]  # (start, numel) this rank holds; None: the other rank's
    params, expected = [], {None: [], "exp_avg": []}
    for k, (shape, fragment) in enumerate(zip(shapes, owned, strict=True)):
        numel = math.prod(shape)
        values = {None: torch.arange(numel, dtype=torch.float32) + 100 * k, "exp_avg": -torch.rand(numel)}
        p = torch.zeros(shape, dtype=torch.bfloat16)
        p._hp_mapping = None if fragment is None else fragment_of(values, *fragment)
        params.append(p)
        for key, full in values.items():
            mine = torch.zeros(numel)
            if fragment is not None:
                start, count = fragment
                mine[start : start + count] = full[start : start + count]
            expected[key].append(mine.view(shape))
    return params, expected


def backend(rank: int) -> ZeroBackend:
    zero = ZeroBackend.__new__(ZeroBackend)  # gather reads only these of a running backend
    zero.rank, zero.device, zero.gather_chunk = rank, torch.device("cpu"), CHUNK
    return zero


@pytest.fixture
def reduced(monkeypatch):
    """The sizes of the tensors reduced onto rank 0 (a world of one rank: the reduce keeps the values)."""
    sizes = []

    def reduce(tensor, dst):
        assert dst == 0
        sizes.append(tensor.numel())

    monkeypatch.setattr(torch.distributed, "reduce", reduce)
    return sizes


@pytest.mark.parametrize("key", [None, "exp_avg"])
def test_gather_reduces_at_most_a_chunk_at_a_time_onto_rank_0(reduced, key):
    params, expected = parameters()
    total = sum(p.numel() for p in params)  # 33: pieces of 7, 7, 7, 7, 5, the first parameter across two
    gathered = backend(0).gather(params, key)
    assert reduced == [CHUNK] * (total // CHUNK) + [total % CHUNK]
    assert all(g.dtype == torch.float32 and g.device.type == "cpu" for g in gathered)
    for got, want in zip(gathered, expected[key], strict=True):
        assert torch.equal(got, want)


def test_every_rank_joins_each_reduce_but_only_rank_0_keeps_the_values(reduced):
    params, _ = parameters()
    assert backend(1).gather(params) is None
    assert len(reduced) == 5  # the same collectives as rank 0's


def test_a_chunk_larger_than_the_parameters_is_one_reduce(reduced):
    params, expected = parameters()
    zero = backend(0)
    zero.gather_chunk = 1000
    gathered = zero.gather(params)
    assert reduced == [33]
    assert all(torch.equal(g, w) for g, w in zip(gathered, expected[None], strict=True))
