"""Everything the mini TRACE starts from, written by one job (`codyra pretrain-mini`).

1. The data: the eight synthetic tasks in TRACE's file format (:mod:`codyra.mini.trace.tasks`)
   under ``data.root`` (default ``results/{benchmark}/data``).
2. A byte-level BPE tokenizer trained on their training splits.
3. theta_0: a tiny LLaMA (``model_configs/<model.name>.json``) pretrained as a plain language
   model (loss on every token) on ``mini.corpus_size`` documents of general text about the
   tasks' world (:func:`codyra.mini.trace.tasks.general_corpus`, drawn with a different seed):
   it learns the words, facts and formats the tasks use but none of their instructions or
   mappings, so every task is new to it, as TRACE's tasks are to an instruction-tuned LLM.
   Solved examples of the ``llm.mini.pretrain_tasks`` (never an eval or test prompt) may be
   mixed in, as many per task as the corpus has documents per task, to make those tasks
   known before training.

   Its input and output embeddings are untied, as LLaMA-2's are (TRACE's models). Tied, the
   rows of the tokens only the benchmark's prompts use ("Stance:", "Summary:", "Simplified:")
   get nothing but the same softmax push during pretraining and end up one vector (cosine
   0.98 to 0.99): a LoRA could not tell the tasks' cues apart, so each task rewrote the answer
   format of every earlier one (lora-r16-all OP 20.5 tied, 46.4 untied; seed 0; docs/mini.md, "The mini TRACE").

The output is a Hugging Face model folder (``config.json``, ``model.safetensors``, tokenizer
JSON files), written to a temporary folder and renamed into place, so ``model.safetensors``
exists only once everything does.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import torch

from codyra.device import use_threads
from codyra.llm.collate import TrainingCollator
from codyra.llm.loss import answer_loss_sum, position_ids
from codyra.llm.model import (
    MODEL_BUILD_LOCK,
    length_limits,
    mini_model_config,
    mini_model_dir,
    trace_root,
)
from codyra.mini.trace.tasks import MINI_TRACE_TASKS, general_corpus, generate_task, write_mini_trace
from codyra.mini.trace.tokenizer import train_mini_trace_tokenizer
from codyra.progress import progress_bar
from codyra.steps.optim import decay_groups
from codyra.steps.schedules import warmup_cosine
from codyra.store.theta0 import write_model_folder
from codyra.trace.data import IGNORE_INDEX, SPLITS, TraceExample, load_split

log = logging.getLogger(__name__)
WARMUP_FRACTION = 0.05
SEED_OFFSET = 1_000_003  # the pretraining corpus is drawn apart from the benchmark's data seed


def pretraining_corpus(cfg: dict, root: Path) -> list[TraceExample]:
    """General documents (as prompts without answers: the loss covers every token), then solved
    examples of the pretraining tasks, none sharing a prompt with an eval or test split."""
    tasks = cfg["llm"]["mini"]["pretrain_tasks"]
    unknown = sorted(set(tasks) - set(MINI_TRACE_TASKS))
    if unknown:
        raise ValueError(
            f"config key llm.mini.pretrain_tasks: unknown task(s) {unknown}; choose from {MINI_TRACE_TASKS}"
        )
    seed, size = cfg["mini"]["data_seed"] + SEED_OFFSET, cfg["mini"]["corpus_size"]
    corpus = [TraceExample(document, "") for document in general_corpus(seed, size)]
    per_task = math.ceil(size / len(MINI_TRACE_TASKS))
    for task in tasks:
        held_out = {e.prompt for split in ("eval", "test") for e in load_split(root / task, split)}
        drawn = generate_task(task, seed, {"train": per_task, "eval": 0, "test": 0})
        corpus += [e for e in drawn["train"] if e.prompt not in held_out]
    return corpus


def build_mini_llama(name: str, tokenizer, seed: int):
    with MODEL_BUILD_LOCK:
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            **mini_model_config(name),
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        torch.manual_seed(seed)  # transformers initialises from the global RNG
        return LlamaForCausalLM(config)


def pretrain_mini_lm(cfg: dict, out_dir: str | Path | None = None) -> dict:
    if cfg["llm"]["mini"] is None:
        raise ValueError("pretrain-mini for a causal LM needs the llm.mini block (the synthetic mini TRACE)")
    mini = cfg["mini"]
    use_threads(mini["pretrain_threads"])
    started = time.time()
    root = trace_root(cfg)
    sizes = dict(
        zip(SPLITS, (mini["train_per_task"], cfg["llm"]["mini"]["eval_per_task"], mini["test_per_task"]), strict=True)
    )
    write_mini_trace(root, mini["data_seed"], sizes)
    tokenizer = train_mini_trace_tokenizer(root, cfg["llm"]["mini"]["vocab_size"])
    collate = TrainingCollator(tokenizer, length_limits(cfg))  # also sets the pad token and left padding
    model = build_mini_llama(cfg["model"]["name"], tokenizer, mini["pretrain_seed"]).train()
    corpus = pretraining_corpus(cfg, root)
    optimizer = torch.optim.AdamW(
        decay_groups(model.parameters(), 0.1),
        lr=mini["pretrain_lr"],
        betas=(0.9, 0.98),
        fused=True,  # its square root rounds alike on every CPU (codyra.steps.backends.PlainBackend)
    )
    steps, batch = mini["pretrain_steps"], mini["pretrain_batch_size"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(steps, int(WARMUP_FRACTION * steps)))
    generator = torch.Generator().manual_seed(mini["pretrain_seed"])
    bar = progress_bar(total=steps, desc="pretrain mini LM")
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        picks = torch.randint(len(corpus), (batch,), generator=generator).tolist()
        inputs = collate([corpus[k] for k in picks])
        labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, IGNORE_INDEX)
        logits = model(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            position_ids=position_ids(inputs["attention_mask"]),
        ).logits
        total, tokens = answer_loss_sum(logits, labels)
        loss = total / tokens
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()

    out = Path(out_dir) if out_dir is not None else mini_model_dir(cfg)
    write_model_folder(out, model.eval(), tokenizer)
    seconds = time.time() - started
    log.info(
        "mini TRACE data, tokenizer and theta_0 in %.1fs (corpus %d, final loss %.3f) -> %s",
        seconds,
        len(corpus),
        loss.item(),
        out,
    )
    return {"seconds": seconds, "corpus": len(corpus), "final_loss": loss.item(), "steps": steps}
