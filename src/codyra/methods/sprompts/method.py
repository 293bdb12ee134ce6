"""S-Prompts (Wang et al., NeurIPS 2022; iamwangyabin/S-Prompts ``methods/sprompt.py``,
``models/slinet.py``, ``models/clip/prompt_learner.py``, ``configs/*_slip.json``), its CLIP
variant S-liPrompts: a prompt set per domain (task) on a frozen CLIP; the stored update is empty.

What the reference does, as its scripts run it (``main.py --config configs/<dataset>_slip.json``):

- **Per domain, learned with the plain cross-entropy** over the domain's classes, logit scale x
  cosine: image prompts, ``prompt_length`` 10 tokens of the image tower's width (an
  ``nn.Linear(embd_dim, prompt_length)`` weight, its default init U(+-1/sqrt(width))),
  inserted after the class token once the positional embedding is added, before ``ln_pre``
  (``VisionTransformer.forward(instance_tokens)``); and CoOp's text context
  (``PromptLearner``): 16 learned vectors (N(0, 0.02)) in place of the tokens "X X ... X" of
  "X ... X <class name>." Everything else is frozen; only the current domain's prompts train.
- **The domain selector**: after training, K-means (``KMeans(n_clusters=5, random_state=0)``)
  on the frozen image features (no prompts, L2-normalised) of the domain's training images;
  its 5 centroids are kept. At inference each test image goes to the domain holding the
  centroid nearest to its frozen feature, by the L1 distance (``_eval_cnn``: ``(((f - c) ** 2)
  ** 0.5).sum(1)``), and is classified with that domain's image prompts and text context.
  Every image goes to some learned domain: there is no zero-shot fallback.

Ours: K-means is scikit-learn's algorithm (greedy k-means++ seeding, 2 + floor(ln k) candidates a
centroid, then Lloyd's iterations, the best of ``kmeans_restarts`` by inertia; n_init 10 in the
versions of 2022, max_iter 300, tol 1e-4 of the mean feature variance), its draws from the job's
generator instead of numpy's ``random_state=0``, so the centroids are not the reference's bit
for bit. The features are the task's training batches of one epoch, as training draws them (the reference: its shuffled,
augmented train loader; its augmentation, a RandomResizedCrop of scale 0.08-1 and ImageNet's
normalisation, differs from the platform's). The label space is the benchmark's (MTIL: the test task's own
classes; X-TAIL: every task's), each class written with the selected domain's context. The
task loss the family computes with its template prompts is replaced by the loss over these
prompts (``extra_loss`` returns their difference).
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.base import Method, freeze
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class SPromptsOptions(MethodOptions):
    prompt_length: int = option(10, minimum=1, doc="image prompt tokens per domain (configs/*_slip.json prompt_length)")
    context_length: int = option(
        16, minimum=1, doc="learned text context vectors per domain (models/clip/prompt_learner.py cfgc.NCTX = 16)"
    )
    clusters: int = option(5, minimum=1, doc="K-means centroids per domain (methods/sprompt.py KMeans(n_clusters=5))")
    kmeans_restarts: int = option(
        10,
        minimum=1,
        doc="k-means++ seedings, the lowest inertia kept (scikit-learn KMeans n_init 10, its 2022 default)",
    )
    kmeans_iterations: int = option(300, minimum=1, doc="Lloyd iterations at most (scikit-learn KMeans max_iter 300)")


class SPrompts(Method):
    kind = "sprompts"
    families = ("clip",)
    paper_row = "S-Prompts†"
    group = "complementation"
    predicts_domain = True
    Options = SPromptsOptions

    def setup(self, ctx):
        from codyra.methods.sprompts.clip import attach_prompts, domain_features, load_domains, tokenize_classes
        from codyra.methods.sprompts.selector import kmeans

        o = self.options
        freeze(ctx.model)
        self.domains = load_domains(ctx.previous_state, ctx.task_index - 1)
        features = domain_features(ctx)  # frozen theta_0 features, before the prompts are attached
        self.centroids = kmeans(features.cpu(), o.clusters, ctx.generator, o.kmeans_restarts, o.kmeans_iterations)
        self.prompts = attach_prompts(ctx.model, o, ctx.generator).to(ctx.device)
        self.tokens = tokenize_classes(ctx.cfg, ctx.task.classnames, o.context_length).to(ctx.device)
        params = [self.prompts.image, self.prompts.context]
        self.trainable = sum(p.numel() for p in params)
        self.loss = None
        return [{"params": params, "weight_decay": ctx.weight_decay}]

    def extra_loss(self, ctx, batch, outputs):
        """The cross-entropy over the domain's context prompts, minus the family's template one."""
        import torch.nn.functional as F

        from codyra.methods.sprompts.clip import context_text_features

        text = context_text_features(ctx.model, self.tokens, self.prompts.context)
        logits = ctx.model.logit_scale.exp().detach() * outputs["image_features"] @ text.T
        loss = F.cross_entropy(logits, batch["labels"])
        self.loss = loss.detach()
        return loss - ctx.task_loss(batch, outputs)

    def step_metrics(self):
        return {} if self.loss is None else {"sprompts_loss": self.loss}

    def finish(self, model):
        from codyra.methods.sprompts.clip import detach_prompts, domain_state
        from codyra.store.updates import TaskUpdate

        detach_prompts(model)
        image, context = (p.detach().float().cpu() for p in (self.prompts.image, self.prompts.context))
        self.state = domain_state([*self.domains, (image, context, self.centroids)])
        stored = sum(t.numel() for t in self.state.values())
        summary = {"trainable_params": self.trainable, "stored_params": stored, "inference_extra_params": stored}
        return TaskUpdate("none"), summary

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.sprompts.clip import sprompts_row

        return row.from_stored_state(sprompts_row)


METHOD = SPrompts
