"""Training positions from the teacher's self-play (nnue_infer.training.selfplay, `nnue-infer datagen --selfplay`)."""

from __future__ import annotations

import json

import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.cli import main
from nnue_infer.training import datagen, selfplay, walk

SMALL = selfplay.SelfPlaySettings(games=24)


@pytest.fixture(scope="module")
def sample(network):
    return selfplay.generate(600, 5, network, settings=SMALL, progress=False)


def test_expand_gives_python_chess_children(data_dir):
    """Every child of ``expand`` (bitboards, side to move, castling rights, en passant square, its
    legality, halfmove clock) equals python-chess's ``push`` of the legal move, in ``legal_moves``
    order, for a batch of game positions (castling, en passant, promotions, checks, mates)."""
    from nnue_infer.kernels.chess.movegen import MAX_MOVES

    boards = datagen.game_positions(datagen.read_games(data_dir / "games-dev.jsonl")[:5], 0.0)
    boards += [chess.Board(f) for f in ("r3k2r/ppp2ppp/8/3pP3/1b6/8/PPPP1PPP/R3K2R w KQkq d6 0 1",
                                        "r3k2r/pp3ppp/3p4/8/1bP5/8/PP1P1PPP/R3K2R b KQkq c3 0 3",
                                        "7k/1P6/8/8/8/8/6p1/K7 w - - 12 60", "7k/6Q1/6K1/8/8/8/8/8 b - - 0 1")]
    bb, stm, castling, ep = datagen._start_arrays(boards)
    halfmove = np.array([b.halfmove_clock for b in boards], np.int64)
    G, M = len(boards), len(boards) * MAX_MOVES
    offsets = np.empty(G + 1, np.int64)
    c_bb, c_stm, c_castling, c_ep, c_half, c_legal = (np.empty((M, 8), np.int64), np.empty(M, np.uint8),
                                                      np.empty(M, np.int64), np.empty(M, np.int64),
                                                      np.empty(M, np.int64), np.empty(M, np.uint8))
    m = walk.expand(bb, stm, castling, ep, halfmove, offsets, c_bb, c_stm, c_castling, c_ep, c_half, c_legal)
    assert m == offsets[-1] == sum(b.legal_moves.count() for b in boards)
    legal_ep = 0
    for g, board in enumerate(boards):
        assert offsets[g + 1] - offsets[g] == board.legal_moves.count(), board.fen()
        for r, move in zip(range(offsets[g], offsets[g + 1]), board.legal_moves):
            child = board.copy(stack=False)
            child.push(move)
            want_bb, want_stm, want_castling, want_ep = (a[0] for a in datagen._start_arrays([child]))
            assert (c_bb[r] == want_bb).all() and c_stm[r] == want_stm, (board.fen(), move)
            assert c_castling[r] == want_castling and c_ep[r] == want_ep, (board.fen(), move)
            assert c_half[r] == child.halfmove_clock and bool(c_legal[r]) == child.has_legal_en_passant()
            legal_ep += child.has_legal_en_passant()
    assert legal_ep > 0


def test_choose_draws_from_the_softmax_of_the_movers_values():
    rng = np.random.SeedSequence([0, 3]).generate_state(1, np.uint64)
    values = np.array([30.0, 0.0, 60.0, np.inf, 5.0, np.inf, np.inf])
    offsets = np.array([0, 3, 5, 5, 7])  # state 2 has no children, state 3 only forbidden ones
    picks = np.empty(4, np.int64)
    walk.choose(values, offsets, np.full(4, 1e-6), rng, picks)
    assert picks.tolist() == [1, 4, -1, -1]
    temperature = np.full(4, 30.0)
    counts = np.zeros(7)
    for _ in range(20000):
        walk.choose(values, offsets, temperature, rng, picks)
        counts[picks[:2]] += 1
    want = np.exp(-values[:3] / 30.0) / np.exp(-values[:3] / 30.0).sum()
    assert np.abs(counts[:3] / 20000 - want).max() < 0.015
    assert counts[4] == 20000 and counts[3] == 0


def test_sample_children_are_distinct_and_not_the_pick():
    rng = np.random.SeedSequence([1, 3]).generate_state(1, np.uint64)
    offsets = np.array([0, 5, 6, 6, 9])
    picks = np.array([2, 5, -1, 7])
    out = np.empty(8, np.int64)
    k = walk.sample_children(offsets, picks, 2, rng, out)
    assert k == 4  # 2 of state 0, none of state 1 (only its pick), none of state 2, 2 of state 3
    assert set(out[:2]) <= {0, 1, 3, 4} and len(set(out[:2])) == 2
    assert set(out[2:4]) == {6, 8}


def test_positions_are_valid_distinct_and_labelled_by_the_teacher(sample, network):
    ev = Evaluator(network)
    keys = {tuple(row) + (s,) for row, s in zip(sample["bitboards"].tolist(), sample["stm"].tolist())}
    assert len(keys) == len(sample["value"]) == 600
    assert (sample["source"] == selfplay.SOURCE_SELFPLAY).all()
    for i in range(0, 600, 3):
        board = datagen.to_board(sample, i)
        assert board.is_valid(), board.fen()
        assert board.castling_rights == board.clean_castling_rights()
        assert (sample["ep_square"][i] >= 0) == board.has_legal_en_passant()
        assert ev.evaluate(board) == sample["value"][i], board.fen()
    meta = json.loads(str(sample["meta"]))
    assert meta["generator"] == selfplay.GENERATOR and meta["settings"]["games"] == 24
    assert datagen.summary(sample)["by_source"]["selfplay"] == 600


def test_deterministic_per_seed_and_excludes(sample, network):
    again = selfplay.generate(600, 5, network, settings=SMALL, progress=False)
    for key in ("bitboards", "stm", "castling", "ep_square", "value", "source"):
        assert np.array_equal(again[key], sample[key]), key
    other = selfplay.generate(600, 6, network, settings=SMALL, progress=False)
    assert not np.array_equal(other["bitboards"], sample["bitboards"])
    banned = {datagen.position_key(datagen.to_board(sample, i)) for i in range(0, 600, 2)}
    without = selfplay.generate(600, 5, network, banned, settings=SMALL, progress=False)
    got = {datagen.position_key(datagen.to_board(without, i)) for i in range(600)}
    assert not got & banned


def test_bad_settings_and_cli(network, tmp_path, capsys):
    with pytest.raises(ValueError, match="positive"):
        selfplay.generate(0, 1, network, progress=False)
    with pytest.raises(ValueError, match="temperatures"):
        selfplay.generate(10, 1, network, settings=selfplay.SelfPlaySettings(temperature_cp=0.0), progress=False)
    out = tmp_path / "sp.npz"
    assert main(["datagen", "--selfplay", "-o", str(out), "-n", "200", "--seed", "2", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["positions"] == 200 and report["by_source"]["selfplay"] == 200
    both = datagen.concatenate([datagen.load_positions(out), datagen.load_positions(out)])
    assert len(both["value"]) == 400
    assert main(["datagen", "--selfplay", "-o", str(out), "-n", "0"]) != 0


def test_games_start_a_share_of_the_games(network, data_dir):
    """With games, about ``start_fraction`` of the games begin at one of their positions: with 1.0 and
    no opening, every game's first recorded position is a child of a game position."""
    games = datagen.read_games(data_dir / "games-dev.jsonl")[:3]
    settings = selfplay.SelfPlaySettings(games=8, start_fraction=1.0, opening_plies=0, children=0,
                                         keep_decay_cp=float("inf"), holdout_fraction=0.0)
    data = selfplay.generate(8, 3, network, settings=settings, progress=False, games=games)
    children = set()
    for board in datagen.game_positions(games, 0.0):
        for move in board.legal_moves:
            child = board.copy(stack=False)
            child.push(move)
            children.add(datagen.position_key(child))
    assert all(datagen.position_key(datagen.to_board(data, i)) in children for i in range(8))
    with pytest.raises(ValueError, match="held out"):
        selfplay.generate(8, 3, network, settings=selfplay.SelfPlaySettings(holdout_fraction=0.99999),
                          progress=False, games=games[:1])


def test_random_endgames_are_valid_and_varied(network):
    rng = np.random.SeedSequence([2, 3]).generate_state(1, np.uint64)
    boards = [selfplay.random_endgame(rng, 4) for _ in range(300)]
    assert all(b.is_valid() and not b.castling_rights and b.ep_square is None for b in boards)
    counts = {len(b.piece_map()) for b in boards}
    assert counts == {3, 4, 5, 6}
    assert {b.turn for b in boards} == {chess.WHITE, chess.BLACK}
    assert any(b.pawns for b in boards) and any(b.queens for b in boards)
    settings = selfplay.SelfPlaySettings(games=16, start_fraction=0.0, endgame_fraction=1.0, endgame_pieces=4,
                                         keep_decay_cp=float("inf"))
    data = selfplay.generate(200, 1, network, settings=settings, progress=False)
    pieces = [len(datagen.to_board(data, i).piece_map()) for i in range(200)]
    assert max(pieces) <= 6
    with pytest.raises(ValueError, match="endgame_fraction"):
        selfplay.generate(10, 1, network, settings=selfplay.SelfPlaySettings(endgame_fraction=0.6), progress=False,
                          games=[{"id": "x", "start_fen": chess.STARTING_FEN, "moves": []}])


@pytest.mark.parametrize("args, message", [
    (["--selfplay", "--endgame-fraction", "nan"], "Invalid value for '--endgame-fraction': 'nan' is not a finite number"),
    (["--selfplay", "--perturbation-fraction", "0.7"], "--perturbation-fraction applies without --selfplay only"),
])
def test_datagen_options_refused_before_any_work(tmp_path, capsys, args, message):
    """A NaN endgame share printed the settings' repr (status 1); a perturbation share with --selfplay was
    ignored silently: both are usage errors now, and no file is written."""
    from nnue_infer.cli import main

    out = tmp_path / "x.npz"
    assert main(["datagen", "-o", str(out), "-n", "10", *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
