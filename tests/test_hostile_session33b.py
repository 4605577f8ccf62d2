"""Hostile pass over session 33's changes (second round).

Each test is a way an adversarial user broke one of the session's changes: the standard is a clear
error naming the problem, never a traceback, and a refused operation changes nothing.
"""

from __future__ import annotations

import os

import chess
import pytest

import nnue_infer
from nnue_infer.cli import main

START_E5 = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


def test_item1_moves_generator_may_read_the_evaluators_board():
    """Item 1 (Evaluator.board takes the in-use token, eb8e8d9): a generator of moves given to
    ``evaluate_moves`` is read while the call holds the token, so one filtering the current position's
    moves by ``ev.board`` (``ev.evaluate_moves(moves=(m for m in ... if ev.board.is_capture(m)))``)
    raised ConcurrentUseError in the caller's own thread; it worked before the session.  The moves are
    now read before the token is taken, for ``evaluate_moves`` and ``evaluate_moves_cp``."""
    ev = nnue_infer.Evaluator()
    board = chess.Board(START_E5)
    ev.set_position(board)
    captures = [m for m in board.legal_moves if board.is_capture(m)]
    assert captures  # Nxe5
    expected = ev.evaluate_moves(moves=captures)
    values = ev.evaluate_moves(moves=(m for m in list(ev.board.legal_moves) if ev.board.is_capture(m)))
    assert values.tolist() == expected.tolist()
    cps = ev.evaluate_moves_cp(moves=(m for m in list(ev.board.legal_moves) if ev.board.is_capture(m)))
    assert cps.tolist() == ev.evaluate_moves_cp(moves=captures).tolist()


def test_item2_info_of_an_empty_name_is_an_error(capsys):
    """Item 2 (``nnue-infer info NAME``, d0ad832): ``info ""`` died with a FileNotFoundError traceback
    (``Path("")`` is ``.``, which exists, so ``network_from_spec`` went on to load ``""``); it was a usage
    error before the session.  Now the message of a name that is no network and no file, as for any
    missing path; ``Evaluator("")`` raises the same NetworkNotFoundError."""
    status = main(["info", ""])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.startswith("error: '' is no known network name and no file")
    with pytest.raises(nnue_infer.NetworkNotFoundError, match="'' is no known network name"):
        nnue_infer.Evaluator("")


@pytest.mark.parametrize("kind", ["epd", "pgn"])
def test_item3_job_refuses_text_followed_by_nul_bytes_before_writing(tmp_path, kind):
    """Item 3 (Dask jobs pre-check input kinds, ed0f7e7): the client's check looked at whole lines of
    the first 8 KiB only, so a NUL byte after their last newline (text followed by a run of NUL bytes,
    as a file cut short by a crash keeps; a small binary file) passed it; the input's task then
    refused the file after the job had written the manifest, the lock and the other inputs' parts.
    Now the NUL byte is found in the client and the refused job writes nothing."""
    pytest.importorskip("distributed")
    from nnue_infer.errors import InputKindError
    from nnue_infer.io.distributed import score_files

    good = tmp_path / "good.epd"
    good.write_text(f"{chess.STARTING_FEN}\n" * 3)
    text = f"{chess.STARTING_FEN}\n" * 2 if kind == "epd" else '[Event "x"]\n\n1. e4 e5 *\n'
    padded = tmp_path / f"padded.{kind}"
    padded.write_bytes(text.encode() + b"\0" * 4096)
    out = tmp_path / "scores"
    with pytest.raises(InputKindError, match=f"padded.{kind}: NUL byte at byte offset {len(text)} "):
        score_files([str(good), str(padded)], str(out), client=None)
    assert not os.path.exists(out)


def test_item4_output_under_a_file_names_it_as_no_directory(capsys, tmp_path):
    """Item 4 (``-o FILE`` opened by its first write, 480d047): ``-o notes.txt/x.csv`` under a regular file
    said "directory .../notes.txt does not exist" while it exists (the open said "Not a directory" before
    the session); now it says the path is not a directory, before any work."""
    (tmp_path / "notes.txt").write_text("mine\n")
    target = tmp_path / "notes.txt" / "x.csv"
    status = main(["eval", "startpos", "-o", str(target)])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err == f"error: cannot write --output {target}: {tmp_path / 'notes.txt'} is not a directory\n"
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("how", ["positions", "trace", "activations"])
def test_item5_every_position_refused_leaves_the_output_file_as_it_was(capsys, tmp_path, how):
    """Item 5 (a refused run leaves no output file, 480d047): with every position refused (a bad FEN on the
    command line; every line of the EPD file of ``--trace`` / ``--activations``), ``-o FILE`` was still
    opened when the run ended, so an earlier file of that name was emptied (``--activations``: replaced
    by an archive of no positions).  Now the run ends with status 1 before any output is opened."""
    epd = tmp_path / "bad.epd"
    epd.write_text("8/8/8/8/8/8/8/4K3 w - -\n")
    target = tmp_path / ("out.npz" if how == "activations" else "out.csv")
    target.write_text("earlier results\n")
    argv = {"positions": ["eval", "rnbqkbnr/pppppppp/8/8"], "trace": ["eval", "--trace", "--epd", str(epd)],
            "activations": ["eval", "--activations", "--epd", str(epd)]}[how]
    status = main([*argv, "-o", str(target)])
    out, err = capsys.readouterr()
    assert status == 1 and out == "" and err.startswith("error: ")
    assert target.read_text() == "earlier results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bad.epd", target.name])
