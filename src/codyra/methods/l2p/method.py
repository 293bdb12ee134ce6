"""L2P (Wang et al., CVPR 2022): a prompt pool with key-query selection in front of a frozen
model, in both families.

- causal LM (the TRACE table): as TRACE runs it (BeyonderXX/TRACE
  ``model/Dynamic_network/L2P.py``, ``training/main.py``), :mod:`codyra.methods.l2p.llm`;
- CLIP (the full-shot MTIL table's L2P-dagger): the original's prompt pool on CLIP's frozen
  image encoder (google-research/l2p ``configs/cifar100_l2p.py``, ``models/prompt.py``,
  ``models/vit.py``, ``train_continual.py``), classified by CLIP's text classifier of the task's
  classes, :mod:`codyra.methods.l2p.clip`.

The family part is picked by the model itself: one with an image encoder (CLIP's ``visual``)
gets its prompts there, any other before its input embeddings. Options read by one family only
say so; the CLIP configs set the shared ones to the original's values (pool 10, length 10,
top-k 4, pull 1.0), where TRACE's defaults below stand for the LM.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method
from codyra.methods.l2p.llm import QUERIES
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class L2POptions(MethodOptions):
    pool_size: int = option(
        10, minimum=1, doc="prompts in the pool (TRACE main.py args.pool_size = 10; l2p cifar100_l2p.py pool_size 10)"
    )
    length: int = option(5, minimum=1, doc="tokens per prompt (TRACE args.prompt_length = 5; l2p cifar100_l2p.py 10)")
    top_k: int = option(3, minimum=1, doc="prompts per sample (TRACE L2P.__init__ top_k=3; l2p cifar100_l2p.py 4)")
    embedding_key: str = option(
        "mean",
        choices=QUERIES,
        doc="causal LM only: query of the input embeddings (TRACE embedding_key='mean'); CLIP's query is the "
        "frozen image encoder's embedding (l2p embedding_key 'cls')",
    )
    pull_coeff: float = option(
        0.5, minimum=0, doc="weight of the pull constraint (TRACE pull_constraint_coeff=0.5; l2p cifar100_l2p.py 1.0)"
    )
    init_scale: float = option(
        100.0,
        exclusive_minimum=0,
        doc="causal LM only: random token embeddings divided by this (TRACE init_new_prompt: w/100); CLIP's "
        "prompts and keys start U[0, 0.01) (l2p models/prompt.py: flax nn.initializers.uniform())",
    )
    vote_group: int | None = option(
        16,
        minimum=1,
        doc="CLIP only: images per majority vote of the prompts (l2p cifar100_l2p.py batchwise_prompt = True over "
        "one device's per_device_batch_size 16); null: each image its own top-k",
    )
    image_feature: str = option(
        "prompt",
        choices=("prompt", "token"),
        doc="CLIP only: the image feature is the mean of the prompt tokens' outputs (l2p cifar100_l2p.py "
        "vit_classifier = 'prompt') or the [CLS] token's (token), through CLIP's ln_post and projection",
    )

    def check(self):
        if self.top_k > self.pool_size:
            return [("top_k", f"must be <= pool_size ({self.pool_size}), got {self.top_k}")]
        return []


def family_part(model):
    """L2P's family part for ``model``: CLIP's (the prompts go into its image encoder) for a model
    with one, else the causal LM's (the prompts go before its input embeddings)."""
    if hasattr(model, "visual"):
        from codyra.methods.l2p import clip as part
    else:
        from codyra.methods.l2p import llm as part
    return part


class L2P(Method):
    kind = "l2p"
    families = ("causal_lm", "clip")
    paper_row = "L2P"
    group = "complementation"

    @classmethod
    def daggered(cls, family) -> bool:
        # the paper: L2P† on CLIP (full-shot MTIL, codyra.tex line 922), L2P on TRACE (line 322)
        return family.classifies

    Options = L2POptions

    def setup(self, ctx):
        self.part = family_part(ctx.model)
        return self.part.setup(self, ctx)

    def extra_loss(self, ctx, batch, outputs):
        return -self.options.pull_coeff * self.pool.pull

    def finish(self, model):
        return self.part.finish(self, model)

    def state_to_store(self):
        return self.state

    @classmethod
    def for_inference(cls, model, states):
        return family_part(model).prompted(model, states[-1])


METHOD = L2P
