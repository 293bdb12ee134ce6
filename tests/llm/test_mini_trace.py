"""The synthetic mini TRACE and its offline tokenizer."""

import json
from collections import Counter

import pytest
from transformers import AutoTokenizer

from codyra.mini.trace.tasks import OTHER_INSTRUCTIONS, general_corpus, generate_task, write_mini_trace
from codyra.mini.trace.tokenizer import train_mini_trace_tokenizer
from codyra.trace.data import IGNORE_INDEX, SPLITS, LengthLimits, encode_for_training, encode_prompt, load_split
from codyra.trace.metrics import TRACE_TASKS, score_task

SIZES = {"train": 60, "eval": 10, "test": 20}


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    root = tmp_path_factory.mktemp("mini_trace")
    return root, write_mini_trace(root, seed=3, sizes=SIZES)


@pytest.fixture(scope="module")
def tokenizer(benchmark):
    return train_mini_trace_tokenizer(benchmark[0])


def folder_bytes(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_writes_every_trace_task_in_trace_format(benchmark):
    root, tasks = benchmark
    assert tasks == list(TRACE_TASKS)
    assert sorted(p.name for p in root.iterdir()) == sorted(tasks)  # no staging leftovers
    for task in tasks:
        assert sorted(p.name for p in (root / task).iterdir()) == ["eval.json", "test.json", "train.json"]
        records = json.loads((root / task / "train.json").read_text())
        assert all(set(r) == {"prompt", "answer"} for r in records)
        splits = {split: load_split(root / task, split) for split in SPLITS}
        assert {split: len(splits[split]) for split in SPLITS} == SIZES
        prompts = [e.prompt for split in SPLITS for e in splits[split]]
        assert len(set(prompts)) == len(prompts), f"{task}: a prompt repeats across splits"


def test_deterministic_in_the_seed(benchmark, tmp_path):
    root, _ = benchmark
    write_mini_trace(tmp_path / "same", seed=3, sizes=SIZES)
    write_mini_trace(tmp_path / "other", seed=4, sizes=SIZES)
    assert folder_bytes(tmp_path / "same") == folder_bytes(root)
    assert folder_bytes(tmp_path / "other") != folder_bytes(root)


def test_rewriting_replaces_a_task_folder(tmp_path):
    write_mini_trace(tmp_path, seed=1, sizes=SIZES)
    (tmp_path / "FOMC" / "stale.json").write_text("[]")
    write_mini_trace(tmp_path, seed=1, sizes=SIZES)
    assert not (tmp_path / "FOMC" / "stale.json").exists()


def test_labels_vary_and_references_score_full_marks(benchmark):
    root, tasks = benchmark
    for task in tasks:
        test = load_split(root / task, "test")
        answers, prompts = [e.answer for e in test], [e.prompt for e in test]
        assert len(Counter(answers)) > 2, f"{task}: answers barely vary"
        # A perfect prediction gets full marks, except SARI, which docks repeated source
        # words that are deleted only once.
        assert score_task(task, answers, answers, prompts) >= (95.0 if task == "20Minuten" else 100.0)


def test_py150_answers_carry_placeholders(benchmark):
    root, _ = benchmark
    answers = " ".join(e.answer for e in load_split(root / "Py150", "train"))
    assert "<NUM_LIT>" in answers and "<STR_LIT:" in answers and "<STR_LIT>" in answers


def test_prompts_are_short_for_the_mini_tokenizer(benchmark, tokenizer):
    root, tasks = benchmark
    for task in tasks:
        for split in SPLITS:
            for example in load_split(root / task, split):
                assert len(encode_prompt(tokenizer, example.prompt)) < 64, (task, example.prompt)


def test_prompt_tokens_prefix_the_joint_training_tokens(benchmark, tokenizer):
    # `tokenization: trace` tokenises prompt + answer as one string; a prompt ending in
    # whitespace (as Py150's once did) glues it onto the answer's first token, so generation,
    # which sees the prompt alone, starts from a state training never showed.
    root, tasks = benchmark
    limits = LengthLimits(tokenization="trace")
    for task in tasks:
        for example in load_split(root / task, "train"):
            assert example.prompt == example.prompt.rstrip(), (task, example.prompt)
            prompt_ids = encode_prompt(tokenizer, example.prompt, limits)
            joint = encode_for_training(tokenizer, example, limits)
            assert joint.input_ids[: len(prompt_ids)] == prompt_ids, (task, example.prompt)
            assert joint.labels[len(prompt_ids) - 1] == IGNORE_INDEX != joint.labels[len(prompt_ids)], (task, example)


def test_a_prompt_ends_with_its_cue_as_one_token(benchmark, tokenizer):
    # The tokenizer keeps a word and its colon together: a prompt's last token is its task's
    # cue (shared only where TRACE's tasks share it), not a ":" every prompt ends with.
    root, _ = benchmark
    cues = {
        "C-STANCE": "Stance:",
        "FOMC": "Stance:",
        "MeetingBank": "Summary:",
        "ScienceQA": "Answer:",
        "NumGLUE-cm": "Answer:",
        "NumGLUE-ds": "Answer:",
        "20Minuten": "Simplified:",
    }
    for task, cue in cues.items():
        for example in load_split(root / task, "test"):
            assert tokenizer.convert_ids_to_tokens(encode_prompt(tokenizer, example.prompt))[-1] == cue, task


def test_size_and_task_errors():
    with pytest.raises(ValueError, match="could not draw 5000 distinct train prompts"):
        generate_task("FOMC", seed=0, sizes={"train": 5000, "eval": 0, "test": 0})
    with pytest.raises(ValueError, match=r"sizes lacks \['eval'\]"):
        generate_task("FOMC", seed=0, sizes={"train": 1, "test": 1})
    with pytest.raises(ValueError, match="unknown mini TRACE task"):
        generate_task("GSM8K", seed=0)


def test_tokenizer_is_deterministic_and_round_trips_through_json(benchmark, tokenizer, tmp_path):
    root, _ = benchmark
    assert train_mini_trace_tokenizer(root).backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
    tokenizer.save_pretrained(tmp_path)
    assert {p.suffix for p in tmp_path.iterdir()} == {".json"}
    text = "Simplify the sentence.\nThe zoo buys a new park, ü\nSimplified:"
    expected = tokenizer(text, add_special_tokens=False)["input_ids"]
    reloaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)  # as codyra.llm.model loads it
    assert reloaded(text, add_special_tokens=False)["input_ids"] == expected
    assert (reloaded.bos_token, reloaded.eos_token, reloaded.pad_token, reloaded.unk_token) == (
        "<s>",
        "</s>",
        "<pad>",
        "<unk>",
    )
    assert tokenizer.decode(expected) == text


def test_general_corpus_is_deterministic_and_covers_every_world():
    corpus = general_corpus(seed=5, size=80)
    assert corpus == general_corpus(seed=5, size=80) and corpus != general_corpus(seed=6, size=80)
    assert len(corpus) == 80 and len(set(corpus)) > 70
    joined = "\n".join(corpus)
    for marker in ("we ", "rates", "Council meeting", "<EOL>", "Because", "=", "Now ", "Compute.", "officials"):
        assert marker in joined, marker


def test_general_corpus_never_states_a_task_instruction_or_cue(benchmark):
    """The corpus teaches the words, not the tasks: no instruction, field label or answer cue
    of a task appears in it ("Answer:" only follows the corpus's own instructions)."""
    root, tasks = benchmark
    corpus = general_corpus(seed=3, size=800)
    instructions = {load_split(root / task, "test")[0].prompt.split("\n")[0] for task in tasks}
    assert len(instructions) == len(tasks) - 1  # the NumGLUE tasks share theirs
    for document in corpus:
        for marker in (
            *instructions,
            "Target:",
            "Text:",
            "Question:",
            "Options:",
            "Stance:",
            "Summary:",
            "Simplified:",
        ):
            assert marker not in document, (marker, document)
        if any(cue in document for cue in ("Answer:", "Output:", "Result:")):
            assert document.split("\n")[0] in OTHER_INSTRUCTIONS, document


def test_general_corpus_holds_every_answer_token(benchmark, tokenizer):
    """Every token a task answers with (tokenised alone or after its prompt) occurs in the
    corpus: the pretrained LM can emit it, so a small adapter can learn to (an output token the
    LM never saw keeps a suppressed logit no adapter on the hidden layers lifts in time)."""
    root, tasks = benchmark
    seen = {i for document in general_corpus(seed=3, size=800) for i in tokenizer(document)["input_ids"]}
    for task in tasks:
        for example in load_split(root / task, "test"):
            alone = tokenizer(example.answer)["input_ids"]
            joint = tokenizer(example.prompt + example.answer)["input_ids"][-len(alone) :]
            missing = set(alone + joint) - seen
            assert not missing, (task, example.answer, tokenizer.convert_ids_to_tokens(sorted(missing)))
