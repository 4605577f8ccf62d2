"""Agreement figures of a student network with its teacher (nnue_infer.training.distil)."""

from __future__ import annotations

import numpy as np
import pytest

from nnue_infer.training import distil


def test_agreement_figures_by_hand():
    teacher = np.array([0.0, 50.0, -150.0, 300.0, 1200.0, -2000.0])
    student = np.array([10.0, 40.0, 20.0, 320.0, 900.0, -1500.0])
    a = distil.agreement(student, teacher)
    # window |teacher| <= 1000: errors 10, 10, 170, 20 -> mean 52.5
    assert a["mae_cp"] == pytest.approx(52.5) and a["mae_positions"] == 4
    # |teacher| >= 100: -150/20 disagree, 300/320, 1200/900, -2000/-1500 agree -> 3/4
    assert a["sign_agreement"] == pytest.approx(0.75) and a["sign_positions"] == 4
    assert a["correlation"] == pytest.approx(np.corrcoef(student[:4], teacher[:4])[0, 1])
    assert a["mae_all_cp"] == pytest.approx((10 + 10 + 170 + 20 + 300 + 500) / 6)
    with pytest.raises(ValueError, match="shape"):
        distil.agreement(student[:3], teacher)


def test_teacher_agrees_with_itself_on_the_dev_corpus(network, data_dir):
    """Stockfish 15.1's network measured against the corpus's recorded values: perfect figures."""
    corpus = distil.read_corpus(data_dir / "positions-dev.jsonl")
    acc = distil.corpus_accuracy(network, corpus, holdout_fraction=0.25)
    assert acc["all"]["positions"] == 3298
    assert acc["all"]["mae_cp"] == 0 and acc["all"]["sign_agreement"] == 1 and acc["all"]["correlation"] == pytest.approx(1)
    assert 500 < acc["held_out"]["positions"] < 3298


def test_read_corpus_names_the_bad_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"fen": "8/8/8/8/8/8/8/K6k w - - 0 1", "raw": {"value": 3}}\n{"fen": "8/8/8/8/8/8/8/K6k w - - 0 1"}\n')
    with pytest.raises(ValueError, match="line 2"):
        distil.read_corpus(path)
