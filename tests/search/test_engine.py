"""The search engine (:class:`nnue_infer.search.Engine`): legal moves in every kind of position,
mates found with the right score (Stockfish 15.1 as the oracle for the distance), draws, exact
incremental evaluation (debug mode: every evaluation compared with a full refresh) for each network
family, determinism of node-limited searches and a prompt stop from another thread."""

from __future__ import annotations

import os
import random
import threading
import time

import chess
import pytest

from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import SCHEMES, quantise
from nnue_infer.search import Engine, SearchInfo, SearchResult


@pytest.fixture(scope="module")
def engine(network) -> Engine:
    return Engine(network, hash_mb=4)


def _assert_legal(board: chess.Board, result: SearchResult) -> None:
    assert result.move in board.legal_moves, (board.fen(), result.move)
    b = board.copy()
    for move in result.pv:
        assert move in b.legal_moves, (board.fen(), result.pv)
        b.push(move)
    assert result.pv[0] == result.move


ODD_POSITIONS = [
    "4k3/8/8/8/8/8/4r3/4K3 w - - 0 1",  # in check, the checker can be taken
    "7k/8/8/8/8/8/5r2/6rK w - - 0 1",  # in check, one legal move (Kxg1)
    "8/P6k/8/8/8/8/6p1/K7 w - - 0 1",  # promotions on both sides
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",  # Kiwipete: castling both ways
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # en passant
    "8/8/8/2k5/3Pp3/8/8/4K2Q b - d3 0 1",  # en passant that exposes nothing
    "K7/8/8/3Q4/4q3/8/8/7k w - - 0 1",  # queens face each other
    "3k4/3P4/3K4/8/8/8/8/8 w - - 0 1",  # few moves, stalemate traps
    "1k6/1P6/1K6/8/8/8/8/8 w - - 0 1",
    "6k1/8/8/8/8/8/8/QQQQQ1K1 w - - 0 1",  # many queens
    "6k1/8/8/8/8/8/8/qqqqq1K1 w - - 0 1",  # many queens against a lone king
]


@pytest.mark.parametrize("fen", ODD_POSITIONS)
def test_move_is_legal_in_odd_positions(engine, fen):
    board = chess.Board(fen)
    result = engine.search(board, nodes=800)
    _assert_legal(board, result)
    assert board.fen() == fen  # the board is not modified


def test_chess960_positions_give_legal_moves_with_castling(engine):
    rng = random.Random(7)
    castling = 0
    for n in range(10):
        board = chess.Board.from_chess960_pos(rng.randrange(960))
        if n % 2:  # the back ranks emptied but for kings and rooks: castling is legal
            for square in list(chess.SquareSet(chess.BB_RANK_1 | chess.BB_RANK_8)):
                if board.piece_type_at(square) not in (chess.KING, chess.ROOK):
                    board.remove_piece_at(square)
        for _ in range(rng.randrange(0, 8)):
            board.push(rng.choice(list(board.legal_moves)))
        castling += any(board.is_castling(m) for m in board.legal_moves)
        result = engine.search(board, nodes=500)
        _assert_legal(board, result)
    assert castling >= 3


def test_mate_and_stalemate_give_no_move(engine):
    mated = chess.Board("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3")
    assert mated.is_checkmate()
    result = engine.search(mated, depth=3)
    assert result.move is None and result.mate == 0 and result.pv == []
    stalemate = chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")
    assert stalemate.is_stalemate()
    result = engine.search(stalemate, depth=3)
    assert result.move is None and result.score_cp == 0 and result.mate is None


@pytest.mark.parametrize("fen", [
    "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1",  # back-rank mate in 1
    "r2qkb1r/pp2nppp/3p4/2pNN1B1/2BnP3/3P4/PPP2PPP/R2bK2R w KQkq - 1 1",  # mate in 2 (Nf6+ gxf6 Bxf7#)
    "r1b1kb1r/pppp1ppp/5q2/4n3/3KP3/2N3PN/PPP4P/R1BQ1B1R b kq - 0 1",  # mate in 3 for Black
    "6k1/8/6K1/8/8/8/8/R7 w - - 0 1",  # mate in 1 along the back rank
])
def test_mates_found_with_stockfish_distance(engine, stockfish, fen):
    board = chess.Board(fen)
    scores = [line.split(" score ")[1].split()[:2] for line in stockfish.search_lines(fen, 12) if " score " in line]
    assert scores[-1][0] == "mate"
    expected = int(scores[-1][1])
    result = engine.search(board, depth=7)
    _assert_legal(board, result)
    assert result.mate is not None and result.mate > 0, result
    b = board.copy()
    for move in result.pv:
        b.push(move)
    assert b.is_checkmate() and len(result.pv) == 2 * result.mate - 1, result.pv
    assert result.mate == expected


def test_repetition_scores_a_draw(engine):
    board = chess.Board("6r1/8/8/8/8/8/5k2/7K w - - 0 1")  # Black is a rook up; White's only move is Kh2
    for uci in ("h1h2", "g8g7", "h2h1", "g7g8"):
        board.push_uci(uci)
    assert [m.uci() for m in board.legal_moves] == ["h1h2"]
    after = board.copy()
    after.push_uci("h1h2")
    assert after.is_repetition(2)
    result = engine.search(board, depth=6)
    assert result.move == chess.Move.from_uci("h1h2") and result.score_cp == 0
    fresh = chess.Board(board.fen())  # no history: no repetition, and the rook up shows
    result = engine.search(fresh, depth=6)
    assert (result.mate or 0) < 0 or result.score_cp < -300


def test_fifty_move_rule_and_insufficient_material_score_draws(engine):
    near_fifty = chess.Board("6r1/8/8/8/8/8/5k2/7K w - - 99 80")  # Kh2 is the hundredth halfmove
    assert engine.search(near_fifty, depth=5).score_cp == 0
    bare = chess.Board("8/8/3k4/8/8/3KN3/8/8 w - - 0 1")  # king and knight: no mate possible
    assert engine.search(bare, depth=5).score_cp == 0


def test_node_limited_search_is_deterministic(network):
    board = chess.Board("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4")
    first = Engine(network, hash_mb=4)
    a = first.search(board, nodes=3000)
    first.new_game()
    b = first.search(board, nodes=3000)
    c = Engine(network, hash_mb=4).search(board, nodes=3000)
    assert a.nodes == b.nodes == c.nodes == 3000
    assert (a.move, a.pv, a.score_cp, a.depth) == (b.move, b.pv, b.score_cp, b.depth) == (c.move, c.pv, c.score_cp,
                                                                                           c.depth)


@pytest.mark.parametrize("fen", [chess.STARTING_FEN,
                                 "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
                                 "8/8/4k3/8/2K5/8/3P4/8 w - - 0 1"])
def test_node_limited_result_reports_the_move_it_plays(network, fen):
    # A node limit stops an iteration part-way: the score, depth and principal variation reported
    # (in the result and in the last info) are those of the move played.
    board = chess.Board(fen)
    engine = Engine(network, hash_mb=4)
    for nodes in range(200, 6000, 250):
        engine.new_game()
        seen: list[SearchInfo] = []
        result = engine.search(board, nodes=nodes, info=seen.append)
        _assert_legal(board, result)
        last = seen[-1]
        assert (last.move, last.pv, last.score_cp, last.mate, last.depth) == (
            result.move, result.pv, result.score_cp, result.mate, result.depth), (fen, nodes)


def test_info_after_each_iteration(engine):
    seen: list[SearchInfo] = []
    result = engine.search(chess.Board(), depth=4, info=seen.append)
    assert [i.depth for i in seen] == [1, 2, 3, 4]
    assert all(i.multipv == 1 and i.nodes > 0 and i.move in chess.Board().legal_moves for i in seen)
    assert result.depth == 4 and result.nodes == seen[-1].nodes


def test_stop_from_another_thread_returns_a_legal_move(engine):
    board = chess.Board("r1bq1rk1/pp2bppp/2n1pn2/2pp4/3P4/2PBPN2/PP1N1PPP/R1BQ1RK1 w - - 0 8")
    out = {}
    worker = threading.Thread(target=lambda: out.setdefault("r", engine.search(board, infinite=True)))
    worker.start()
    time.sleep(1.0)
    engine.stop()
    worker.join(timeout=10)
    assert not worker.is_alive()
    _assert_legal(board, out["r"])


def test_movetime_is_kept(engine):
    board = chess.Board("r1bq1rk1/pp2bppp/2n1pn2/2pp4/3P4/2PBPN2/PP1N1PPP/R1BQ1RK1 w - - 0 8")
    result = engine.search(board, movetime=0.3)
    _assert_legal(board, result)
    assert result.time < 3.0  # a hard limit by a timer: far below this even on a loaded machine


@pytest.mark.parametrize("limits", [{"movetime": 1e30}, {"wtime": 1e30, "btime": 1e30}, {"wtime": 1e20, "winc": 1e25}])
def test_huge_time_limits_search_like_no_time_limit(engine, limits):
    """A GUI's "no clock" of 10**20 ms or more is a long search, not an overflow of the timer or deadline."""
    board = chess.Board()
    result = engine.search(board, nodes=300, **limits)
    _assert_legal(board, result)
    assert result.depth >= 1


@pytest.mark.parametrize("clock", [0.0, 0.005, -1.0])
def test_a_clock_run_out_still_completes_one_iteration(engine, clock):
    """With no time left (below the move overhead, or a GUI's negative clock) the move is still searched to
    depth 1: the mate in one is played, not the first legal move."""
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 2 3")
    assert next(iter(board.legal_moves)) != chess.Move.from_uci("h5f7")
    result = engine.search(board, wtime=clock, btime=clock, move_overhead=0.01)
    assert result.move == chess.Move.from_uci("h5f7") and result.mate == 1 and result.depth >= 1


def test_bad_input_is_refused(engine):
    with pytest.raises(TypeError, match="chess.Board"):
        engine.search("8/8/8/8/8/8/8/8 w - - 0 1")
    with pytest.raises(ValueError, match="nodes"):
        engine.search(chess.Board(), nodes=-5)
    for limit in ({"nodes": 0}, {"depth": 0}, {"depth": -1}):
        with pytest.raises(ValueError, match=next(iter(limit))):
            engine.search(chess.Board(), **limit)
    with pytest.raises(ValueError, match="the side not to move is in check"):
        engine.search(chess.Board("4k3/8/8/8/8/8/4R3/4K3 w - - 0 1"))  # Black, not to move, in check
    # The wording of the feature sets' position check (the CLI's), not an enum's repr
    with pytest.raises(ValueError, match=r"^Black must have exactly one king, found 0 \(none\)$"):
        engine.search(chess.Board("8/8/8/8/8/8/8/4K3 w - - 0 1"))
    with pytest.raises(ValueError, match="White must have exactly one king, found 2"):
        engine.search(chess.Board("4k3/8/8/8/8/8/8/3KK3 w - - 0 1"))
    with pytest.raises(ValueError, match="hash_mb"):
        engine.hash_mb = 0
    physical_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    with pytest.raises(ValueError, match="does not fit in this machine's"):  # refused before allocating
        engine.hash_mb = 1 << physical_mb.bit_length()
    assert engine.hash_mb == 4


DEBUG_POSITIONS = [
    chess.STARTING_FEN,
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
    "8/P6k/8/8/8/8/6p1/K7 w - - 0 1",
]


def _debug_search(network, nodes_each: int) -> int:
    engine = Engine(network, hash_mb=4, debug=True)
    total = 0
    for fen in DEBUG_POSITIONS:
        result = engine.search(chess.Board(fen), nodes=nodes_each)  # AssertionError on any difference
        total += engine.evaluations
        _assert_legal(chess.Board(fen), result)
    return total


def test_debug_evaluations_equal_a_full_refresh_stockfish_15_1(network):
    assert _debug_search(network, 1500) > 3000


def test_debug_evaluations_equal_a_full_refresh_threat_inputs():
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        network = known_network("sf19")  # HalfKAv2_hm + FullThreats + PP_3Wide
    except NetworkNotFoundError as exc:
        pytest.skip(str(exc))
    assert network.architecture.int8_feature_sets
    assert _debug_search(network, 600) > 1000


@pytest.mark.parametrize("activation", ["glu"])
def test_debug_evaluations_equal_a_full_refresh_gated_chess768(activation):
    from nnue_infer.float_network import FloatNetwork

    arch = Architecture(feature_set="Chess768", ft_width=32, ft_activation=activation, ft_clamp=127,
                        ft_shift=SCHEMES["stockfish"].shift_for(activation), psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))
    network = quantise(FloatNetwork.random(arch, seed=5))
    assert _debug_search(network, 1500) > 3000


def test_repetition_history_keys_equal_polyglot_hashes(engine):
    import chess.polyglot

    rng = random.Random(3)
    board = chess.Board()
    for _ in range(80):
        quiet = [m for m in board.legal_moves if not board.is_capture(m)
                 and board.piece_type_at(m.from_square) != chess.PAWN]
        board.push(rng.choice(quiet or list(board.legal_moves)))
        keys = [int(k) & (2**64 - 1) for k in engine._game_keys(board)]
        b = board.copy()
        want = [chess.polyglot.zobrist_hash(b)]
        for _ in range(min(board.halfmove_clock, len(board.move_stack))):
            b.pop()
            want.append(chess.polyglot.zobrist_hash(b))
        assert keys == want[::-1], board.fen()


def test_repetition_seen_with_castling_rights_python_chess_ignores(engine):
    """A FEN's castling rights without the king on its square are ignored by python-chess's rules (and by the
    polyglot hash); the history's positions are keyed the same way as the root's, so a repetition counts."""
    import chess.polyglot

    board = chess.Board("4k3/8/8/8/8/8/8/R2K2NR w KQ - 0 1")  # K and Q given, the king on d1
    for uci in ("g1f3", "e8e7", "f3g1", "e7e8"):
        board.push_uci(uci)
    assert board.is_repetition(2)
    keys = [int(k) & (2**64 - 1) for k in engine._game_keys(board)]
    b = board.copy()
    want = [chess.polyglot.zobrist_hash(b)]
    for _ in range(4):
        b.pop()
        want.append(chess.polyglot.zobrist_hash(b))
    assert keys == want[::-1]
