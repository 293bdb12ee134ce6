"""TRACE metrics against hand-computed values and published reference examples."""

import pytest

from codyra.trace.metrics import (
    TRACE_TASK_METRICS,
    TRACE_TASKS,
    edit_similarity,
    exact_match_accuracy,
    first_char_accuracy,
    fuzz_ratio,
    prefix_match_accuracy,
    restore_code_literals,
    rouge_l,
    sari,
    score,
    score_task,
)
from codyra.trace.sari import sari_sentence, tokenize_13a

# --- accuracy -----------------------------------------------------------------------------

PREDICTIONS = ["A", "B ", "", " A. support", "12"]
REFERENCES = ["A", "B", "A", "A", "1"]


def test_exact_match_compares_raw_strings():
    # "A"==A: 1; "B " != "B": 0; empty: 0; " A. support" != "A": 0; "12" != "1": 0 -> 1/5
    assert exact_match_accuracy(PREDICTIONS, REFERENCES) == pytest.approx(20.0)


def test_prefix_match_strips_the_prediction_and_keeps_the_reference():
    # "A": 1; "B": 1; empty: 0; "A. support" starts with "A": 1;
    # "12" starts with "1": 1 (TreeLoRA's rule accepts it) -> 4/5
    assert prefix_match_accuracy(PREDICTIONS, REFERENCES) == pytest.approx(80.0)


def test_first_char_accuracy_raw_and_stripped():
    predictions = ["B\nBecause fish swim.", " A", "", "C"]
    references = ["B\nBecause they swim.", "A\nBecause x.", "A", "A\nBecause y."]
    # raw (TRACE): B=B 1; " " != A 0; empty 0; C != A 0 -> 25
    assert first_char_accuracy(predictions, references) == pytest.approx(25.0)
    # stripped (TreeLoRA): 1, 1, 0, 0 -> 50
    assert first_char_accuracy(predictions, references, strip=True) == pytest.approx(50.0)


def test_whitespace_only_predictions_score_zero_in_accuracy_and_rouge():
    blank = ["  "]
    assert prefix_match_accuracy(blank, ["A"]) == 0.0
    assert first_char_accuracy(blank, [" "], strip=False) == 0.0
    assert rouge_l(blank, ["a b"]) == 0.0


def test_empty_prediction_sari_follows_trace():
    # TRACE passes "" to HF's sari: source "a b c", reference "a b". Per n-gram order (keep F1, delete
    # precision, add F1): n=1: kept nothing but a, b were keepable -> 0; deleted a, b, c, only c
    # correctly -> 1/3; added the empty token, nothing addable -> 0. n=2: 0, 1/2 (bc of ab, bc), 1.
    # n=3: 1, 1 (abc deleted, absent from the reference), 1. n=4: 1, 1, 1 (nothing anywhere: 0/0 = 1).
    # (keep 2 + delete 17/6 + add 3) / 12 = 47/72.
    assert sari([""], ["a b"], ["a b c"]) == pytest.approx(100 * 47 / 72)
    assert sari(["  "], ["a b"], ["a b c"]) == pytest.approx(100 * 47 / 72)  # 13a-tokenises to ""


def test_length_mismatch_and_empty_inputs_are_errors():
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        exact_match_accuracy(["A", "B"], ["A"])
    with pytest.raises(ValueError, match="no predictions"):
        rouge_l([], [])
    with pytest.raises(ValueError, match="1 predictions but 2 sources"):
        sari(["a"], ["a"], ["a", "b"])


# --- ROUGE-L ------------------------------------------------------------------------------


def test_rouge_l_lin_2004_examples():
    # Lin (2004), ROUGE paper, section 3.1: reference "police killed the gunman".
    # S2 "police kill the gunman": LCS "police the gunman" = 3, P = R = 3/4 -> F = 0.75.
    # S3 "the gunman kill police": LCS "the gunman" = 2, P = R = 2/4 -> F = 0.5.
    reference = "police killed the gunman"
    assert rouge_l(["police kill the gunman"], [reference]) == pytest.approx(75.0)
    assert rouge_l(["the gunman kill police"], [reference]) == pytest.approx(50.0)
    assert rouge_l(["police kill the gunman", "the gunman kill police"], [reference] * 2) == pytest.approx(62.5)


def test_rouge_l_rouge_score_readme_example():
    # rouge_score's README pair. Tokens: reference 9, prediction 8 (lowercased, "." dropped).
    # LCS "the quick brown jumps the" = 5: P = 5/8, R = 5/9, F = 2PR/(P+R) = 10/17.
    prediction = "The quick brown dog jumps on the log."
    reference = "The quick brown fox jumps over the lazy dog"
    assert rouge_l([prediction], [reference]) == pytest.approx(100 * 10 / 17)


def test_rouge_l_rouge_score_mode_ignores_case_and_punctuation():
    assert rouge_l(["Police, KILLED the gunman!"], ["police killed the gunman"]) == pytest.approx(100.0)


def test_rouge_l_trace_mode_keeps_case_and_punctuation():
    # Whitespace tokens: "Police," "KILLED" "the" "gunman!" vs "police" "killed" "the"
    # "gunman": only "the" is shared, P = R = 1/4 -> F = 2 (1/16) / (1/2 + 1e-8).
    expected = 100 * 2 * (1 / 16) / (0.5 + 1e-8)
    assert rouge_l(["Police, KILLED the gunman!"], ["police killed the gunman"], mode="trace") == pytest.approx(
        expected, rel=1e-12
    )


def test_rouge_l_trace_mode_counts_distinct_words_per_sentence():
    # "the cat the cat" vs "the cat": rouge_score: LCS 2, P = 2/4, R = 1 -> F = 2/3.
    # trace: distinct words {the, cat} on both sides, union LCS {the, cat}: F ~ 1.
    assert rouge_l(["the cat the cat"], ["the cat"]) == pytest.approx(200 / 3)
    assert rouge_l(["the cat the cat"], ["the cat"], mode="trace") == pytest.approx(100.0, abs=1e-6)
    # Sentences split on ".": "a b. c d" vs "c d. a b": rouge_score LCS 2 of 4 -> 50;
    # trace unions the LCS of each sentence pair: {a, b} + {c, d} = 4 of 4 -> ~100.
    assert rouge_l(["a b. c d"], ["c d. a b"]) == pytest.approx(50.0)
    assert rouge_l(["a b. c d"], ["c d. a b"], mode="trace") == pytest.approx(100.0, abs=1e-6)


def test_rouge_l_trace_mode_scores_a_sentenceless_text_zero():
    assert rouge_l(["..."], ["a b"], mode="trace") == 0.0


def test_rouge_l_unknown_mode():
    with pytest.raises(ValueError, match="unknown ROUGE-L mode"):
        rouge_l(["a"], ["a"], mode="lsum")


# --- SARI ---------------------------------------------------------------------------------


def test_sari_documented_example():
    # The example of HF evaluate's (and datasets') sari metric card: 26.953601953601954.
    sources = ["About 95 species are currently accepted ."]
    predictions = ["About 95 you now get in ."]
    references = [
        [
            "About 95 species are currently known .",
            "About 95 species are now accepted .",
            "95 species are now accepted .",
        ]
    ]
    assert sari(predictions, references, sources) == pytest.approx(26.953601953601954, abs=1e-12)


def test_sari_prediction_equal_to_reference_scores_100():
    # source "a b c", prediction = reference = "a b". n=1: keep {a,b} all correct (P=R=1),
    # delete {c} correct (P=1), nothing added or addable (0/0 = 1). n=2 likewise with {ab}
    # kept and {bc} deleted; n=3: nothing kept or keepable (1), {abc} deleted correctly (1);
    # n=4: every ratio 0/0 = 1. SARI = 1.
    assert sari(["a b"], ["a b"], ["a b c"]) == pytest.approx(100.0)


def test_sari_hand_computed_wrong_addition():
    # source "a b c", prediction "a b d", reference "a b". Keep and delete are perfect for
    # every n (as above). Add: n=1 adds {d}, n=2 {b d}, n=3 {a b d}, none in the reference
    # and nothing addable: P = 0, R = 1 -> F = 0; n=4: 0/0 -> 1.
    # Add average 1/4, SARI = (1 + 1 + 1/4) / 3 = 0.75.
    assert sari(["a b d"], ["a b"], ["a b c"]) == pytest.approx(75.0)


def test_sari_lowercases_and_tokenises_before_comparing():
    assert sari_sentence("A B, C", "a b ,", ["A b,"]) == pytest.approx(sari_sentence("a b , c", "a b ,", ["a b ,"]))


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("Hello, world!", "Hello , world !"),
        ("It costs $3.50, or 1,000 yen.", "It costs $ 3.50 , or 1,000 yen ."),
        ("don't e-mail 5-3", "don't e-mail 5 - 3"),
        ("a &amp; b (c)", "a & b ( c )"),
        ("line-\nbreak\nnext", "linebreak next"),
    ],
)
def test_13a_tokenisation(text, tokens):
    # By mteval-v13a's rules: symbols split, "." and "," split unless between digits,
    # "-" splits after a digit, apostrophes and other hyphens stay.
    assert tokenize_13a(text) == tokens


# --- Py150 edit similarity ----------------------------------------------------------------


def test_restore_code_literals():
    assert restore_code_literals("x = <NUM_LIT> + f ( <STR_LIT> , <CHAR_LIT> )") == "x = 0 + f (  ,  )"
    assert (
        restore_code_literals("print ( <STR_LIT:hello> , <NUM_LIT:42> , <CHAR_LIT:c> )") == "print ( hello , 42 , c )"
    )


def test_edit_similarity_hand_computed():
    # "abcd" vs "abce": 3 matching characters of 8 -> 2 * 3 / 8 = 75 with either backend.
    assert edit_similarity(["abcd"], ["abce"]) == pytest.approx(75.0)
    assert edit_similarity(["abcd"], ["abce"], "levenshtein") == pytest.approx(75.0)
    # placeholders restored on both sides: "x = 0" == "x = 0" -> 100
    assert edit_similarity(["x = 0"], ["x = <NUM_LIT>"]) == pytest.approx(100.0)
    # "<STR_LIT>" restores to "", an empty prediction -> 0; mean of (100, 0) = 50
    assert edit_similarity(["a = <STR_LIT:s>", "<STR_LIT>"], ["a = s", "b"]) == pytest.approx(50.0)


def test_fuzz_ratio_backends_as_fuzzywuzzy():
    # difflib takes the longest block first: "c" (a[0], b[2]), leaving nothing to match -> 2 * 1 / 6 -> 33;
    # Levenshtein's indel ratio finds the LCS "bc" -> 2 * 2 / 6 -> 67
    assert fuzz_ratio("cbc", "bac") == 33
    assert fuzz_ratio("cbc", "bac", "levenshtein") == 67
    # int(round(.)): 1 match in 16 characters = 12.5 -> 12 (Python rounds half to even)
    assert fuzz_ratio("axxxxxxx", "ayyyyyyy") == 12
    assert fuzz_ratio("axxxxxxx", "ayyyyyyy", "levenshtein") == 12
    assert fuzz_ratio("", "") == 100 and fuzz_ratio("a", "") == 0
    # TRACE zeroes only an exactly empty prediction; whitespace is scored: " " vs " x" -> 2 * 1 / 3 -> 67
    assert edit_similarity([" ", ""], [" x", "x"]) == pytest.approx(67 / 2)
    with pytest.raises(ValueError, match="similarity backend"):
        fuzz_ratio("a", "b", "jaro")


# --- task mapping -------------------------------------------------------------------------


def test_trace_task_metrics_in_trace_order():
    assert TRACE_TASKS == (
        "C-STANCE",
        "FOMC",
        "MeetingBank",
        "Py150",
        "ScienceQA",
        "NumGLUE-cm",
        "NumGLUE-ds",
        "20Minuten",
    )
    assert TRACE_TASK_METRICS["ScienceQA"] == "first_char_accuracy"
    assert TRACE_TASK_METRICS["20Minuten"] == "sari"


def test_score_task_dispatches_with_modes():
    assert score_task("FOMC", ["A. dovish"], ["A"]) == 0.0
    assert score_task("FOMC", ["A. dovish"], ["A"], accuracy_mode="prefix") == 100.0
    assert score_task("ScienceQA", [" B\nBecause"], ["B\nBecause"]) == 0.0
    assert score_task("ScienceQA", [" B\nBecause"], ["B\nBecause"], accuracy_mode="prefix") == 100.0
    # trace ROUGE-L: distinct words {The, cat, the} = 3 vs {the, cat} = 2, union LCS
    # {the, cat} = 2: P = 2/3, R = 1 -> F = 2 (2/3) / (2/3 + 1 + 1e-8) = 0.8
    assert score_task("MeetingBank", ["The cat the cat"], ["the cat"], rouge_mode="trace") == pytest.approx(
        100 * 2 * (2 / 3) / (2 / 3 + 1 + 1e-8)
    )
    assert score_task("Py150", ["x = 0"], ["x = <NUM_LIT>"]) == 100.0
    assert score_task("Py150", ["cbc"], ["bac"]) == 33.0
    assert score_task("Py150", ["cbc"], ["bac"], similarity="levenshtein") == 67.0
    assert score_task("20Minuten", ["a b"], ["a b"], ["a b c"]) == pytest.approx(100.0)


def test_score_task_errors():
    with pytest.raises(ValueError, match="needs the sources"):
        score_task("20Minuten", ["a"], ["a"])
    with pytest.raises(ValueError, match="unknown TRACE task 'Py151'"):
        score_task("Py151", ["a"], ["a"])
    with pytest.raises(ValueError, match="unknown accuracy mode 'fuzzy'"):
        score_task("Py150", ["a"], ["a"], accuracy_mode="fuzzy")
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        score("bleu", ["a"], ["a"])
