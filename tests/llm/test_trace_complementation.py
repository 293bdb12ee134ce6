"""TRACE's model-complementation rows on the tiny mini TRACE: L2P and DualPrompt
(prompts prepended to the frozen LM, in training by hooks and in generation by a wrapper) and
FIX(ICL) (theta_0 shown demonstrations)."""

from __future__ import annotations

import json
import random

import pytest
import torch

from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.fingerprints import expected_cell_fingerprints
from codyra.experiment.train_job import train_task
from codyra.llm.evaluate import predictions_path
from codyra.llm.loss import position_ids
from codyra.llm.model import pretrained_lm
from codyra.methods import method_of
from codyra.methods._prompting import pools as prompts
from codyra.methods._prompting.llm import PromptedLM, attach_prompts
from codyra.methods.icl import llm as icl
from codyra.methods.icl.method import ICL
from codyra.methods.l2p.llm import prompt_pool
from codyra.steps.batches import derive_seed
from codyra.store.paths import cell_path, task_dir
from codyra.store.updates import load_method_state
from codyra.trace.data import TraceExample

SPECS = {
    "l2p": {"kind": "l2p", "pool_size": 4, "length": 2, "top_k": 2},
    "dualprompt": {"kind": "dualprompt"},
    "icl": {"kind": "icl", "demonstrations": 2},
}


class FixedPrefix(torch.nn.Module):
    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def forward(self, embeds, attention_mask):
        return self.prefix.expand(embeds.shape[0], -1, -1)


def _manual_logits(model, prefix, input_ids, mask):
    """The reference's forward: [prefix; embeddings] with the prefix attended to."""
    embeds, full_mask, _ = prompts.prepend(
        prefix.expand(len(input_ids), -1, -1), model.get_input_embeddings()(input_ids), mask
    )
    return model(inputs_embeds=embeds, attention_mask=full_mask, position_ids=position_ids(full_mask)).logits


def test_prompted_forward_and_generation_match_the_prepended_inputs(tiny_trace):
    model = pretrained_lm(tiny_trace).model
    prefix = torch.randn(1, 3, model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    input_ids = torch.tensor([[0, 0, 5, 9, 12], [7, 3, 5, 9, 12]])
    mask = (input_ids != 0).long()
    manual = _manual_logits(model, prefix, input_ids, mask)
    names = {n for n, _ in model.named_parameters()}
    attached = attach_prompts(model, FixedPrefix(torch.nn.Parameter(prefix)))
    assert {n for n, _ in model.named_parameters()} - names == {
        "codyra_prompts.prefix"
    }  # trains and checkpoints with the model
    hooked = model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids(mask)).logits
    attached.remove()
    assert {n for n, _ in model.named_parameters()} == names
    torch.testing.assert_close(
        model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids(mask)).logits,
        pretrained_lm(tiny_trace)
        .model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids(mask))
        .logits,
    )
    assert hooked.shape == (2, 5, model.config.vocab_size)  # the prefix positions' logits are dropped
    torch.testing.assert_close(hooked, manual[:, 3:])
    # greedy generation through the wrapper = a manual greedy loop on the prepended inputs
    out = PromptedLM(model, FixedPrefix(prefix)).generate(
        input_ids, mask, max_new_tokens=3, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    ids, m = input_ids, mask
    for _ in range(3):
        nxt = _manual_logits(model, prefix, ids, m)[:, -1].argmax(-1, keepdim=True)
        ids, m = torch.cat([ids, nxt], 1), torch.cat([m, torch.ones_like(nxt)], 1)
    assert torch.equal(out, ids)


def test_l2p_pull_term_reaches_the_prompts_through_the_fixed_keys():
    g = torch.Generator().manual_seed(0)
    pool, embeds = torch.randn(3, 2, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    keys = pool.mean(dim=1)
    module = prompt_pool(pool + 0.5, keys, top_k=1, embedding_key="mean")  # the pool moved since the keys were taken
    prefix = module(embeds, torch.ones(2, 5))
    q = torch.nn.functional.normalize(embeds.mean(dim=1), dim=1)
    k = torch.nn.functional.normalize(keys, dim=1)
    chosen = (q @ k.T).argmax(dim=1)
    torch.testing.assert_close(prefix, (pool + 0.5)[chosen])  # the prompts as they are now, chosen by the fixed keys
    torch.testing.assert_close(module.pull, (k[chosen] * q).sum() / 2)
    (-0.5 * module.pull).backward()
    # d/dk (k/|k| . q) = (q - (k^ . q) k^) / |k|, at the fixed keys, / batch, spread over the prompt's 2 tokens
    expected = torch.zeros(3, 4)
    for b, p in enumerate(chosen.tolist()):
        expected[p] += -0.5 * (q[b] - (k[p] @ q[b]) * k[p]) / keys[p].norm() / 2
    torch.testing.assert_close(module.prompt.grad, (expected / 2).unsqueeze(1).expand(3, 2, 4))


def _train_and_evaluate(cfg, method):
    cfg["method_configs"][method] = SPECS[method]
    summaries = [train_task(cfg, method, 0, task).summary for task in (1, 2)]
    states = [load_method_state(task_dir(cfg, method, 0, task)) for task in (1, 2)]
    cells = evaluate_row(cfg, method, 0, 2, [1, 2])
    return summaries, states, cells


def _rebuilt_identically(cfg, method, cells):
    """Cells recomputed from the stored files alone equal the first evaluation, predictions too."""
    first = [predictions_path(cell_path(cfg, method, 0, 2, j)).read_text() for j in (1, 2)]
    for j in (1, 2):
        cell_path(cfg, method, 0, 2, j).unlink()
    again = evaluate_row(cfg, method, 0, 2, [1, 2])
    assert [c["accuracy"] for c in again] == [c["accuracy"] for c in cells]
    assert [predictions_path(cell_path(cfg, method, 0, 2, j)).read_text() for j in (1, 2)] == first
    expected = expected_cell_fingerprints(cfg, method, method_of(cfg, method))
    assert [c["settings"] for c in again] == expected[2][:2]


def test_l2p_trains_one_pool_with_fixed_keys_and_rebuilds_its_cells(tiny_trace):
    summaries, (first, second), cells = _train_and_evaluate(tiny_trace, "l2p")
    dim = pretrained_lm(tiny_trace).model.config.hidden_size
    assert first["prompt"].shape == (4, 2, dim) and first["selection"].tolist() == [2, 0]
    assert summaries[0]["trainable_params"] == 4 * 2 * dim
    assert summaries[0]["inference_extra_params"] == 4 * 2 * dim + 4 * dim
    assert summaries[0]["update_kind"] == "none" and summaries[0]["steps"] == 6
    # the keys are the initial pool's means and never move; the pool trains on
    embedding = pretrained_lm(tiny_trace).model.get_input_embeddings().weight
    initial = prompts.random_token_prompts(
        embedding, 4, 2, torch.Generator().manual_seed(derive_seed(0, 1, 1)), scale=100
    )
    torch.testing.assert_close(first["keys"], initial.mean(dim=1))
    assert torch.equal(second["keys"], first["keys"]) and not torch.equal(second["prompt"], first["prompt"])
    assert not torch.equal(first["prompt"], initial)
    assert all(c["method"] == "l2p" and "copied_from" not in c for c in cells)
    _rebuilt_identically(tiny_trace, "l2p", cells)


class Killed(Exception):
    pass


def test_l2p_killed_and_resumed_ends_with_the_uninterrupted_pool(tiny_trace, tmp_path):
    tiny_trace["method_configs"]["l2p"] = SPECS["l2p"]

    def kill_at_5(step):
        if step == 5:
            raise Killed

    with pytest.raises(Killed):
        train_task(tiny_trace, "l2p", 0, 1, on_step=kill_at_5)  # checkpoints at steps 2 and 4: the pool with them
    train_task(tiny_trace, "l2p", 0, 1)
    fresh = {**tiny_trace, "results": str(tmp_path / "fresh")}
    train_task(fresh, "l2p", 0, 1)
    resumed, uninterrupted = (load_method_state(task_dir(c, "l2p", 0, 1)) for c in (tiny_trace, fresh))
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in uninterrupted)


def test_dualprompt_trains_g_and_the_task_e_prompt_and_answers_with_task_j_e_prompt(tiny_trace):
    summaries, (first, second), cells = _train_and_evaluate(tiny_trace, "dualprompt")
    dim = pretrained_lm(tiny_trace).model.config.hidden_size
    assert first["g_prompt"].shape == (2, dim) and first["e_prompts"].shape == (2, 3, dim)
    assert summaries[1]["trainable_params"] == 5 * dim and summaries[1]["inference_extra_params"] == (2 + 2 * 3) * dim
    # task 2 trains G and E_2; E_1 stays task 1's
    assert torch.equal(second["e_prompts"][0], first["e_prompts"][0])
    assert not torch.equal(second["e_prompts"][1], first["e_prompts"][1])
    assert not torch.equal(second["g_prompt"], first["g_prompt"])
    _rebuilt_identically(tiny_trace, "dualprompt", cells)


def _words(text):
    return {"input_ids": text.split()}


def test_icl_prompts_are_treelora_format_on_a_hand_made_task():
    fmt = icl.FORMATS["treelora"]
    prefix = fmt.instructions["FOMC"]
    examples = [TraceExample(prefix + f"Text {k}.\nAnswer:", "ABC"[k % 3]) for k in range(9)]
    cfg = {
        "tasks": ["C-STANCE", "FOMC"],
        "llm": {"max_prompt_len": 200, "mini": None},
        "method_configs": {"icl": SPECS["icl"]},
    }
    shown, prompt_len = ICL.test_prompts(cfg, "icl", 3, 2, examples, _words)
    assert prompt_len == 200
    # the draw: seeded per (seed, task), the budget after the instruction and the examples line
    rng = random.Random(derive_seed(3, 2))
    limit = 200 - len((prefix + fmt.constraint).split())
    demos = icl.pick_demonstrations(
        [{"prompt": e.prompt, "answer": e.answer} for e in examples],
        "FOMC",
        prefix,
        fmt,
        2,
        limit,
        lambda t: len(t.split()),
        rng,
    )
    assert len(demos) == 2
    block = "".join(f"{d['prompt']}{d['answer']}\n\n" for d in demos)
    assert block.startswith("Text ") and block.count("\nAnswer:") == 2  # instruction stripped from each demonstration
    assert shown == [prefix + fmt.constraint + block + f"Text {k}.\nAnswer:" for k in range(9)]
    # TRACE's a451f6d format: no examples line
    cfg["method_configs"]["icl"] = {**SPECS["icl"], "format": "trace-a451f6d"}
    older, _ = ICL.test_prompts(cfg, "icl", 3, 2, examples, _words)
    assert all(fmt.constraint not in p and p.startswith(prefix + "Text ") for p in older)


def test_icl_cells_are_evaluated_with_demonstrations_not_copied(tiny_trace):
    tiny_trace["method_configs"]["icl"] = {
        **SPECS["icl"],
        "max_prompt_len": 240,
    }  # 96: no demonstration fits the budget
    cells = evaluate_row(tiny_trace, "icl", 0, 1, [1, 2])  # theta_0: no training job, no update needed
    assert all("copied_from" not in c for c in cells)
    assert [c["settings"] for c in cells] == expected_cell_fingerprints(tiny_trace, "icl", ICL)[1]
    rows = [
        json.loads(line) for line in predictions_path(cell_path(tiny_trace, "icl", 0, 1, 2)).read_text().splitlines()
    ]
    assert all(r["prompt"].count("Answer:") == 3 for r in rows)  # two demonstrations, then the test prompt
    # row 0 stays the pretrained model's
    assert "copied_from" in evaluate_row(tiny_trace, "icl", 0, 0, [1])[0]
    # its cells rest on its config: another number of demonstrations is other settings
    tiny_trace["method_configs"]["icl"]["demonstrations"] = 3
    assert expected_cell_fingerprints(tiny_trace, "icl", ICL)[1] != [c["settings"] for c in cells]
