"""S-Prompts' domain selector (``codyra.methods.sprompts.method``), on tensors: K-means centroids of
a domain's features and the selection of the domain of the nearest centroid
(iamwangyabin/S-Prompts ``methods/sprompt.py`` ``clustering``, ``_eval_cnn``)."""

from __future__ import annotations

import math

import torch

KMEANS_TOLERANCE = 1e-4  # scikit-learn KMeans tol: of the mean per-dimension variance of the data


def kmeans(
    x: torch.Tensor, k: int, generator: torch.Generator, restarts: int = 10, iterations: int = 300
) -> torch.Tensor:
    """(k, D) centroids of the rows of ``x`` (N, D): greedy k-means++ seeding, then Lloyd's iterations
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


def seeding_trials(k: int) -> int:
    """Candidates drawn per centroid by greedy k-means++: 2 + floor(ln k) (scikit-learn's
    ``_kmeans_plusplus`` n_local_trials, Arthur and Vassilvitskii's suggestion)."""
    return 2 + int(math.log(k))


def _kmeans_plus_plus(x: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """Greedy k-means++ seeding, as scikit-learn's ``KMeans`` seeds: the first centroid uniform; for
    each next one, :func:`seeding_trials` candidates drawn with probability proportional to their
    squared distance to the nearest centroid so far, of which the one leaving the lowest potential
    (sum of those squared distances) is kept."""
    chosen = int(torch.randint(len(x), (1,), generator=generator))
    centers = [chosen]
    closest = ((x - x[chosen]) ** 2).sum(dim=1)
    for _ in range(1, k):
        potential = closest.sum()
        if float(potential) == 0:  # fewer distinct points than clusters: any sample
            centers.append(int(torch.randint(len(x), (1,), generator=generator)))
            continue
        draws = torch.rand(seeding_trials(k), generator=generator, dtype=x.dtype) * potential
        candidates = torch.searchsorted(closest.cumsum(dim=0), draws).clamp(max=len(x) - 1)
        chosen, closest = best_candidate(x, closest, candidates)
        centers.append(chosen)
    return x[centers].clone()


def best_candidate(x: torch.Tensor, closest: torch.Tensor, candidates: torch.Tensor) -> tuple[int, torch.Tensor]:
    """(the candidate row of ``x`` whose addition as a centroid leaves the lowest potential, the
    squared distances to the nearest centroid with it added); ``closest``: those distances before."""
    distances = ((x[candidates][:, None, :] - x[None, :, :]) ** 2).sum(dim=-1)
    after = torch.minimum(closest[None, :], distances)
    best = int(after.sum(dim=1).argmin())
    return int(candidates[best]), after[best]


def select_domains(features: torch.Tensor, centroids: list[torch.Tensor]) -> torch.Tensor:
    """(B,) each feature's domain (0-based): the one holding the centroid nearest by the L1
    distance (the first domain on ties, as ``torch.min``)."""
    if not centroids:
        raise ValueError("S-Prompts selects among learned domains: no domain's centroids are stored")
    nearest = [(features[:, None, :] - c[None].to(features)).abs().sum(dim=-1).min(dim=1).values for c in centroids]
    return torch.stack(nearest, dim=1).argmin(dim=1)
