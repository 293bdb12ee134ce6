"""Batches and random streams as pure functions of (seed, task, step): what makes a resumed
job end bit-identical to an uninterrupted one, in every model family."""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from integer parts (stable across processes and platforms)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(2, np.uint64)[0] >> np.uint64(1))


class StepBatches(torch.utils.data.Sampler):
    """Batches of (index, aug_seed) keys for steps ``start..total-1``: epoch-wise permutations
    of the training set, each a pure function of (seed, task, epoch)."""

    def __init__(self, n: int, batch_size: int, seed: int, task: int, start: int, total: int):
        self.n, self.batch_size, self.seed, self.task, self.start, self.total = n, batch_size, seed, task, start, total
        self._perms: dict[int, list[int]] = {}

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch not in self._perms:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, self.task, epoch))
            self._perms = {epoch: torch.randperm(self.n, generator=gen).tolist()}
        return self._perms[epoch]

    def batch(self, step: int) -> list[tuple[int, int]]:
        keys = []
        for position in range(step * self.batch_size, (step + 1) * self.batch_size):
            epoch, offset = divmod(position, self.n)
            keys.append((int(self._permutation(epoch)[offset]), derive_seed(self.seed, self.task, position, 7)))
        return keys

    def __iter__(self):
        return (self.batch(step) for step in range(self.start, self.total))

    def __len__(self):
        return self.total - self.start
