"""Engine-made training data (nnue_infer.training.searchplay, ``datagen --search``) and the data
set's de-duplication (nnue_infer.training.positionset): deterministic per seed, no position twice
across chunks, Stockfish ``.binpack`` that reads back with the teacher's scores and consistent
game results, every position and move legal by python-chess, and ``train``'s reader of it."""

from __future__ import annotations

import json

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer import Evaluator
from nnue_infer.cli import main
from nnue_infer.io.training_data import read, write
from nnue_infer.training import datagen, searchplay
from nnue_infer.training.positionset import PositionSet, first_occurrences, position_hashes

NODES = 48  # small searches: the tests check the data's form, not its quality
SETTINGS = searchplay.SearchPlaySettings(nodes=NODES, max_game_plies=60)


@pytest.fixture(scope="module")
def teacher():
    return nnue_infer.stockfish_15_1_network()


@pytest.fixture(scope="module")
def games(data_dir):
    return datagen.read_games(data_dir / "games-dev.jsonl")[:40]


@pytest.fixture(scope="module")
def chunk(teacher, games):
    return searchplay.generate(300, 11, teacher, games=games, settings=SETTINGS, progress=False)


def test_position_hashes_tell_placement_and_side_to_move_apart():
    a, b = chess.Board(), chess.Board()
    b.turn = chess.BLACK
    c = chess.Board()
    c.castling_rights = 0  # castling rights are not a network input: same position
    rows = [[x.pawns, x.knights, x.bishops, x.rooks, x.queens, x.kings, x.occupied_co[chess.WHITE],
             x.occupied_co[chess.BLACK]] for x in (a, b, c)]
    h = position_hashes(np.array(rows, np.uint64).view(np.int64), np.array([0, 1, 0], np.uint8))
    assert h[0] != h[1] and h[0] == h[2]
    assert first_occurrences(h).tolist() == [True, True, False]
    with pytest.raises(ValueError, match=r"\[n, 8\]"):
        position_hashes(np.zeros((3, 7), np.int64), np.zeros(3, np.uint8))


def test_position_set_saves_and_loads(tmp_path):
    s = PositionSet(np.array([5, 3, 5], np.uint64))
    assert len(s) == 2 and s.contains(np.array([3, 4], np.uint64)).tolist() == [True, False]
    assert s.new_rows(np.array([4, 4, 3, 6], np.uint64)).tolist() == [True, False, False, True]
    s.add(np.array([4], np.uint64))
    s.save(tmp_path / "s.npy")
    assert PositionSet.load(tmp_path / "s.npy").contains(np.array([3, 4, 5, 6], np.uint64)).tolist() == [True] * 3 + [False]
    np.save(tmp_path / "bad.npy", np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="bad.npy"):
        PositionSet.load(tmp_path / "bad.npy")


def test_search_games_are_deterministic_per_seed(teacher, games, chunk):
    again, summary = searchplay.generate(300, 11, teacher, games=games, settings=SETTINGS, progress=False)
    assert again.equals(chunk[0]) and summary == chunk[1]
    other, _ = searchplay.generate(300, 12, teacher, games=games, settings=SETTINGS, progress=False)
    assert not np.array_equal(other.bitboards, chunk[0].bitboards)


def test_no_position_twice_across_chunks(teacher, games):
    seen = PositionSet()
    a, sa = searchplay.generate(200, 21, teacher, games=games, seen=seen, settings=SETTINGS, progress=False)
    b, _ = searchplay.generate(200, 21, teacher, games=games, seen=seen, settings=SETTINGS, progress=False,
                               first_game=sa["next_game"])
    ha, hb = position_hashes(a.bitboards, a.stm), position_hashes(b.bitboards, b.stm)
    assert len(np.unique(ha)) == 200 and len(np.unique(hb)) == 200 and not np.isin(ha, hb).any()
    assert len(seen) == 400 and seen.contains(np.concatenate([ha, hb])).all()
    # the same seed and games again, but with the first chunk's positions excluded: none of them comes back
    c, _ = searchplay.generate(200, 21, teacher, games=games, seen=PositionSet(ha), settings=SETTINGS, progress=False)
    assert not np.isin(position_hashes(c.bitboards, c.stm), ha).any()


def test_binpack_reads_back_with_the_teachers_scores_and_consistent_results(tmp_path, teacher, chunk):
    data, summary = chunk
    path = tmp_path / "games.binpack"
    write(data, path)
    back = read(path)
    assert back.equals(data, chains=False) and len(back) == 300
    fens = back.fens()
    assert back.score.tolist() == Evaluator(teacher).evaluate_batch(fens).tolist()  # label "teacher"
    assert set(np.unique(back.result).tolist()) <= {-1, 0, 1}
    cont = back.continuations()  # consecutive plies of one game: the result flips with the side to move
    assert cont.sum() > 200
    assert (back.result[1:][cont[1:]] == -back.result[:-1][cont[1:]]).all()
    decisive = summary["results"]["1-0"] + summary["results"]["0-1"]
    assert (back.result != 0).any() == (decisive > 0)
    loaded = datagen.load_training_positions(path)  # what nnue-infer train reads
    assert loaded["value"].tolist() == back.score.astype(np.int32).tolist()
    assert [datagen.to_board(loaded, i).board_fen() for i in range(5)] == [f.split()[0] for f in fens[:5]]


def test_every_position_and_move_is_legal(chunk):
    data, _ = chunk
    for fen, uci in zip(data.fens(), data.uci()):
        board = chess.Board(fen)
        assert board.is_valid(), fen
        board.parse_uci(uci)  # raises IllegalMoveError (castling is written king-takes-rook: parse_uci accepts it)


def test_game_results_at_the_end_of_the_game(teacher):
    from nnue_infer.search import Engine

    engine = Engine(teacher, hash_mb=1)
    mate_in_one = chess.Board("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1")
    rows, white = searchplay.play_game(engine, mate_in_one, SETTINGS, 361.0)
    assert white == 1.0 and len(rows) == 1
    assert chess.Move.from_uci("a1a8") == chess.Move(rows[0][6] >> 8 & 63, rows[0][6] >> 2 & 63)
    stalemate = chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")
    assert searchplay.play_game(engine, stalemate, SETTINGS, 361.0) == ([], 0.5)
    bare_kings = chess.Board("8/8/4k3/8/8/3K4/8/8 w - - 0 1")
    assert searchplay.play_game(engine, bare_kings, SETTINGS, 361.0) == ([], 0.5)


def test_compressed_moves_match_the_tools_layout():
    board = chess.Board("r3k2r/pPpp1ppp/8/3Pp3/8/8/PPPPPPPP/R3K2R w KQkq e6 0 1")
    assert searchplay.compress_move(board, chess.Move.from_uci("e1g1")) == (2 << 14) | (4 << 8) | (7 << 2)
    assert searchplay.compress_move(board, chess.Move.from_uci("e1c1")) == (2 << 14) | (4 << 8) | (0 << 2)
    assert searchplay.compress_move(board, chess.Move.from_uci("d5e6")) == (3 << 14) | (35 << 8) | (44 << 2)
    assert searchplay.compress_move(board, chess.Move.from_uci("b7a8q")) == (1 << 14) | (49 << 8) | (56 << 2) | 3


def test_bad_settings_are_named(teacher):
    with pytest.raises(ValueError, match=r"nodes = 0.*label = 'x'"):
        searchplay.generate(10, 1, teacher, settings=searchplay.SearchPlaySettings(nodes=0, label="x"), progress=False)


def test_cli_search_datagen_writes_binpack_and_extends_the_dedup_set(tmp_path, capsys, data_dir):
    seen = tmp_path / "seen.npy"
    for i in range(2):
        out = tmp_path / f"chunk{i}.binpack"
        assert main(["datagen", "--search", "--nodes", str(NODES), "-o", str(out), "-n", "120", "--seed", "3",
                     "--dedup-set", str(seen), "--quiet"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["positions"] == 120 and report["dedup_set_size"] == 120 * (i + 1)
    a, b = read(tmp_path / "chunk0.binpack"), read(tmp_path / "chunk1.binpack")
    assert not np.isin(position_hashes(a.bitboards, a.stm), position_hashes(b.bitboards, b.stm)).any()
    assert main(["datagen", "--search", "-o", str(tmp_path / "x.npz"), "-n", "10"]) == 2
    assert ".binpack" in capsys.readouterr().err
    assert main(["datagen", "--nodes", "5", "-o", str(tmp_path / "x.npz"), "-n", "10"]) == 2
    assert "--nodes applies to --search only" in capsys.readouterr().err


def test_train_reads_the_binpack(tmp_path, capsys, chunk):
    pytest.importorskip("torch")
    path = tmp_path / "games.binpack"
    write(chunk[0], path)
    assert main(["train", str(path), "-o", str(tmp_path / "run"), "--epochs", "1", "--ft-width", "8", "--quiet"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["positions"] == 300 and summary["data"] == [str(path)]
    assert summary["data_meta"]["training_data"] == str(path)
