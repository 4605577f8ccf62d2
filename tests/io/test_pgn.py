"""Fast PGN reading (nnue_infer.io.pgn, kernels.chess.notation) against python-chess, the reference.

The Rust parser's positions and the notation kernel's FEN / SAN / UCI / check flags must be
exactly python-chess's (``Board.fen()``, ``Board.san``, ``Move.uci``, ``is_check``,
``is_checkmate``, ``is_stalemate``) and the values exactly ``evaluate_game``'s.
"""

from __future__ import annotations

import io
import json
import random

import chess
import chess.pgn
import numpy as np
import pytest

import nnue_infer
from nnue_infer.io import pgn
import os
import subprocess
import sys

needs_rust = pytest.mark.skipif(not pgn.rust_parser_available(),
                                reason="needs the Rust PGN parser: pip install -e '.[pgn]'")
PARSERS = [pytest.param("rust", marks=needs_rust), "python-chess"]


@pytest.fixture(scope="module")
def dev_games(data_dir):
    """A lean sample of the dev games: every 15th game plus up to 6 with each rare move kind."""
    with open(data_dir / "games-dev.jsonl", encoding="utf-8") as f:
        games = [json.loads(line) for line in f]
    picked = {i for i in range(0, len(games), 15)}
    for kind in ("en_passant", "underpromotion", "promotion_capture", "castle_queenside"):
        picked |= set([i for i, g in enumerate(games) if g["features"].get(kind)][:6])
    return [games[i] for i in sorted(picked)]


def to_pgn(games, annotate: bool) -> str:
    """PGN text of dev games (python-chess's exporter); ``annotate`` adds comments (one spanning
    a blank line), NAGs and side variations, which the reader must skip."""
    rng = random.Random(7)
    out = io.StringIO()
    for g in games:
        game = chess.pgn.Game.from_board(chess.Board(g["start_fen"]))
        for key in ("Event", "Site", "Date", "White", "Black"):
            if isinstance(g["meta"].get(key), str):
                game.headers[key] = g["meta"][key]
        game.headers["Result"] = g["result"]
        node = game
        for uci in g["moves"]:
            node = node.add_variation(chess.Move.from_uci(uci))
            if annotate:
                r = rng.random()
                if r < 0.05:
                    node.comment = "a comment {with} text\n\nacross a blank line" if r < 0.01 else "comment"
                elif r < 0.08:
                    node.nags.add(rng.choice([1, 2, 3, 4]))
                elif r < 0.1:
                    alt = [m for m in node.parent.board().legal_moves if m != node.move]
                    if alt:
                        node.parent.add_variation(rng.choice(alt)).comment = "alt"
        print(game, file=out, end="\n\n")
    return out.getvalue()


def reference_rows(text: str):
    """Per position (python-chess): game number, ply, fen, san, uci, check, checkmate, stalemate, headers."""
    rows = []
    f = io.StringIO(text)
    number = 0
    while (game := chess.pgn.read_game(f)) is not None:
        number += 1
        board = game.board()
        white = game.headers["White"] if "[White " in text else ""  # the test texts always name White or no one
        san, uci = "", ""
        moves = list(game.mainline_moves())
        for ply in range(len(moves) + 1):
            if ply:
                move = moves[ply - 1]
                san, uci = board.san(move), move.uci()
                board.push(move)
            last = ply == len(moves)
            rows.append((number, ply, board.fen(), san, uci, board.is_check(), last and board.is_checkmate(),
                         last and board.is_stalemate(), white))
    return rows


def batch_rows(batches):
    rows = []
    for b in batches:
        rows += list(zip(b.game.tolist(), b.ply.tolist(), b.fen, b.san, b.uci, b.in_check.tolist(),
                         b.checkmate.tolist(), b.stalemate.tolist(), b.headers["White"].tolist()))
    return rows


def parse_text(text: str, parser: str):
    games = [(i + 1, line, t) for i, (line, t) in enumerate(pgn.split_games(io.StringIO(text)))]
    return pgn.parse_games("test.pgn", games, parser)


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("annotate", [False, True])
def test_positions_and_notation_equal_python_chess(dev_games, parser, annotate):
    text = to_pgn(dev_games, annotate)
    got = batch_rows(parse_text(text, parser))
    want = reference_rows(text)
    assert len(got) == len(want) > 3000
    bad = [(g, w) for g, w in zip(got, want) if g != w]
    assert not bad, bad[:3]
    sans = {r[3] for r in got}
    assert any("=N" in s for s in sans) and "O-O-O" in sans and any(s.endswith("#") for s in sans)
    assert any(r[2].split()[3] != "-" for r in got)  # legal en passant squares written


@needs_rust
def test_values_equal_evaluate_game(dev_games, data_dir):
    sf = nnue_infer.default_network()
    ev = nnue_infer.Evaluator(sf)
    values = []
    for batch in parse_text(to_pgn(dev_games, False), "rust"):
        kept, v, errors = pgn.evaluate_games(ev, batch)
        assert len(kept) == len(batch) and not errors
        values.append(v)
    want = np.concatenate([ev.evaluate_game(chess.Board(g["start_fen"]), g["moves"]) for g in dev_games])
    np.testing.assert_array_equal(np.concatenate(values), want)


SPLIT_CASES = """\ufeff% a line the reader skips
[Event "one"]

[White "A"]

1. e4 {a comment

with a blank line} e5 2. Nf3 *

[Event "headers only"]


1. d4 d5 *

; a comment line
[Event "three"]
[FEN "3k4/8/8/8/8/8/8/R3K2R w KQ - 5 40"]

40. O-O-O+ Kc7 41. Rd7+ 1-0
"""


def test_split_games_follows_python_chess():
    games = list(pgn.split_games(io.StringIO(SPLIT_CASES)))
    f = io.StringIO(SPLIT_CASES)
    ref = []
    while (g := chess.pgn.read_game(f)) is not None:
        ref.append((g.headers.get("Event"), [m.uci() for m in g.mainline_moves()]))
    got = []
    for _, text in games:
        g = chess.pgn.read_game(io.StringIO(text))
        got.append((g.headers.get("Event"), [m.uci() for m in g.mainline_moves()]))
    assert got == ref
    assert [line for line, _ in games] == [2, 10, 13, 16]


@pytest.mark.parametrize("parser", PARSERS)
def test_fen_header_counters_and_check(parser):
    rows = batch_rows(parse_text(SPLIT_CASES, parser))
    assert rows == batch_rows([pgn._parse_python_chess("x", [(i + 1, line, t) for i, (line, t) in
                                                             enumerate(pgn.split_games(io.StringIO(SPLIT_CASES)))])])
    assert rows[-3][2:6] == ("3k4/8/8/8/8/8/8/2KR3R b - - 6 40", "O-O-O+", "e1c1", True)


@needs_rust
def test_bad_games_are_errors_with_line_and_keep_earlier_positions():
    text = ('[Event "ok"]\n\n1. e4 e5 *\n\n[Event "bad"]\n\n1. e4 Ke7 2. Qh5 *\n\n'
            '[Event "no king"]\n[FEN "8/8/8/8/8/8/8/4K3 w - - 0 1"]\n\n1. Kd1 *\n\n'
            '[Event "960"]\n[Variant "Chess960"]\n[FEN "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQK2R w KQkq - 0 1"]\n\n'
            '1. O-O *\n')
    batches = parse_text(text, "rust")
    errors = [e for b in batches for e in b.errors]
    assert [(e.game, e.line) for e in errors] == [(2, 5)]
    assert "Ke7" in errors[0].message and errors[0].headers == {"Event": "bad"}
    assert str(errors[0]).startswith("test.pgn:5: game 2, ply 2: ")
    rows = batch_rows(batches)
    # game 3's [FEN] has no black king: the Rust parser refuses it, python-chess reads it again, and its
    # positions become errors of the evaluator, which names the problem
    assert [(r[0], r[1]) for r in rows] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1)]
    ev = nnue_infer.Evaluator(nnue_infer.default_network())
    bad = [e for b in batches for e in pgn.evaluate_games(ev, b)[2]]
    assert [(e.game, e.line) for e in bad] == [(3, 9), (3, 9)] and "Black must have exactly one king" in bad[0].message
    assert rows[-1][2:5] == ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQ1RK1 b kq - 1 1", "O-O", "e1h1")  # Chess960


def test_unrepresentable_positions_are_errors_not_rows():
    text = '[FEN "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"]\n\n1. e4 *\n\n'
    text += '[FEN "qqqqkqqq/qqqqqqqq/8/8/8/pp6/QQQQQQQQ/QQQQKQQQ w - - 0 1"]\n\n*\n'  # 34 pieces
    (batch,) = parse_text(text, "python-chess")
    kept, values, errors = pgn.evaluate_games(nnue_infer.Evaluator(nnue_infer.default_network()), batch)
    assert kept.game.tolist() == [1, 1] and len(values) == 2
    assert [(e.game, e.line) for e in errors] == [(2, 5)]
    assert "more than 32 pieces" in errors[0].message and errors[0].ply == 0


#: The Opera Game (Morphy v Duke Karl of Brunswick and Count Isouard, Paris 1858) as its score is
#: published: checks (+), a mate (#), queenside castling and a disambiguated knight move (Nbd7).
OPERA_GAME = ("e4 e5 Nf3 d6 d4 Bg4 dxe5 Bxf3 Qxf3 dxe5 Bc4 Nf6 Qb3 Qe7 Nc3 c6 Bg5 b5 Nxb5 cxb5 Bxb5+ Nbd7 O-O-O Rd8 "
              "Rxd7 Rxd7 Rd1 Qe6 Bxd7+ Nxd7 Qb8+ Nxb8 Rd8#").split()


def _stockfish_position(stockfish, moves: list[str]) -> tuple[str, bool]:
    """Stockfish 15.1's ``d`` after ``position startpos moves ...``: its FEN and whether it lists checkers.

    The engine is shared by the session and an earlier test may have left UCI_Chess960 on, which
    prints castling rights as file letters (``HAha``): the option is set off first."""
    stockfish.set_chess960(False)
    lines = stockfish._command(f"position startpos moves {' '.join(moves)}\nd\nisready", "readyok")
    fen = next(line for line in lines if line.startswith("Fen: ")).removeprefix("Fen: ")
    checkers = next(line for line in lines if line.startswith("Checkers:")).removeprefix("Checkers:")
    return fen, bool(checkers.strip())


@pytest.mark.parametrize("parser", PARSERS)
def test_published_score_and_stockfish_positions(stockfish, parser):
    """Expected values from outside python-chess and the notation kernel: the SAN as published,
    check flags from its ``+`` / ``#``, and each position's FEN and checkers from Stockfish 15.1."""
    movetext = " ".join(f"{i // 2 + 1}. {san}" if i % 2 == 0 else san for i, san in enumerate(OPERA_GAME))
    text = f'[Event "Paris"]\n[White "Paul Morphy"]\n[Result "1-0"]\n\n{movetext} 1-0\n'
    (batch,) = parse_text(text, parser)
    assert batch.san == [""] + OPERA_GAME
    assert batch.in_check.tolist() == [False] + [san[-1] in "+#" for san in OPERA_GAME]
    assert batch.checkmate.tolist() == [False] * len(OPERA_GAME) + [True]
    ucis = batch.uci[1:]
    for ply in range(len(OPERA_GAME) + 1):
        fen, check = _stockfish_position(stockfish, ucis[:ply])
        assert (batch.fen[ply], bool(batch.in_check[ply])) == (fen, check), ply


#: Games with each kind of PGN problem: an illegal move (ply 3), a [FEN] python-chess cannot read (ply 0), a
#: variant (ply 0), a null move (ply 2), positions the network cannot represent (no black king: ply 0).
PROBLEM_GAMES = ('[Event "illegal"]\n\n1. e4 e5 2. Ke3 *\n\n'
                 '[Event "fen"]\n[SetUp "1"]\n[FEN "xyz"]\n\n1. e4 *\n\n'
                 '[Event "variant"]\n[Variant "Atomic"]\n\n1. e4 *\n\n'
                 '[Event "null"]\n\n1. e4 -- 2. d4 *\n\n'
                 '[Event "no king"]\n[SetUp "1"]\n[FEN "8/8/8/8/8/8/8/4K3 w - - 0 1"]\n\n1. Kd2 *\n')


@pytest.mark.parametrize("parser", ["python-chess", pytest.param("rust", marks=needs_rust)])
def test_every_pgn_problem_has_one_form(parser, tmp_path, capsys):
    """PGN problems came in three forms: ``FILE:LINE: game N: message`` (the parser's), ``FILE:LINE: game N: ply P:
    problem: FEN`` (evaluate_games) and, on the command line, ``FILE: game N: message`` with no ply (the Rust parser's
    messages had "at ply P" inside); now ``FILE:LINE: game N, ply P: message``, on the command line without the line
    (its rows do not carry it), the ply that of the error row."""
    import csv

    from nnue_infer.cli import main

    path = tmp_path / "p.pgn"
    path.write_text(PROBLEM_GAMES)
    batches = list(pgn.read_pgn(path, parser=parser))
    ev = nnue_infer.Evaluator(nnue_infer.default_network())
    errors = [e for b in batches for e in b.errors] + [e for b in batches for e in pgn.evaluate_games(ev, b)[2]]
    assert [(e.game, e.line, e.ply) for e in errors] == [(1, 1, 3), (2, 5, 0), (3, 11, 0), (4, 16, 2), (5, 20, 0),
                                                         (5, 20, 1)]
    for e in errors:
        assert str(e) == f"{path}:{e.line}: game {e.game}, ply {e.ply}: {e.message}"
        assert "at ply" not in e.message and not e.message.startswith("ply")
    if parser == "rust" or not pgn.rust_parser_available():
        assert main(["eval", "--pgn", str(path), "--keep-errors"]) == 1
        out, err = capsys.readouterr()
        rows = [r for r in csv.DictReader(io.StringIO(out)) if r["error"]]
        assert err.splitlines() == [f"error: {path}: game {r['game']}, ply {r['ply']}: {r['error']}" for r in rows]
        assert [(r["game"], r["ply"]) for r in rows] == [("1", "3"), ("2", "0"), ("3", "0"), ("4", "2"), ("5", "0")]


# -- hostile input ---------------------------------------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _feed_a_game_at_a_time(proc: subprocess.Popen) -> None:
    import select
    import time

    try:
        proc.stdin.write(b'[Event "x"]\n\n1. e4 e5 *\n\n')  # one game of 3 positions; the pipe stays open
        proc.stdin.flush()
        deadline, out = time.monotonic() + 60, b""
        while b"\n" not in out and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                out += os.read(proc.stdout.fileno(), 100)
        assert out == b"3\n", (out, proc.poll())  # (was b"": nothing until the pipe's end)
        proc.stdin.write(b'[Event "y"]\n\n1. d4 *\n')
        proc.stdin.close()
        rest, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=120) == 0 and rest == b"2\n", (rest, err)
    finally:
        proc.kill()
        proc.wait()


def test_read_pgn_streams_games_from_a_slow_pipe():
    """``nnue_infer.io.pgn.read_pgn('-', games_per_batch=1)`` gave each game as it came through a pipe (a live
    feed of games); since the binary-input check read a pipe's first 8 KiB (or its end) before looking at them
    (aa6cffa), nothing came until then.  The check now looks at those bytes as they are read: a NUL byte among
    them still refuses the input (tests/core/test_inputs.py, test_a_nul_byte_after_the_first_piece_of_a_slow_pipe_is_found), and a game that has arrived is read at once."""
    code = ("from nnue_infer.io.pgn import read_pgn\n"
            "for batch in read_pgn('-', games_per_batch=1):\n"
            "    print(len(batch.fen), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    with proc:
        _feed_a_game_at_a_time(proc)


def test_both_pgn_parsers_end_a_game_at_a_null_move(tmp_path):
    """python-chess reads '--' as a null move, also in check, and then lets the next move capture
    the king (a row without a black king); the Rust parser refuses it. Both end the game there."""
    from nnue_infer.io import pgn

    path = tmp_path / "null.pgn"
    path.write_text('[Event "null in check"]\n\n1. e4 f5 2. Qh5+ -- 3. Qe8 *\n\n[Event "next"]\n\n1. d4 *\n')
    seen = {}
    for parser in ("python-chess", "rust"):
        if parser == "rust" and not pgn.rust_parser_available():
            continue
        batches = list(pgn.read_pgn(path, parser=parser))
        fens = [f for b in batches for f in b.fen]
        errors = [e for b in batches for e in b.errors]
        assert [e.game for e in errors] == [1] and "--" in errors[0].message
        assert all("k" in f.split()[0] for f in fens)  # never a position without the black king
        seen[parser] = fens
    assert len(seen["python-chess"]) == 4 + 2
    if "rust" in seen:
        assert seen["rust"] == seen["python-chess"]


def test_pgn_with_a_bad_fen_header_is_reported_and_skipped(tmp_path, capfd):
    """A game whose [FEN] header python-chess cannot read crashed ``eval --pgn`` with a ValueError
    traceback (and python-chess's own log lines doubled every reported error)."""
    from nnue_infer.cli import main

    path = tmp_path / "g.pgn"
    path.write_text('[Event "a"]\n[SetUp "1"]\n[FEN "xyz"]\n\n1. e4 *\n\n[Event "b"]\n\n1. e4 e5 *\n\n'
                    '[Event "c"]\n\n1. e4 e5 2. Ke3 *\n')
    status = main(["eval", "--pgn", str(path)])
    out, err = capfd.readouterr()
    assert status == 1
    import csv
    import io

    assert [(r["game"], r["ply"], r["uci"]) for r in csv.DictReader(io.StringIO(out))] == [
        ("2", "0", ""), ("2", "1", "e2e4"), ("2", "2", "e7e5"), ("3", "0", ""), ("3", "1", "e2e4"), ("3", "2", "e7e5")]
    lines = err.splitlines()  # game 3's wording is the PGN parser's (Rust: "illegal move: Ke3 ...")
    assert len(lines) == 2 and lines[0] == (f"error: {path}: game 1, ply 0: expected 8 rows in position part of fen: "
                                            "'xyz'")
    assert lines[1].startswith(f"error: {path}: game 3, ply 3: ") and "Ke3" in lines[1]


# The Rust and python-chess parsers agree

def _read(path, parser):
    pytest.importorskip("rust_pgn_reader_python_binding")
    rows, errors = [], []
    for batch in pgn.read_pgn(path, parser=parser):
        rows += list(zip(batch.game.tolist(), batch.line.tolist(), batch.ply.tolist(), batch.fen, batch.san))
        errors += [str(e) for e in batch.errors]
    return rows, errors


def test_an_illegal_move_inside_a_variation_is_no_error_of_the_mainline(tmp_path):
    """The Rust parser reads the mainline alone; python-chess's builder stopped the game at the variation's
    illegal move (2. Ke3, 2. Qxh7: no such moves), losing its mainline: both give every mainline position now."""
    path = tmp_path / "variations.pgn"
    path.write_text('[Event "x"]\n\n1. e4 (1. d4 d5 (1... Nf6 2. Qxh7) 2. Ke3) 1... e5 2. Nf3 Nc6 (2... Qh4 3. Qxf7 '
                    '(3. Kxh8)) 3. Bb5 *\n\n[Event "y"]\n\n1. d4 *\n')
    rust, python = _read(path, "rust"), _read(path, "python-chess")
    assert rust == python
    rows, errors = rust
    assert errors == []
    assert [r[4] for r in rows] == ["", "e4", "e5", "Nf3", "Nc6", "Bb5", "", "d4"]
    assert [r[1] for r in rows] == [1] * 6 + [5] * 2


def test_a_nul_byte_after_the_first_8_kib_is_the_same_error_with_either_parser(tmp_path):
    """Past the first 8 KiB (which open_input checks), a NUL byte reached the parsers: the Rust one reported
    'failed to parse SAN: \\x00', python-chess skipped it and read the game on.  Both now read the game up to it
    and say so (the game's line, the ply after the last position read)."""
    path = tmp_path / "nul.pgn"
    game = '[Event "x"]\n\n1. e4 e5 *\n\n'
    path.write_bytes(game.encode() * 500 + b'[Event "z"]\n\n1. e4 \0 e5 2. Nf3 *\n\n[Event "after"]\n\n1. d4 *\n')
    assert path.stat().st_size > 8192
    rust, python = _read(path, "rust"), _read(path, "python-chess")
    assert rust == python
    rows, errors = rust
    assert errors == [f"{path}:2001: game 501, ply 2: NUL byte in the game's text: binary data, not PGN text (the "
                      "game is read up to it)"]
    assert [r[4] for r in rows if r[0] == 501] == ["", "e4"]
    assert [r[4] for r in rows if r[0] == 502] == ["", "d4"]  # the games after it are read
