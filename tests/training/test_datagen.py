"""Position generation for distillation (nnue_infer.training.datagen, `nnue-infer datagen`)."""

from __future__ import annotations

import json
import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.training import datagen
from nnue_infer.cli import main
import nnue_infer
from nnue_infer.io.training_data import read, write
from nnue_infer.training import datagen, searchplay
from nnue_infer.training.positionset import PositionSet, first_occurrences, position_hashes


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
    with pytest.raises(ValueError, match=r"settings: greedy = 1.5: need 0 \.\. 1$"):
        datagen.generate(10, 1, teacher, settings=datagen.GenerationSettings(greedy=1.5), progress=False)
    with pytest.raises(ValueError, match=r"settings: perturbation_fraction = nan: need 0 \.\. 1; keep_decay_cp = 0"):
        datagen.generate(10, 1, teacher, progress=False,
                         settings=datagen.GenerationSettings(perturbation_fraction=float("nan"), keep_decay_cp=0))
    with pytest.raises(ValueError, match="seed = -1: need >= 0"):
        datagen.generate(10, -1, teacher, progress=False)
    bad = tmp_path / "games.jsonl"
    bad.write_text('{"id": "x", "start_fen": "8/8/8/8/8/8/8/K6k w - - 0 1", "moves": ["a1a3"]}\n')
    with pytest.raises(ValueError, match=f"{bad}: line 1: game x: ply 1: illegal move a1a3"):
        datagen.generate(10, 1, teacher, datagen.read_games(bad), progress=False,
                         settings=datagen.GenerationSettings(holdout_fraction=0.0))
    start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
    for fen, message in ((start.replace(" w ", " x "), "bad start_fen"),
                         ("8/8/8/8/8/8/8/K7 w - - 0 1",
                          "start_fen '8/8/8/8/8/8/8/K7 w - - 0 1' is not a legal position \\(no black king\\)")):
        bad.write_text(f'{{"id": "g1", "start_fen": "{start}", "moves": ["e2e4"]}}\n'
                       f'{{"id": "g2", "start_fen": "{fen}", "moves": []}}\n')
        with pytest.raises(ValueError, match=f"{bad}: line 2: game g2: {message}"):
            datagen.generate(10, 1, teacher, datagen.read_games(bad), progress=False,
                             settings=datagen.GenerationSettings(holdout_fraction=0.0))


@pytest.mark.parametrize("option,value", [("--perturbation-fraction", "-1"), ("--perturbation-fraction", "nan"),
                                          ("--holdout-fraction", "1"), ("--endgame-fraction", "nan"),
                                          ("--seed", "-1"), ("--seed", str(2**64))])
def test_cli_datagen_names_the_bad_option(tmp_path, capsys, option, value):
    """A bad value is a usage error naming its option, before any work (was exit 1 with the whole
    settings' repr naming another field, or NumPy's bare 'expected non-negative integer': hostile pass)."""
    status = main(["datagen", "-o", str(tmp_path / "d.npz"), "-n", "10", option, value])
    err = capsys.readouterr().err
    assert status == 2 and f"Invalid value for '{option}'" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_cli_datagen(tmp_path, capsys):
    out = tmp_path / "cli.npz"
    assert main(["datagen", "-o", str(out), "-n", "300", "--seed", "5", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["positions"] == 300 and report["by_source"]["playout"] == 300
    assert len(datagen.load_positions(out)["value"]) == 300
    assert main(["datagen", "-o", str(out), "-n", "0"]) != 0


def _fields(board: chess.Board) -> str:
    """Placement, side to move, castling rights and legal en passant square: what a positions file keeps."""
    return " ".join(board.fen().split()[:4])


def _within(boards: list[chess.Board], plies: int) -> set:
    """:func:`_fields` of every position at most ``plies`` legal moves (python-chess) from ``boards``."""
    seen, frontier = set(), [b.copy(stack=False) for b in boards]
    for depth in range(plies + 1):
        nxt = []
        for board in frontier:
            seen.add(_fields(board))
            if depth < plies:
                for move in board.legal_moves:
                    child = board.copy(stack=False)
                    child.push(move)
                    nxt.append(child)
        frontier = nxt
    return seen


#: A game whose positions have castling rights on both sides, a legal en passant capture (after
#: 3. c4) and one that a pin forbids (e.p. square without a legal capture), checks near.
_GAME = {"id": "walk", "start_fen": "r3k2r/ppp2ppp/8/3pP3/1b6/8/PPPP1PPP/R3K2R w KQkq d6 0 1",
         "moves": ["e5d6", "c7d6", "c2c4"]}


@pytest.mark.parametrize("max_walk, children", [(2, 0), (1, 2)])
def test_perturbation_positions_are_legal_moves_from_game_positions(teacher, max_walk, children):
    """Every position of perturbation episodes of depth <= 2 (a random move, then a policy move or
    recorded children) is reachable by python-chess's legal moves from a game position, with the same
    castling rights and legal en passant square, and starts and both depths occur."""
    s = datagen.GenerationSettings(perturbation_fraction=1.0, max_walk=max_walk, children=children,
                                   holdout_fraction=0.0, keep_decay_cp=float("inf"))
    data = datagen.generate(150, 3, teacher, [_GAME], settings=s, progress=False)
    starts = datagen.game_positions([_GAME], 0.0)
    reach = [_within(starts, k) for k in range(3)]
    depth = [next(k for k in range(3) if _fields(datagen.to_board(data, i)) in reach[k]) if _fields(
        datagen.to_board(data, i)) in reach[2] else None for i in range(len(data["value"]))]
    assert None not in depth, datagen.to_board(data, depth.index(None)).fen()
    assert set(depth) == {0, 1, 2}
    assert (data["source"] == datagen.SOURCE_PERTURBATION).all()
    assert (data["ep_square"] >= 0).any()


def test_playout_positions_are_legal_moves_from_the_start():
    """Playouts with a 2-ply random opening and no policy moves (``max_game_plies = 2``): every
    position is 2 or 3 plies (its recorded child) from the standard position per python-chess."""
    import nnue_infer

    s = datagen.GenerationSettings(opening_plies=2, max_game_plies=2, children=1, keep_decay_cp=float("inf"))
    data = datagen.generate(300, 4, nnue_infer.stockfish_15_1_network(), settings=s, progress=False)
    two, three = _within([chess.Board()], 2), _within([chess.Board()], 3) - _within([chess.Board()], 2)
    fields = [_fields(datagen.to_board(data, i)) for i in range(len(data["value"]))]
    assert all(f in two or f in three for f in fields)
    assert sum(f in two for f in fields) > 100 and sum(f in three for f in fields) > 100


def test_walk_step_and_game_end_follow_python_chess(games):
    """The compiled walk's move (``step``: castling rights, en passant square, halfmove clock) and
    insufficient-material rule equal python-chess's ``push`` / ``is_insufficient_material`` for
    every legal move of positions of the dev games, plus bare endings."""
    from nnue_infer.kernels.chess.movegen import MAX_MOVES, legal_moves
    from nnue_infer.training import walk

    boards = datagen.game_positions(games[:6], 0.0)
    boards += [chess.Board(f) for f in ("8/8/8/4k3/8/8/4K3/4B3 w - - 0 1", "8/8/8/4k3/8/8/2b1K3/4B3 w - - 0 1",
                                        "8/8/8/4k3/8/8/3bK3/4B3 w - - 0 1", "8/8/8/4k3/8/8/3nK3/4N3 w - - 0 1",
                                        "8/8/8/4k3/8/8/4K3/4N3 b - - 99 80", "8/8/8/4k3/8/3q4/4K3/4N3 w - - 7 60")]
    moves = np.empty(MAX_MOVES, np.uint16)
    out = np.empty(8, np.int64)
    checked = 0
    for board in boards:
        bb, stm, castling, ep = (a[0] for a in datagen._start_arrays([board]))
        assert walk.insufficient_material(bb) == board.is_insufficient_material(), board.fen()
        n = legal_moves(bb, int(stm), castling, ep, False, moves)
        assert n == board.legal_moves.count()
        for code in moves[:n].tolist():
            child = board.copy(stack=False)
            child.push(chess.Move(code & 63, (code >> 6) & 63, (code >> 12) or None))
            c_castling, c_ep, clock = walk.step(bb, int(stm), castling, ep, board.halfmove_clock, code, out)
            want_bb, _, want_castling, want_ep = (a[0] for a in datagen._start_arrays([child]))
            assert (out == want_bb).all() and c_castling == want_castling, (board.fen(), code)
            assert c_ep == want_ep and clock == child.halfmove_clock, (board.fen(), code)
            checked += 1
    assert checked > 5000


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


def test_playout_policy_takes_free_material_and_shuns_losing_it():
    """``greedy = 1``: the policy takes a hanging queen, not the guarded pawn that costs its rook, and
    moves an attacked piece away rather than leaving it; ``greedy = 0``: every legal move comes up."""
    from nnue_infer.kernels.chess.movegen import MAX_MOVES, legal_moves
    from nnue_infer.training import walk

    def chosen(fen: str, greedy: float, draws: int) -> set:
        board = chess.Board(fen)
        bb, stm, castling, ep = (a[0] for a in datagen._start_arrays([board]))
        moves = np.empty(MAX_MOVES, np.uint16)
        n = legal_moves(bb, int(stm), castling, ep, False, moves)
        rng = np.array([5], np.uint64)
        picks = {walk.policy(bb, int(stm), ep, moves, n, greedy, rng) for _ in range(draws)}
        return {chess.Move(int(moves[i]) & 63, (int(moves[i]) >> 6) & 63).uci() for i in picks}, n

    # Rd1xd7 wins the queen (9) for the rook (5, d7 is guarded) and saves the attacked rook: the best score
    assert chosen("3k4/3q4/8/8/8/8/1p6/1K1R4 w - - 0 1", 1.0, 50)[0] == {"d1d7"}
    # the knight attacked by the e5 pawn goes (escape bonus) rather than the king
    assert {m[:2] for m in chosen("4k3/8/8/4p3/3N4/8/8/7K w - - 0 1", 1.0, 50)[0]} == {"d4"}
    every, n = chosen("4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1", 0.0, 2000)
    assert len(every) == n


NODES = 48  # small searches: the tests check the data's form, not its quality


SETTINGS = searchplay.SearchPlaySettings(nodes=NODES, max_game_plies=60)


@pytest.fixture(scope="module")
def sf_teacher():
    return nnue_infer.stockfish_15_1_network()


@pytest.fixture(scope="module")
def few_games(data_dir):
    return datagen.read_games(data_dir / "games-dev.jsonl")[:40]


@pytest.fixture(scope="module")
def chunk(sf_teacher, few_games):
    return searchplay.generate(300, 11, sf_teacher, games=few_games, settings=SETTINGS, progress=False)


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


def test_search_games_are_deterministic_per_seed(sf_teacher, few_games, chunk):
    again, summary = searchplay.generate(300, 11, sf_teacher, games=few_games, settings=SETTINGS, progress=False)
    assert again.equals(chunk[0]) and summary == chunk[1]
    other, _ = searchplay.generate(300, 12, sf_teacher, games=few_games, settings=SETTINGS, progress=False)
    assert not np.array_equal(other.bitboards, chunk[0].bitboards)


def test_no_position_twice_across_chunks(sf_teacher, few_games):
    seen = PositionSet()
    a, sa = searchplay.generate(200, 21, sf_teacher, games=few_games, seen=seen, settings=SETTINGS, progress=False)
    b, _ = searchplay.generate(200, 21, sf_teacher, games=few_games, seen=seen, settings=SETTINGS, progress=False,
                               first_game=sa["next_game"])
    ha, hb = position_hashes(a.bitboards, a.stm), position_hashes(b.bitboards, b.stm)
    assert len(np.unique(ha)) == 200 and len(np.unique(hb)) == 200 and not np.isin(ha, hb).any()
    assert len(seen) == 400 and seen.contains(np.concatenate([ha, hb])).all()
    # the same seed and few_games again, but with the first chunk's positions excluded: none of them comes back
    c, _ = searchplay.generate(200, 21, sf_teacher, games=few_games, seen=PositionSet(ha), settings=SETTINGS,
                               progress=False)
    assert not np.isin(position_hashes(c.bitboards, c.stm), ha).any()


def test_binpack_reads_back_with_the_teachers_scores_and_consistent_results(tmp_path, sf_teacher, chunk):
    data, summary = chunk
    path = tmp_path / "games.binpack"
    write(data, path)
    back = read(path)
    assert back.equals(data, chains=False) and len(back) == 300
    fens = back.fens()
    assert back.score.tolist() == Evaluator(sf_teacher).evaluate_batch(fens).tolist()  # label "teacher"
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


def test_game_results_at_the_end_of_the_game(sf_teacher):
    from nnue_infer.search import Engine

    engine = Engine(sf_teacher, hash_mb=1)
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


def test_bad_settings_are_named(sf_teacher):
    with pytest.raises(ValueError, match=r"nodes = 0.*label = 'x'"):
        searchplay.generate(10, 1, sf_teacher, settings=searchplay.SearchPlaySettings(nodes=0, label="x"), progress=False)


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
    assert main(["datagen", "--search", "-o", str(tmp_path / "y.binpack"), "-n", "10",
                 "--dedup-set", str(tmp_path / "missing" / "s.npy")]) == 2
    assert "--dedup-set" in capsys.readouterr().err and not (tmp_path / "y.binpack").exists()


def test_train_reads_the_binpack(tmp_path, capsys, chunk):
    pytest.importorskip("torch")
    path = tmp_path / "games.binpack"
    write(chunk[0], path)
    assert main(["train", str(path), "-o", str(tmp_path / "run"), "--epochs", "1", "--ft-width", "8", "--quiet"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["positions"] == 300 and summary["data"] == [str(path)]
    assert summary["data_meta"]["training_data"] == str(path)
