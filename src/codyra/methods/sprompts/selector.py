"""S-Prompts' domain selector (``codyra.methods.sprompts.method``), on tensors: K-means centroids of
a domain's features and the selection of the domain of the nearest centroid
(iamwangyabin/S-Prompts ``methods/sprompt.py`` ``clustering``, ``_eval_cnn``)."""

from __future__ import annotations

import torch

KMEANS_TOLERANCE = 1e-4  # scikit-learn KMeans tol: of the mean per-dimension variance of the data


def kmeans(
    x: torch.Tensor, k: int, generator: torch.Generator, restarts: int = 10, iterations: int = 300
) -> torch.Tensor:
    """(k, D) centroids of the rows of ``x`` (N, D): k-means++ seeding, then Lloyd's iterations
    until the centroids move less than 1e-4 x the mean per-dimension variance (summed squared
    shift) or ``iterations`` pass; the seeding of lowest inertia is kept."""
    if len(x) < k:
        raise ValueError(f"K-means with {k} clusters needs at least {k} samples, got {len(x)}")
    x = x.double()
    tolerance = KMEANS_TOLERANCE * float(x.var(dim=0, unbiased=False).mean())
    best, best_inertia = None, float("inf")
    for _ in range(restarts):
        centers = _kmeans_plus_plus(x, k, generator)
        for _ in range(iterations):
            assign = torch.cdist(x, centers).argmin(dim=1)
            moved = torch.stack([x[assign == c].mean(dim=0) if (assign == c).any() else centers[c] for c in range(k)])
            shift = float(((moved - centers) ** 2).sum())
            centers = moved
            if shift <= tolerance:
                break
        inertia = float(torch.cdist(x, centers).min(dim=1).values.pow(2).sum())
        if inertia < best_inertia:
            best, best_inertia = centers, inertia
    return best.float()


def _kmeans_plus_plus(x: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding: the first centroid uniform, each next one a sample drawn with
    probability proportional to its squared distance to the nearest centroid so far."""
    chosen = [int(torch.randint(len(x), (1,), generator=generator))]
    for _ in range(1, k):
        d2 = torch.cdist(x, x[chosen]).min(dim=1).values.pow(2)
        if float(d2.sum()) == 0:  # fewer distinct points than clusters: any sample
            chosen.append(int(torch.randint(len(x), (1,), generator=generator)))
        else:
            chosen.append(int(torch.multinomial(d2 / d2.sum(), 1, generator=generator)))
    return x[chosen].clone()


def select_domains(features: torch.Tensor, centroids: list[torch.Tensor]) -> torch.Tensor:
    """(B,) each feature's domain (0-based): the one holding the centroid nearest by the L1
    distance (the first domain on ties, as ``torch.min``)."""
    if not centroids:
        raise ValueError("S-Prompts selects among learned domains: no domain's centroids are stored")
    nearest = [(features[:, None, :] - c[None].to(features)).abs().sum(dim=-1).min(dim=1).values for c in centroids]
    return torch.stack(nearest, dim=1).argmin(dim=1)
