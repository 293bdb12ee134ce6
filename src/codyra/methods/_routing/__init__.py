"""Task-agnostic inference: deciding which domain (task) a test sample belongs to.

Two predictors, as the references build them:

- ``zero_shot`` (RAIL, and the paper's CoDyRA-dagger): the pretrained model's zero-shot
  argmax over the classes of every domain of the benchmark; the predicted domain is the one
  whose class block holds the argmax. A sample is routed to the learned modules when that
  domain is among the tasks learned so far, else it keeps the zero-shot model.
- ``ddas`` (MoE-Adapters' distribution-discriminative auto-selector,
  JiazuoYu/MoE-Adapters4CL ``mtil/src/models/AutoEncoder.py``, ``evaluation.py``): one small
  autoencoder per task on sigmoid-squashed frozen image features; a whole test batch goes to
  the task whose autoencoder reconstructs it best (mean squared error over the batch), or to
  the zero-shot model when even that error exceeds a threshold.

``RoutingTally`` counts a cell's routing decisions; the cell stores them (field ``routing``)
so that the router's accuracy per cell is a table of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

ZERO_SHOT = -1  # the "domain" of samples left to the zero-shot model


def class_domains(block_sizes: list[int]) -> torch.Tensor:
    """Domain index (0-based, stream order) of every class of a label space made of per-domain blocks."""
    if not block_sizes or min(block_sizes) < 1:
        raise ValueError(f"every domain needs at least one class, got block sizes {block_sizes}")
    return torch.repeat_interleave(torch.arange(len(block_sizes)), torch.tensor(block_sizes))


def zero_shot_domains(logits: torch.Tensor, block_sizes: list[int]) -> torch.Tensor:
    """(B,) the domain of each sample's zero-shot argmax class."""
    domains = class_domains(block_sizes)
    if logits.shape[-1] != len(domains):
        raise ValueError(f"logits have {logits.shape[-1]} classes, the label space {len(domains)}")
    return domains.to(logits.device)[logits.argmax(dim=-1)]


def route_learned(domains: torch.Tensor, learned: int) -> torch.Tensor:
    """Each sample's route: its predicted domain when that is one of the ``learned`` first tasks, else ZERO_SHOT."""
    return torch.where(domains < learned, domains, torch.full_like(domains, ZERO_SHOT))


class DomainAutoencoder(nn.Module):
    """MoE-Adapters' per-task autoencoder: Linear -> ReLU -> Linear -> Sigmoid (``nn.Linear``'s
    default init, drawn from ``generator`` when given)."""

    def __init__(self, input_dim: int, code_dim: int, generator: torch.Generator | None = None):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, code_dim), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(code_dim, input_dim), nn.Sigmoid())
        if generator is not None:
            with torch.no_grad():
                for linear in (self.encoder[0], self.decoder[0]):
                    nn.init.kaiming_uniform_(linear.weight, a=5**0.5, generator=generator)
                    bound = 1 / linear.in_features**0.5
                    linear.bias.uniform_(-bound, bound, generator=generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


def reconstruction_losses(autoencoders, features: torch.Tensor) -> torch.Tensor:
    """(T,) each task autoencoder's mean squared error on the batch (inputs sigmoid-squashed, as MoE-Adapters)."""
    inputs = torch.sigmoid(features.flatten(1))
    return torch.stack([nn.functional.mse_loss(ae(inputs), inputs) for ae in autoencoders])


def ddas_route(losses: torch.Tensor, threshold: float | torch.Tensor) -> int:
    """The batch's task (0-based): the autoencoder with the lowest loss (the first on ties, as the
    reference's strict ``<`` scan), or ZERO_SHOT when that loss exceeds ``threshold`` (one value,
    as the reference, or one per task: the winner's)."""
    if losses.numel() == 0:
        return ZERO_SHOT
    best = int(torch.argmin(losses))  # torch.argmin returns the first minimum
    limit = float(threshold[best]) if isinstance(threshold, torch.Tensor) else threshold
    return best if float(losses[best]) <= limit else ZERO_SHOT


def fit_autoencoder(
    ae: DomainAutoencoder,
    batches: list[torch.Tensor],
    iterations: int,
    lr: float,
    weight_decay: float,
    decay_epochs: int,
    epoch_batches: int | None = None,
) -> float:
    """Train one task's autoencoder as MoE-Adapters' chooser (``few_shot_AutoEncoder.py`` lines
    192-222): Adam (lr, weight decay), MSE of the sigmoid-squashed features, one batch per
    iteration, lr x 0.1 every ``decay_epochs`` epochs.

    An epoch is ``epoch_batches`` iterations (None: ``len(batches)``). The reference counts it
    over its full training loader (``num_batches = len(dataset.train_loader)``, line 193; 53 for
    Aircraft's 3,334 images in batches of 64) while it trains on the 5-shot batches, and restarts
    their iterator at every such epoch (line 199) as well as when it runs out (line 205): the
    batch of iteration t is ``batches[(t % epoch_batches) % len(batches)]``.

    Returns the largest batch loss over ``batches`` after training: the reference prints it per
    task to set the threshold by hand."""
    if not batches:
        raise ValueError("the DDAS autoencoder got no feature batches")
    per_epoch = len(batches) if epoch_batches is None else epoch_batches
    if per_epoch < 1:
        raise ValueError(f"an epoch of the DDAS schedule needs at least one batch, got epoch_batches={epoch_batches}")
    optimizer = torch.optim.Adam(ae.parameters(), lr=lr, weight_decay=weight_decay)
    ae.train()
    for iteration in range(iterations):
        for group in optimizer.param_groups:
            group["lr"] = ddas_lr(iteration, lr, decay_epochs, per_epoch)
        loss = reconstruction_losses([ae], batches[(iteration % per_epoch) % len(batches)])[0]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ae.eval()
    with torch.no_grad():
        return max(float(reconstruction_losses([ae], b)[0]) for b in batches)


def ddas_lr(iteration: int, lr: float, decay_epochs: int, epoch_batches: int) -> float:
    """MoE-Adapters' ``exp_lr_scheduler(optimizer, int(iteration / num_batches), lr)``:
    lr x 0.1 ** (epoch // decay_epochs), epoch = iteration // epoch_batches (0-based iterations)."""
    return lr * 0.1 ** ((iteration // epoch_batches) // decay_epochs)


@dataclass
class RoutingTally:
    """A cell's routing decisions: ``true_domain`` is task j (0-based), ``learned`` the tasks 1..i."""

    router: str
    true_domain: int
    learned: int
    counts: dict[int, int] = field(default_factory=dict)  # route -> samples (ZERO_SHOT included)

    def add(self, routes: torch.Tensor) -> None:
        values, counts = torch.unique(routes.cpu(), return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            self.counts[value] = self.counts.get(value, 0) + count

    def to_json(self) -> dict:
        """Router accuracy: the share of samples routed where they belong -- to their own task when
        it is learned, to the zero-shot model when it is not yet learned."""
        total = sum(self.counts.values())
        if not total:
            raise ValueError("no routing decisions were recorded")
        own = self.true_domain if self.true_domain < self.learned else ZERO_SHOT
        return {
            "router": self.router,
            "samples": total,
            "accuracy": 100.0 * self.counts.get(own, 0) / total,
            "to_zero_shot": 100.0 * self.counts.get(ZERO_SHOT, 0) / total,
            "routes": {str(k): v for k, v in sorted(self.counts.items())},
        }
