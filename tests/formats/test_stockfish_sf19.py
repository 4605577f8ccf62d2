"""Stockfish 19's network (``nn-1a298aa575a0.nnue``: HalfKAv2_hm + FullThreats + PP_3Wide) and
Stockfish 18's (``nn-c288c895ea92.nnue``: HalfKAv2_hm + Stockfish 18's threats) against the
engines' own numbers.

Oracles: ``shared/data/sf19/`` (the released Stockfish 19 engine's raw ``value`` for 3,298
positions, 250 extra positions and every ply of 264 games; ``null`` in check, where the engine
prints nothing) and the spec's worked examples (``shared/reference/stockfish-19-nnue.md``
sections 4.3 and 14).  The networks come from the npm packages in the cache directory
(``.ci/run`` fetches them); without them these tests skip, saying so.
"""

from __future__ import annotations

import json
import random

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer import Evaluator


def _network(spec: str) -> nnue_infer.Network:
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def sf19() -> nnue_infer.Network:
    return _network("sf19")


@pytest.fixture(scope="module")
def sf19_data(data_dir):
    return data_dir / "sf19"


def rows(path, net="nn-1a298aa575a0.nnue"):
    with open(path) as f:
        out = [json.loads(line) for line in f if line.strip()]
    return [r for r in out if r["net"] == net]


def test_layout_and_memory(sf19):
    arch = sf19.architecture
    assert arch.int8_feature_sets == ("FullThreats", "PP_3Wide") and arch.feature_set == "HalfKAv2_hm"
    assert sf19.int8_weights.dtype == np.int8 and sf19.int8_weights.shape == (59_808 + 4_560, 1024)
    assert sf19.ft_weights.dtype == np.int16 and sf19.ft_weights.shape == (22_528, 1024)
    # the file's integers: int8 threat/pair rows, int16 HalfKA rows and biases, int32 PSQT, the stacks
    file_ints = 64_368 * 1024 + 2 * (22_528 * 1024 + 1024) + 4 * (86_896 * 8) + 8 * 35_208
    held = sum(a.nbytes for a in (sf19.int8_weights, sf19.int8_psqt_weights, sf19.ft_weights, sf19.ft_biases,
                                  sf19.psqt_weights, *sf19.layer_weights, *sf19.layer_biases))
    assert held <= 1.3 * file_ints


def test_worked_examples(sf19):
    """Spec 14: start position -1 (bucket 7), after 1.e4 -60; spec 4.3: +181."""
    ev = Evaluator(sf19)
    assert ev.evaluate(chess.Board()) == -1
    assert ev.evaluate("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1") == -60
    assert ev.evaluate("4k3/8/8/3r4/4P3/2N5/8/4K3 w - - 0 1") == 181
    ev._refresh(chess.Board())
    assert ev._acc[0, :8].tolist() == [-222, 61, -358, 744, -150, -1, -92, 163]
    assert ev._psqt[0].tolist() == [48941, -7573, -4190, -1272, 1179, 363, -1106, -1053]


def test_dev_positions(sf19, sf19_data):
    """All 3,298 dev positions (3,118 not in check) and the 250 extra ones: evaluate_batch and evaluate."""
    data = rows(sf19_data / "positions-dev-sf19.jsonl") + rows(sf19_data / "extra-dev.jsonl")
    data = [r for r in data if r["value"] is not None]
    assert len(data) > 3300
    got = nnue_infer.evaluate_batch([r["fen"] for r in data], sf19)
    want = np.array([r["value"] for r in data], np.int32)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(data[i]["fen"], int(got[i]), int(want[i])) for i in bad[:5]]
    ev = Evaluator(sf19)
    for r in data[::7]:
        board = chess.Board(r["fen"], chess960=r["chess960"])
        assert ev.evaluate(board) == r["value"], r["fen"]


def test_dev_games_incremental(sf19, sf19_data):
    """Every ply of the 264 dev games through evaluate_game (incremental, refresh cache)."""
    games = rows(sf19_data / "games-dev-sf19.jsonl")
    assert len(games) == 264
    checked = 0
    for g in games:
        got = nnue_infer.evaluate_game(g["start_fen"], g["moves"], network=sf19, validate=False)
        for ply, want in enumerate(g["values"]):
            if want is not None:
                assert got[ply] == want, (g["id"], ply)
                checked += 1
    assert checked > 24_000


def test_round_trip_and_corrupt_files(sf19, tmp_path):
    """Written back byte for byte; a corrupted threat block is a clear error naming it."""
    import hashlib

    from nnue_infer.errors import NetworkFormatError
    from nnue_infer.formats.stockfish import parse_stockfish, stockfish_bytes

    data = stockfish_bytes(sf19)
    assert hashlib.sha256(data).hexdigest().startswith("1a298aa575a0")
    buf = np.frombuffer(data, np.uint8).copy()
    bad = buf.copy()
    bad[100:117] = np.frombuffer(b"X" * 17, np.uint8)  # the biases' LEB128 magic
    with pytest.raises(NetworkFormatError, match="feature_transformer.biases"):
        parse_stockfish(bad, "x.nnue")
    bad = buf.copy()
    bad[61_245_036:61_245_053] = 0  # the threat PSQT block's magic
    with pytest.raises(NetworkFormatError, match="threat_psqt_weights"):
        parse_stockfish(bad, "x.nnue")
    with pytest.raises(NetworkFormatError, match="trailing|truncated"):
        parse_stockfish(buf[:-1], "x.nnue")
    # cut short or a wrong LEB128 byte count: the block whose bytes run past the end is named, never the next one
    cases = ((buf[:1365], r"truncated in feature_transformer\.biases at offset 100: needs 1544 bytes"),
             (buf[:len(buf) // 2], r"truncated in feature_transformer\.threat_weights at offset 1644"),
             (buf[:100], r"truncated at feature_transformer\.biases, offset 100"))
    for cut, message in cases:
        with pytest.raises(NetworkFormatError, match=message):
            parse_stockfish(cut.copy(), "x.nnue")
    bad = buf.copy()
    bad[120] ^= 0x40  # the biases' LEB128 byte count, 2^30 larger
    with pytest.raises(NetworkFormatError, match=r"truncated in feature_transformer\.biases .*by its LEB128 byte count"):
        parse_stockfish(bad, "x.nnue")


def test_sf18_loads_and_round_trips():
    import hashlib

    from nnue_infer.formats.stockfish import stockfish_bytes

    net = _network("sf18")
    arch = net.architecture
    assert arch.int8_feature_sets == ("FullThreats18",) and (arch.ft_clamp, arch.ft_shift) == (255, 9)
    assert net.int8_weights.dtype == np.int8 and net.int8_weights.shape == (79_856, 1024)
    assert hashlib.sha256(stockfish_bytes(net)).hexdigest().startswith("c288c895ea92")


def test_push_pop_incremental_equals_refresh(sf19):
    """Random games with castling, e.p., promotions, null moves and pops (standard and Chess960)."""
    rnd = random.Random(19)
    ev, fresh = Evaluator(sf19), Evaluator(sf19)
    for game in range(4):
        board = chess.Board.from_chess960_pos(rnd.randrange(960)) if game % 2 else chess.Board()
        ev.set_position(board)
        for _ in range(120):
            if board.move_stack and rnd.random() < 0.1:
                ev.pop()
                board.pop()
            elif rnd.random() < 0.05 and not board.is_check():
                ev.push(chess.Move.null())
                board.push(chess.Move.null())
            elif board.is_game_over():
                break
            else:
                moves = list(board.legal_moves)
                special = [m for m in moves if board.is_castling(m) or board.is_en_passant(m) or m.promotion
                           or board.is_capture(m)]
                move = rnd.choice(special if special and rnd.random() < 0.5 else moves)
                ev.push(move)
                board.push(move)
            assert ev.evaluate() == fresh.evaluate(board), board.fen()
