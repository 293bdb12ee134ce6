"""The causal-LM family (TRACE): what the engine, the evaluation and the workflow ask of a
Hugging Face decoder.

Heavy modules (torch, transformers, deepspeed) are imported inside the methods: config
validation reads ``vocabulary`` on every Snakemake start.
"""

from __future__ import annotations

from typing import ClassVar

from codyra.llm.targets import LM_VOCABULARY


class CausalLMFamily:
    name = "causal_lm"
    vocabulary = LM_VOCABULARY
    # left-padded BOS + prompt + answer + EOS; labels IGNORE_INDEX except on the answer and EOS
    batch_keys = ("input_ids", "attention_mask", "labels")
    train_rule = "train_lm_task"  # its own rule name: profiles give it 4 GPUs in one task
    eval_rule = "eval_lm_row"  # generation: hours where a CLIP row takes minutes
    # a task holds 4 GPUs for hours: a whole run would outlast partition time limits, and a requeue would redo it all
    cluster_job = "task"
    # a row generates on one GPU: in the training's job it would hold the other 3 of the 4 idle
    rows_apart = True
    classifies = False  # generated answers scored by the task's metric
    has_heldout_tasks = False
    inapplicable_analyses: ClassVar[dict[str, str]] = {
        name: f"the paper reports it for CLIP only ({why})"
        for name, why in (
            ("probes", "interpolation on unseen zero-shot data, removal of one encoder's updates"),
            ("conflict", "gradients at the pretrained CLIP, appendix supp_norm_matched"),
        )
    }

    means_table = None  # TRACE's table is OP / Forgetting (codyra.evaluation.tables.table2)
    libraries = ("transformers.models.auto.modeling_auto", "transformers.models.llama.modeling_llama")

    def settings(self, cfg: dict) -> dict:
        return {"llm": cfg["llm"]}

    def pretrained(self, cfg: dict):
        from codyra.llm.model import pretrained_lm

        return pretrained_lm(cfg)

    def rebuild(self, cfg: dict, method: str, seed: int, upto: int):
        from codyra.llm.rebuild import rebuild_lm

        return rebuild_lm(cfg, method, seed, upto)

    def targets(self, model):
        from codyra.llm.targets import lm_targets

        return lm_targets(model)

    def fit_session(self, cfg, job, method_name, seed, task_index, device):
        from codyra.llm.train import LMSession

        return LMSession(cfg, job, method_name, seed, task_index, device)

    def delegate(self, cfg, method_name, seed, task_index, run):
        """Under DeepSpeed, re-execute the job under torchrun (this process is not yet a rank)."""
        from codyra.llm.torchrun import in_distributed_rank, launch_ranks

        if cfg["llm"]["deepspeed"]["enabled"] and not in_distributed_rank():
            return launch_ranks(cfg, method_name, seed, task_index, run)
        return None

    def feature_pass(self, cfg, seed, task_index, train, device, model=None):
        raise ValueError("closed-form methods (RAIL) fit frozen image features: they run on CLIP benchmarks only")

    def cells(self, cfg, row, device):
        from codyra.llm.evaluate import lm_cells

        return lm_cells(cfg, row, device)

    def own_pretraining(self, cfg: dict) -> str | None:
        from codyra.store.paths import MINI_PRETRAINED

        if cfg["llm"]["mini"] is not None and cfg["model"]["pretrained"] is None:
            return MINI_PRETRAINED.format(results=cfg["results"], benchmark=cfg["benchmark"])
        return None


CAUSAL_LM = CausalLMFamily()
