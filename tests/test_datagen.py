"""Position generation for distillation (nnue_infer.training.datagen, `nnue-infer datagen`)."""

from __future__ import annotations

import json
import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.training import datagen
from nnue_infer.cli import main


@pytest.fixture(scope="module")
def teacher(network):
    return network


@pytest.fixture(scope="module")
def games(data_dir):
    return datagen.read_games(data_dir / "games-dev.jsonl")


@pytest.fixture(scope="module")
def sample(teacher, games, data_dir):
    exclude = datagen.read_exclude(data_dir / "positions-dev.jsonl")
    return datagen.generate(3000, 7, teacher, games, exclude, progress=False), exclude


def test_deterministic_per_seed(teacher, games):
    a = datagen.generate(400, 11, teacher, games, progress=False)
    b = datagen.generate(400, 11, teacher, games, progress=False)
    c = datagen.generate(400, 12, teacher, games, progress=False)
    for key in ("bitboards", "stm", "castling", "ep_square", "value", "source"):
        assert np.array_equal(a[key], b[key]), key
    assert not np.array_equal(a["bitboards"], c["bitboards"])


def test_labels_are_the_teachers_values_from_the_side_to_move(sample, teacher):
    data, _ = sample
    ev = Evaluator(teacher)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(data["value"]), 200, replace=False):
        board = datagen.to_board(data, int(i))
        assert board.is_valid(), board.fen()
        assert ev.evaluate(board) == data["value"][i], board.fen()


def test_positions_distinct_and_cover_phases_sides_checks_rights(sample):
    data, exclude = sample
    keys = {tuple(row) + (s,) for row, s in zip(data["bitboards"].tolist(), data["stm"].tolist())}
    assert len(keys) == len(data["value"]) == 3000
    s = datagen.summary(data)
    assert 0.3 < s["black_to_move"] / 3000 < 0.7
    assert s["with_castling_rights"] > 0 and s["with_legal_en_passant"] > 0
    hist = s["piece_count_histogram"]
    assert min(hist) <= 6 and max(hist) == 32
    boards = [datagen.to_board(data, i) for i in range(3000)]
    assert any(b.is_check() for b in boards)
    assert not {datagen.position_key(b) for b in boards} & exclude
    assert s["by_source"]["perturbation"] > 1000 and s["by_source"]["playout"] > 1000


def test_held_out_games_never_start_an_episode(games):
    starts = {datagen.position_key(b) for b in datagen.game_positions(games, 0.25)}
    held = [g for g in games if datagen.is_held_out(g["id"], 0.25)]
    assert 0.1 * len(games) < len(held) < 0.4 * len(games)
    board = chess.Board(held[0]["start_fen"])
    for uci in held[0]["moves"][:30]:
        board.push_uci(uci)
    assert datagen.position_key(board) not in starts


def test_save_load_round_trip_and_errors(sample, tmp_path):
    data, _ = sample
    path = tmp_path / "pos.npz"
    datagen.save(path, data)
    back = datagen.load_positions(path)
    for key in ("bitboards", "stm", "castling", "ep_square", "value", "source"):
        assert np.array_equal(back[key], data[key]) and back[key].dtype == data[key].dtype
    assert back["meta"]["seed"] == 7 and back["meta"]["format"] == datagen.FORMAT
    bad = dict(data, value=data["value"].astype(np.int16))
    with pytest.raises(datagen.DatasetFormatError, match="'value'"):
        datagen.save(tmp_path / "bad.npz", bad)
    short = {k: v for k, v in data.items() if k != "stm"}
    with open(tmp_path / "short.npz", "wb") as f:
        np.savez(f, **short)
    with pytest.raises(datagen.DatasetFormatError, match="'stm' missing"):
        datagen.load_positions(tmp_path / "short.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a positions file"):
        datagen.load_positions(tmp_path / "junk.npz")


def test_bad_arguments(teacher, tmp_path):
    with pytest.raises(ValueError, match="positive"):
        datagen.generate(0, 1, teacher, progress=False)
    with pytest.raises(ValueError, match="fractions"):
        datagen.generate(10, 1, teacher, settings=datagen.GenerationSettings(greedy=1.5), progress=False)
    bad = tmp_path / "games.jsonl"
    bad.write_text('{"id": "x", "start_fen": "8/8/8/8/8/8/8/K6k w - - 0 1", "moves": ["a1a3"]}\n')
    with pytest.raises(ValueError, match="game x: ply 1: illegal move a1a3"):
        datagen.generate(10, 1, teacher, datagen.read_games(bad), progress=False,
                         settings=datagen.GenerationSettings(holdout_fraction=0.0))


def test_cli_datagen(tmp_path, capsys):
    out = tmp_path / "cli.npz"
    assert main(["datagen", "-o", str(out), "-n", "300", "--seed", "5", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["positions"] == 300 and report["by_source"]["playout"] == 300
    assert len(datagen.load_positions(out)["value"]) == 300
    assert main(["datagen", "-o", str(out), "-n", "0"]) != 0


def test_random_opening_stops_at_mate():
    """Regression: a random opening that mates (Fool's mate) used to crash the generator."""
    import random

    board = chess.Board()
    for uci in ("f2f3", "e7e5", "g2g4", "d8h4"):
        board.push_uci(uci)
    datagen.random_plies(board, random.Random(0), 6)
    assert board.is_checkmate() and board.ply() == 4
    datagen.random_plies(chess.Board(), random.Random(0), 3)  # ordinary case still plays


def test_concatenate_keeps_order_and_provenance(teacher, tmp_path):
    a = datagen.generate(50, 1, teacher, progress=False)
    b = datagen.generate(30, 2, teacher, progress=False)
    for name, d in (("a", a), ("b", b)):
        datagen.save(tmp_path / f"{name}.npz", d)
    parts = [datagen.load_positions(tmp_path / "a.npz"), datagen.load_positions(tmp_path / "b.npz")]
    both = datagen.concatenate(parts)
    assert len(both["value"]) == 80 and np.array_equal(both["value"][50:], b["value"])
    assert both["meta"]["seed"] == [1, 2] and len(both["meta"]["parts"]) == 2
    other = dict(parts[1], meta={**parts[1]["meta"], "settings": {"holdout_fraction": 0.5}})
    with pytest.raises(ValueError, match="different shares"):
        datagen.concatenate([parts[0], other])
    with pytest.raises(ValueError, match="no positions files"):
        datagen.concatenate([])


def _children_keys(board: chess.Board) -> set:
    keys = set()
    for move in board.legal_moves:
        board.push(move)
        keys.add(datagen.position_key(board))
        board.pop()
    return keys


def test_children_are_recorded_after_each_visited_position(teacher):
    """``children=3``: the three positions recorded after a playout's first position are children of
    it (then the walk goes on); without children only the next one is."""
    wide = datagen.generate(40, 5, teacher, settings=datagen.GenerationSettings(children=3), progress=False)
    plain = datagen.generate(40, 5, teacher, settings=datagen.GenerationSettings(), progress=False)
    assert json.loads(str(wide["meta"]))["settings"]["children"] == 3
    for data, expected in ((wide, [True, True, True]), (plain, [True, False, False])):
        first = _children_keys(datagen.to_board(data, 0))
        assert [datagen.position_key(datagen.to_board(data, i)) in first for i in (1, 2, 3)] == expected
    with pytest.raises(ValueError, match="children"):
        datagen.generate(10, 1, teacher, settings=datagen.GenerationSettings(children=-1), progress=False)
