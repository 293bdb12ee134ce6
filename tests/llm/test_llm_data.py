"""TRACE task folders: loader errors, tokenisation, masking, truncation and left padding."""

import json

import pytest
import torch
from transformers import ByT5Tokenizer

from codyra.llm.collate import GenerationCollator, TrainingCollator, left_pad
from codyra.mini.trace.tokenizer import train_bpe_tokenizer
from codyra.trace.data import (
    IGNORE_INDEX,
    LengthLimits,
    TraceDataError,
    TraceExample,
    encode_for_training,
    encode_prompt,
    load_split,
    prepare_tokenizer,
)

CORPUS = [
    "Solve the math problem.\nQuestion: Anna has 3 apples and gets 4 more.\nAnswer:",
    "7",
    "Summarize the meeting.\nThe council approved new lights.\nSummary:",
    "Council approved new lights.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return prepare_tokenizer(train_bpe_tokenizer(CORPUS * 20, vocab_size=320))


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def write_split(folder, split, content):
    folder.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content)
    (folder / f"{split}.json").write_text(text, encoding="utf-8")


# --- loading ------------------------------------------------------------------------------


def test_load_split_reads_its_own_file_and_drops_other_keys(tmp_path):
    for split in ("train", "eval", "test"):
        write_split(tmp_path, split, [{"prompt": f"{split} p", "answer": "a", "extra": 1}])
    assert load_split(tmp_path, "eval") == [TraceExample("eval p", "a")]


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(TraceDataError, match=r"test\.json: file not found"):
        load_split(tmp_path, "test")


@pytest.mark.parametrize(
    "content, message",
    [
        ({"prompt": "p", "answer": "a"}, r"train\.json: not a JSON list \(top level is dict\)"),
        ([], "the list has no records"),
        ('[{"prompt": "p", "answer": "a"},', r"invalid JSON at line 1 column \d+"),
        (
            [{"prompt": "p", "answer": "a"}] * 17 + [{"prompt": "p"}],
            "record 17 has no 'answer' key",
        ),
        ([{"prompt": "p", "answer": "a"}, {"prompt": 3, "answer": "a"}], "record 1 'prompt' is int, expected str"),
        ([["p", "a"]], "record 0 is list, expected an object with 'prompt' and 'answer'"),
    ],
)
def test_malformed_file_names_file_record_and_problem(tmp_path, content, message):
    write_split(tmp_path, "train", content)
    with pytest.raises(TraceDataError, match=message) as error:
        load_split(tmp_path, "train")
    assert str(tmp_path / "train.json") in str(error.value)


def test_unknown_split(tmp_path):
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        load_split(tmp_path, "dev")


# --- tokenisation -------------------------------------------------------------------------

EXAMPLE = TraceExample(CORPUS[0], CORPUS[1])


def test_training_sequence_is_bos_prompt_answer_eos(tokenizer):
    encoded = encode_for_training(tokenizer, EXAMPLE)
    prompt, answer = ids(tokenizer, EXAMPLE.prompt), ids(tokenizer, EXAMPLE.answer)
    assert encoded.input_ids == [tokenizer.bos_token_id, *prompt, *answer, tokenizer.eos_token_id]


def test_labels_mask_bos_and_prompt_only(tokenizer):
    encoded = encode_for_training(tokenizer, EXAMPLE)
    n_masked = 1 + len(ids(tokenizer, EXAMPLE.prompt))
    assert encoded.labels[:n_masked] == [IGNORE_INDEX] * n_masked
    assert encoded.labels[n_masked:] == encoded.input_ids[n_masked:]
    assert tokenizer.decode(encoded.labels[n_masked:-1]) == EXAMPLE.answer
    assert encoded.labels[-1] == tokenizer.eos_token_id


def test_separate_prompt_keeps_its_end_and_answer_its_beginning(tokenizer):
    limits = LengthLimits(max_prompt_len=5, max_answer_len=3, tokenization="separate")
    long_answer = TraceExample(EXAMPLE.prompt, "Council approved new lights.")
    prompt, answer = ids(tokenizer, long_answer.prompt), ids(tokenizer, long_answer.answer)
    assert len(prompt) > 4 and len(answer) > 2
    encoded = encode_for_training(tokenizer, long_answer, limits)
    # BOS + the last 4 prompt tokens (TRACE truncates on the left), then the first 2
    # answer tokens + EOS
    assert encoded.input_ids == [tokenizer.bos_token_id, *prompt[-4:], *answer[:2], tokenizer.eos_token_id]
    assert encoded.labels == [IGNORE_INDEX] * 5 + [*answer[:2], tokenizer.eos_token_id]
    assert encode_prompt(tokenizer, long_answer.prompt, limits) == [tokenizer.bos_token_id, *prompt[-4:]]


def test_separate_smallest_limits_leave_bos_and_eos(tokenizer):
    encoded = encode_for_training(tokenizer, EXAMPLE, LengthLimits(1, 1, "separate"))
    assert encoded.input_ids == [tokenizer.bos_token_id, tokenizer.eos_token_id]
    assert encoded.labels == [IGNORE_INDEX, tokenizer.eos_token_id]
    with pytest.raises(ValueError, match="must be >= 1"):
        LengthLimits(max_prompt_len=0)
    with pytest.raises(ValueError, match="unknown tokenization 'joint'"):
        LengthLimits(tokenization="joint")


# TRACE's DataCollator, on a SentencePiece-style tokenizer (word-boundary piece at a text's start) and
# on a byte-level BPE. The expected sequences are built by TRACE's rule from the raw tokenizations.

SP_CORPUS = ["Is the stance positive or negative? Answer:", "positive", "negative", "Answer: positive"] * 20


@pytest.fixture(scope="module")
def sentencepiece():
    from tokenizers.implementations import SentencePieceBPETokenizer
    from transformers import PreTrainedTokenizerFast

    backend = SentencePieceBPETokenizer()
    backend.train_from_iterator(SP_CORPUS, vocab_size=60, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend._tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    return prepare_tokenizer(fast)


def pieces(tokenizer, token_ids):
    return tokenizer.convert_ids_to_tokens(token_ids)


def test_trace_tokenization_on_sentencepiece_shifts_the_label_mask_as_trace(sentencepiece):
    tok, stance = sentencepiece, TraceExample("Answer:", "positive")
    # alone the answer is one word-boundary piece; inside the joint string it is two plain pieces
    assert pieces(tok, ids(tok, "positive")) == ["▁positive"]
    assert pieces(tok, ids(tok, "Answer:positive")) == ["▁Answer:", "pos", "itive"]
    trace = encode_for_training(tok, stance)
    assert pieces(tok, trace.input_ids) == ["<s>", "▁Answer:", "pos", "itive", "</s>"]
    # label length = 1 answer piece + EOS = 2: TRACE trains on "itive" and EOS only
    assert trace.labels == [IGNORE_INDEX] * 3 + trace.input_ids[3:]
    separate = encode_for_training(tok, stance, LengthLimits(tokenization="separate"))
    assert pieces(tok, separate.input_ids) == ["<s>", "▁Answer:", "▁positive", "</s>"]
    assert separate.labels == [IGNORE_INDEX] * 2 + separate.input_ids[2:]


def test_trace_tokenization_on_byte_level_bpe(tokenizer):
    # the answer starts a new pre-token: joint and separate tokenisations agree
    trace = encode_for_training(tokenizer, EXAMPLE)
    joint = ids(tokenizer, EXAMPLE.prompt + EXAMPLE.answer)
    assert trace.input_ids == [tokenizer.bos_token_id, *joint, tokenizer.eos_token_id]
    label_len = len(ids(tokenizer, EXAMPLE.answer)) + 1
    assert trace.labels == [IGNORE_INDEX] * (len(joint) + 2 - label_len) + trace.input_ids[-label_len:]
    assert trace == encode_for_training(tokenizer, EXAMPLE, LengthLimits(tokenization="separate"))


def test_trace_truncation_drops_eos_and_bos_at_the_limit(sentencepiece):
    tok = sentencepiece
    example = TraceExample("Is the stance positive or negative? Answer:", "negative")
    joint = ids(tok, example.prompt + example.answer)
    assert len(joint) > 6
    # limit 3 + 3 = 6: the last 6 joint tokens fill it, so neither EOS nor BOS is added
    encoded = encode_for_training(tok, example, LengthLimits(3, 3))
    assert encoded.input_ids == joint[-6:]
    label_len = len(ids(tok, example.answer)) + 1  # the answer alone is shorter than 6: EOS counts
    assert encoded.labels == [IGNORE_INDEX] * (6 - label_len) + joint[-label_len:]
    # a limit one above the joint length leaves room for EOS only
    room = LengthLimits(len(joint), 1)
    assert encode_for_training(tok, example, room).input_ids == [*joint, tok.eos_token_id]
    # generation: the last max_prompt_len prompt tokens, BOS only if that leaves room
    prompt = ids(tok, example.prompt)
    assert encode_prompt(tok, example.prompt, LengthLimits(max_prompt_len=4)) == prompt[-4:]
    assert encode_prompt(tok, example.prompt, LengthLimits(max_prompt_len=len(prompt) + 1)) == [
        tok.bos_token_id,
        *prompt,
    ]


def test_generation_prompt_has_bos_and_no_eos(tokenizer):
    assert encode_prompt(tokenizer, EXAMPLE.prompt) == [tokenizer.bos_token_id, *ids(tokenizer, EXAMPLE.prompt)]


def test_prepare_tokenizer_pads_with_eos_when_there_is_no_pad():
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    tokenizer.pad_token = None
    prepare_tokenizer(tokenizer)
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    assert tokenizer.padding_side == tokenizer.truncation_side == "left"


def test_tokenizer_without_bos_is_refused():
    with pytest.raises(ValueError, match="ByT5Tokenizer has no BOS token"):
        prepare_tokenizer(ByT5Tokenizer())


# --- collation ----------------------------------------------------------------------------


def test_left_pad_rounds_up_to_a_multiple():
    assert left_pad([[1, 2, 3], [4]], 0, multiple_of=4).tolist() == [[0, 1, 2, 3], [0, 0, 0, 4]]


def test_training_batch_is_left_padded(tokenizer):
    short = TraceExample("Answer:", "7")
    batch = TrainingCollator(tokenizer)([EXAMPLE, short])
    long_row = encode_for_training(tokenizer, EXAMPLE)
    short_row = encode_for_training(tokenizer, short)
    pad = len(long_row.input_ids) - len(short_row.input_ids)
    assert batch["input_ids"][0].tolist() == long_row.input_ids
    assert batch["input_ids"][1].tolist() == [tokenizer.pad_token_id] * pad + short_row.input_ids
    assert batch["attention_mask"][1].tolist() == [0] * pad + [1] * len(short_row.input_ids)
    assert batch["labels"][1].tolist() == [IGNORE_INDEX] * pad + short_row.labels
    assert batch["input_ids"].dtype == batch["labels"].dtype == torch.long


def test_training_batch_width_is_a_multiple_when_asked(tokenizer):
    batch = TrainingCollator(tokenizer, pad_to_multiple_of=8)([EXAMPLE])
    assert batch["input_ids"].shape[1] % 8 == 0
    assert batch["attention_mask"].sum().item() == len(encode_for_training(tokenizer, EXAMPLE).input_ids)


def test_generation_batch_ends_every_row_with_its_prompt(tokenizer):
    prompts = [EXAMPLE, TraceExample("Answer:", "unused")]
    batch = GenerationCollator(tokenizer, LengthLimits(max_prompt_len=6))(prompts)
    assert set(batch) == {"input_ids", "attention_mask"}
    for row, mask, example in zip(batch["input_ids"], batch["attention_mask"], prompts, strict=True):
        expected = encode_prompt(tokenizer, example.prompt, LengthLimits(max_prompt_len=6))
        assert row[-len(expected) :].tolist() == expected
        assert mask.tolist() == [0] * (len(row) - len(expected)) + [1] * len(expected)
    assert batch["input_ids"].shape[1] == 6
