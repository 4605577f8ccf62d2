"""A hostile user's inputs that once failed silently: empty position arguments, a drawn game's
result in a pasted move list, null moves in check, unwritable ``--svg`` files."""

from __future__ import annotations

import chess
import pytest

import nnue_infer
from nnue_infer.cli import main
from nnue_infer.errors import IllegalMoveError

CHECKED = "rnbqkbnr/ppppp1pp/8/5p1Q/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 2"  # 1. e4 f5 2. Qh5+


def run(capsys, *argv):
    status = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("words", [[""], [" ", "\t"]])
def test_empty_position_arguments_are_named(capsys, words):
    status, out, err = run(capsys, "eval", *words)
    assert status == 1 and out == "" and "empty position" in err


def test_a_drawn_result_ends_a_pasted_move_list(capsys):
    status, out, err = run(capsys, "eval", "startpos moves 1. e4 e5 1/2-1/2", "startpos")
    assert status == 0 and err == ""
    assert [line.split("\t")[0] for line in out.splitlines()] == [
        "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2", chess.STARTING_FEN]


@pytest.mark.parametrize("null", ["0000", "--"])
def test_a_null_move_in_check_is_refused_on_the_command_line(capsys, null):
    status, out, err = run(capsys, "eval", f"startpos moves e4 f5 Qh5+ {null}")
    assert status == 1 and out == "" and "null move" in err and "in check" in err
    status, out, err = run(capsys, "eval", f"startpos moves e4 f5 {null}")  # not in check: a pass
    assert status == 0 and out.startswith("rnbqkbnr/ppppp1pp/8/5p2/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 1 2\t")


def test_a_null_move_in_check_is_refused_by_the_api_and_changes_nothing():
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board(CHECKED))
    for push in (lambda: ev.push(chess.Move.null()), lambda: ev.push_uci("0000"), lambda: ev.push_san("--")):
        with pytest.raises(IllegalMoveError, match="null move in check"):
            push()
        assert ev.board.fen() == CHECKED and not ev.board.move_stack
    with pytest.raises(IllegalMoveError, match="null move in check"):
        nnue_infer.evaluate_game(chess.Board(CHECKED), [chess.Move.null()])
    assert len(nnue_infer.evaluate_game(chess.Board(CHECKED), [chess.Move.null()], validate=False)) == 2


def test_svg_into_a_missing_directory_or_a_full_device_is_named(capsys, tmp_path):
    status, out, err = run(capsys, "eval", "--trace", "--svg", tmp_path / "missing" / "t.svg", "startpos")
    assert status == 2 and out == "" and "--svg" in err and "does not exist" in err
    status, _, err = run(capsys, "eval", "--trace", "--svg", "/dev/full", "startpos")
    assert status == 1 and "cannot write --svg /dev/full" in err and "stdout" not in err


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


def test_push_uci_and_push_san_name_bad_moves_once_and_refuse_non_strings():
    ev = nnue_infer.Evaluator()
    with pytest.raises(IllegalMoveError) as info:
        ev.push_san("Rd1")
    assert str(info.value).count(chess.STARTING_FEN) == 1
    with pytest.raises(IllegalMoveError) as info:
        ev.push_uci("a1a8q")
    assert str(info.value).count(chess.STARTING_FEN) == 1
    for push in (ev.push_uci, ev.push_san):
        with pytest.raises(TypeError, match="move string, got NoneType"):
            push(None)
    assert ev.board.fen() == chess.STARTING_FEN and not ev.board.move_stack


@pytest.mark.parametrize("keep", [0.5, 0.999])
def test_a_truncated_safetensors_file_names_the_tensor_and_sizes(tmp_path, keep):
    from nnue_infer import load
    from nnue_infer.errors import NetworkFormatError
    from nnue_infer.resources import default_network_path

    data = default_network_path().read_bytes()
    path = tmp_path / "cut.safetensors"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(NetworkFormatError, match=r"truncated in tensor '[\w.]+' \(bytes \d+\.\.\d+ of the file\): "
                                                 rf"the file has {int(len(data) * keep)} bytes, its header needs "
                                                 rf"{len(data)}"):
        load(path)
