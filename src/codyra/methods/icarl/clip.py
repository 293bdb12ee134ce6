"""The CLIP side of iCaRL (:mod:`codyra.methods.icarl.method`): the exemplar images of earlier
tasks and the image features herding ranks a task's candidates by.

An exemplar is stored as its index in its task's training set; its image is read back under the
evaluation transform (ZSCL's DynamicDataset keeps the ``test_preprocess`` tensors), so the stored
state is a few integers per image, not the images.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from codyra.clip.streams import build_tasks
from codyra.data.tasks import ImageConfig


class MemoryImages:
    """The memory of tasks 1..i-1 in stored order: task by task, each set in its stored order."""

    def __init__(self, cfg: dict, image: ImageConfig, memory: dict[int, torch.Tensor], seed: int):
        tasks = build_tasks(cfg, image, seed)
        self.sets = {k: tasks[k - 1].train_eval_set() for k in memory}
        self.order = [(k, int(i)) for k, indices in memory.items() for i in indices.tolist()]
        for k, indices in memory.items():
            if len(indices) and int(indices.max()) >= len(self.sets[k]):
                raise ValueError(
                    f"iCaRL's stored exemplars of task {k} index up to {int(indices.max())}, its training set has "
                    f"{len(self.sets[k])} images: the data changed since; rerun from task {k}"
                )

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, position: int) -> torch.Tensor:
        k, i = self.order[position]
        return self.sets[k][i][0]


def memory_batches(images: MemoryImages, chunks: list[tuple[int, int]], workers: int):
    """The memory's images of each [start, stop) chunk in turn (a DataLoader over them)."""
    sampler = [list(range(start, stop)) for start, stop in chunks]
    return iter(torch.utils.data.DataLoader(images, batch_sampler=sampler, num_workers=workers))


@torch.no_grad()
def normalized_features(model, dataset, count: int, batch_size: int, device, workers: int) -> torch.Tensor:
    """(count, d) L2-normalised fp32 image features of ``model`` for the first ``count`` images of
    ``dataset`` (ZSCL's constructExampleSet: ``ref_model(img, None)``, normalised)."""
    was_training = model.training
    model.eval()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(dataset, range(count)), batch_size=batch_size, num_workers=workers
    )
    features = [F.normalize(model.encode_image(images.to(device)).float(), dim=-1) for images, _ in loader]
    model.train(was_training)
    return torch.cat(features)
