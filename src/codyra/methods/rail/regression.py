"""RAIL's analytic (closed-form, no backprop) regression adapters on frozen CLIP image features.

Facts from linghan1997/Regression-based-Analytic-Incremental-Learning (``primal_RAIL.py``,
``dual_RAIL.py``, ``utils.py``, ``configs/analytic_clip.yaml``):

- Features: the frozen encoder's image embedding, L2-normalised.
- RAIL-Primal: a random, frozen expansion ``ReLU(x W_e^T)`` (an ``nn.Linear(512, 15000,
  bias=False)`` at its default init, i.e. U(-1/sqrt(d), 1/sqrt(d))), then ridge regression
  onto one-hot labels over every class seen so far. Task 1 solves it directly,
  R = (X^T X + gamma I)^-1, W = R X^T Y; later tasks pad W with zero columns for the new
  classes and update per batch by recursive least squares,
  R <- R - R X^T (I + X R X^T)^-1 X R,  W <- W + R X^T (Y - X W),
  which equals the joint ridge solution over all data seen so far (the point of RAIL:
  no forgetting of the regression, no stored samples).
- RAIL-Dual: kernel ridge regression with a Gaussian kernel exp(-gamma ||x - x'||^2)
  (gamma 0.1, lambda 0.001) over the stored features of every sample seen so far.
- Zero-shot domain fusion: the zero-shot softmax over the classes of every domain decides;
  a sample whose zero-shot argmax lies in an already learned domain gets
  (1 - w) softmax + w adapter scores (w = 0.9; adapter scores zero-padded to every class),
  every other sample keeps the zero-shot softmax. So RAIL's Transfer equals zero-shot.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def expansion_weight(feature_dim: int, hidden_dim: int, generator: torch.Generator) -> torch.Tensor:
    """(hidden_dim, feature_dim): the distribution of ``nn.Linear``'s default init (RAIL keeps it frozen)."""
    bound = 1.0 / feature_dim**0.5
    return (torch.rand(hidden_dim, feature_dim, generator=generator) * 2 - 1) * bound


def expand(features: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """RAIL-Primal's feature expansion ReLU(x W^T) of L2-normalised features (none when weight is None)."""
    features = F.normalize(features, dim=-1)
    return features if weight is None else torch.relu(features @ weight.T.to(features.dtype))


def one_hot(labels: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError(f"labels must lie in 0..{num_classes - 1}, got {int(labels.min())}..{int(labels.max())}")
    return F.one_hot(labels.long(), num_classes).to(dtype)


class PrimalRidge:
    """RAIL-Primal's regression: ridge over all data seen, task 1 direct, later tasks by RLS."""

    def __init__(self, dim: int, gamma: float, dtype: torch.dtype = torch.float32):
        if gamma <= 0:
            raise ValueError(f"the ridge regularisation gamma must be positive, got {gamma}")
        self.dim, self.gamma, self.dtype = dim, gamma, dtype
        self.R: torch.Tensor | None = None  # (dim, dim) inverse regularised autocorrelation
        self.W = torch.zeros(dim, 0, dtype=dtype)  # (dim, classes seen)

    @property
    def num_classes(self) -> int:
        return self.W.shape[1]

    def fit_task(self, batches, num_classes: int) -> None:
        """Absorb one task: ``batches`` yields (expanded features (B, dim), labels (B,)) with
        labels indexing the ``num_classes`` classes of every task so far."""
        if num_classes < self.num_classes:
            raise ValueError(f"a task cannot shrink the class set ({self.num_classes} -> {num_classes})")
        if self.R is None:
            self._first_task(batches, num_classes)
            return
        self.W = F.pad(self.W, (0, num_classes - self.num_classes))
        for x, labels in batches:
            x = x.to(self.dtype)
            y = one_hot(labels, num_classes, self.dtype)
            # (I + X R X^T) is symmetric positive definite: a solve is exact where RAIL takes a pseudo-inverse
            gain = torch.linalg.solve(torch.eye(len(x), dtype=self.dtype) + x @ self.R @ x.T, x @ self.R)
            self.R = self.R - self.R @ x.T @ gain
            self.W = self.W + self.R @ x.T @ (y - x @ self.W)

    def _first_task(self, batches, num_classes: int) -> None:
        auto = torch.zeros(self.dim, self.dim, dtype=self.dtype)
        cross = torch.zeros(self.dim, num_classes, dtype=self.dtype)
        seen = 0
        for x, labels in batches:
            x = x.to(self.dtype)
            auto += x.T @ x
            cross += x.T @ one_hot(labels, num_classes, self.dtype)
            seen += len(x)
        if not seen:
            raise ValueError("RAIL-Primal got no training samples for its first task")
        # RAIL inverts in float64 (numpy) and casts back
        eye = torch.eye(self.dim, dtype=torch.float64)
        self.R = torch.linalg.inv(auto.double() + self.gamma * eye).to(self.dtype)
        self.W = self.R @ cross

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype) @ self.W

    def state(self) -> dict[str, torch.Tensor]:
        if self.R is None:
            raise ValueError("RAIL-Primal has not seen a task yet")
        return {"R": self.R.contiguous(), "W": self.W.contiguous()}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], gamma: float) -> PrimalRidge:
        ridge = cls(state["R"].shape[0], gamma, state["R"].dtype)
        ridge.R, ridge.W = state["R"], state["W"]
        return ridge


def gaussian_kernel(x: torch.Tensor, centres: torch.Tensor, gamma: float) -> torch.Tensor:
    """(len(x), len(centres)): exp(-gamma ||x - c||^2) (RAIL's ``kernel``)."""
    return torch.exp(-gamma * torch.cdist(x, centres).square())


class DualKernelRidge:
    """RAIL-Dual: kernel ridge regression over the stored features of every sample seen so far."""

    def __init__(self, gamma: float, lam: float, dtype: torch.dtype = torch.float32):
        if gamma <= 0 or lam <= 0:
            raise ValueError(f"RAIL-Dual's kernel width gamma and ridge lambda must be positive, got {gamma}, {lam}")
        self.gamma, self.lam, self.dtype = gamma, lam, dtype
        self.memory = torch.zeros(0, 0, dtype=dtype)
        self.labels = torch.zeros(0, dtype=torch.long)
        self.num_classes = 0
        self.alpha: torch.Tensor | None = None

    def fit_task(self, features: torch.Tensor, labels: torch.Tensor, num_classes: int) -> None:
        """Add a task's (normalised features, labels over every class so far) and refit alpha."""
        features = features.to(self.dtype)
        self.memory = features if not len(self.memory) else torch.cat([self.memory, features])
        self.labels = torch.cat([self.labels, labels.long()])
        self.num_classes = num_classes
        self._solve()

    def _solve(self) -> None:
        kernel = gaussian_kernel(self.memory, self.memory, self.gamma).double()
        eye = torch.eye(len(kernel), dtype=torch.float64)
        targets = one_hot(self.labels, self.num_classes, torch.float64)
        # RAIL inverts K + lambda I in float64 (numpy)
        self.alpha = torch.linalg.solve(kernel + self.lam * eye, targets).to(self.dtype)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        if self.alpha is None:
            raise ValueError("RAIL-Dual has not seen a task yet")
        return gaussian_kernel(x.to(self.dtype), self.memory, self.gamma) @ self.alpha

    def state(self) -> dict[str, torch.Tensor]:
        return {
            "memory": self.memory.contiguous(),
            "labels": self.labels,
            "num_classes": torch.tensor(self.num_classes),
        }

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], gamma: float, lam: float) -> DualKernelRidge:
        krr = cls(gamma, lam, state["memory"].dtype)
        krr.memory, krr.labels, krr.num_classes = state["memory"], state["labels"].long(), int(state["num_classes"])
        krr._solve()
        return krr


def fuse(
    zero_shot_logits: torch.Tensor, adapter_scores: torch.Tensor, fusion_weight: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """RAIL's zero-shot domain fusion over every domain's classes (learned ones first, in stream
    order). Returns (scores (B, C_all), mask of the samples routed to the adapter)."""
    learned = adapter_scores.shape[1]
    if learned > zero_shot_logits.shape[1]:
        raise ValueError(
            f"the adapter knows {learned} classes, more than the {zero_shot_logits.shape[1]} of the label space"
        )
    probs = zero_shot_logits.float().softmax(dim=-1)
    mask = probs.argmax(dim=-1) < learned
    padded = F.pad(adapter_scores.float(), (0, probs.shape[1] - learned))
    fused = torch.where(mask[:, None], (1 - fusion_weight) * probs + fusion_weight * padded, probs)
    return fused, mask
