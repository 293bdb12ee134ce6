"""codyra.evaluation.metrics on hand-computed matrices."""

from __future__ import annotations

import pytest

from codyra.evaluation import metrics

# rows: pretrained, after task 1, 2, 3; columns: tasks 1, 2, 3
A = [
    [10.0, 20.0, 30.0],
    [50.0, 22.0, 28.0],
    [40.0, 60.0, 26.0],
    [35.0, 55.0, 70.0],
]


def test_summarize_hand_computed():
    s = metrics.summarize(A)
    # Transfer_j = mean of rows 1..j-1 in column j: j=2 -> 22; j=3 -> (28 + 26) / 2 = 27
    assert s["per_task"]["transfer"] == [None, 22.0, 27.0]
    assert s["transfer"] == pytest.approx(24.5)
    # Avg_j = mean of rows 1..3: (50+40+35)/3, (22+60+55)/3, (28+26+70)/3
    assert s["per_task"]["average"] == pytest.approx([125 / 3, 137 / 3, 124 / 3])
    assert s["average"] == pytest.approx((125 + 137 + 124) / 9)
    assert s["per_task"]["last"] == [35.0, 55.0, 70.0]
    assert s["last"] == pytest.approx(160 / 3)
    # Forgetting = ((50 - 35) + (60 - 55)) / 2 = 10
    assert s["forgetting"] == pytest.approx(10.0)
    # BWT = (min(35-50, 0) + min(55-60, 0) + min(70-70, 0)) / 3 = -20/3
    assert s["bwt"] == pytest.approx(-20 / 3)
    assert s["op"] == pytest.approx(160 / 3)
    assert s["zero_shot"] == [10.0, 20.0, 30.0]


def test_bwt_clips_positive_backward_transfer_and_forgetting_does_not():
    B = [[0, 0], [40, 0], [50, 70]]  # task 1 improves after task 2
    assert metrics.bwt(B) == 0.0
    assert metrics.forgetting(B) == pytest.approx(-10.0)


def test_single_task_has_no_transfer_and_no_forgetting():
    s = metrics.summarize([[30.0], [80.0]])
    assert s["per_task"]["transfer"] == [None]
    assert s["transfer"] is None and s["forgetting"] is None
    assert s["average"] == s["last"] == s["op"] == 80.0
    assert s["bwt"] == 0.0


def test_square_matrix_is_accepted_where_row0_is_not_needed():
    square = [row for row in A[1:]]
    assert metrics.overall_performance(square) == metrics.overall_performance(A)
    assert metrics.forgetting(square) == metrics.forgetting(A)


@pytest.mark.parametrize("bad", [[[1.0, 2.0]], [[1, 2], [3, 4], [5, 6], [7, 8]], [1, 2, 3]])
def test_malformed_matrix_is_rejected(bad):
    with pytest.raises(ValueError, match="matrix"):
        metrics.summarize(bad)
