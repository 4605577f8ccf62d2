"""Findings of session 33's hostile passes, mended (third round).

Each test is a way an adversarial user broke the program: the standard is a clear error naming the
problem, never a traceback, a hang or a silent wrong number, and a refused operation changes nothing.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import chess
import pytest

import nnue_infer
from nnue_infer.cli import main
from nnue_infer.errors import ConcurrentUseError

START_E5 = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


class _InterruptedBoard(chess.Board):
    """A board whose ``parse_uci`` / ``parse_san`` first run ``interrupt`` (once): another thread acting on
    the evaluator while the parse reads the board (``Board.copy`` keeps the class, so the evaluator's own
    copy is one too)."""

    interrupt = None

    def _run_interrupt(self):
        hook, type(self).interrupt = type(self).interrupt, None
        if hook is not None:
            hook()

    def parse_uci(self, uci):
        self._run_interrupt()
        return super().parse_uci(uci)

    def parse_san(self, san):
        self._run_interrupt()
        return super().parse_san(san)


@pytest.mark.parametrize("method, text", [("push_uci", "e2e4"), ("push_san", "e4")])
def test_push_text_parses_under_the_in_use_token(method, text):
    """``push_uci`` / ``push_san`` parsed the move before taking the in-use token: a push from another
    thread could run during the parse (reading a board half pushed), and the move parsed for one position was
    then played on another (here refused as illegal; a move legal in both was played silently).  The parse
    now holds the token: the other thread's push is refused with ConcurrentUseError and the board has only
    the parsed move."""
    ev = nnue_infer.Evaluator()
    ev.set_position(_InterruptedBoard())
    other: list = []

    def push_from_another_thread():
        def run():
            try:
                ev.push(chess.Move.from_uci("g1f3"))
                other.append("pushed")
            except ConcurrentUseError as exc:
                other.append(exc)

        t = threading.Thread(target=run)
        t.start()
        t.join()

    _InterruptedBoard.interrupt = push_from_another_thread
    move = getattr(ev, method)(text)
    assert move == chess.Move.from_uci("e2e4")
    assert len(other) == 1 and isinstance(other[0], ConcurrentUseError), other
    assert ev.board.move_stack == [chess.Move.from_uci("e2e4")]
    after = chess.Board()
    after.push_uci("e2e4")
    assert ev.evaluate() == nnue_infer.evaluate(after)


def test_push_text_errors_still_name_the_move_and_change_nothing():
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board())
    with pytest.raises(nnue_infer.IllegalMoveError, match="e2e5"):
        ev.push_uci("e2e5")
    with pytest.raises(nnue_infer.IllegalMoveError, match="Ke2"):
        ev.push_san("Ke2")
    with pytest.raises(TypeError, match="expected a UCI move string, got int"):
        ev.push_uci(7)
    assert ev.board.move_stack == [] and ev._free == [None]  # the token is back after each error


def test_evaluate_game_moves_generator_may_read_the_evaluators_board():
    """``evaluate_game`` read its moves while holding the in-use token, so a generator of moves reading
    ``ev.board`` raised ConcurrentUseError in the caller's own thread (71a6d4c mended ``evaluate_moves``);
    so did the module-level ``evaluate_game`` given a generator calling ``nnue_infer.evaluate`` (the same
    per-thread evaluator).  The moves are now read into a list before the token is taken."""
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board(START_E5))
    board = chess.Board(START_E5)
    captures = [m for m in board.legal_moves if board.is_capture(m)]
    assert captures  # Nxe5
    expected = ev.evaluate_game(START_E5, captures[:1])
    values = ev.evaluate_game(START_E5, (m for m in list(ev.board.legal_moves) if ev.board.is_capture(m)))
    assert values.tolist() == expected.tolist()
    moves = ["e2e4", "e7e5", "g1f3"]
    seen = []

    def moves_noting_their_values():
        b = chess.Board()
        for uci in moves:
            seen.append(nnue_infer.evaluate(b))
            b.push_uci(uci)
            yield uci

    values = nnue_infer.evaluate_game(chess.Board(), moves_noting_their_values())
    assert values.tolist() == nnue_infer.evaluate_game(chess.Board(), moves).tolist()
    assert seen == values[:-1].tolist()


def test_evaluate_children_batch_positions_generator_may_read_the_evaluators_board():
    """``evaluate_children_batch`` likewise read its positions under the token."""
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board(START_E5))
    expected = ev.evaluate_children_batch([START_E5, chess.STARTING_FEN], uci=True)
    got = ev.evaluate_children_batch((ev.board.fen() if i == 0 else chess.STARTING_FEN for i in range(2)), uci=True)
    assert got[0].tolist() == expected[0].tolist() and got[1] == expected[1]
    assert got[2].tolist() == expected[2].tolist()
    with pytest.raises(TypeError, match="single str"):
        ev.evaluate_children_batch(START_E5)


def test_a_quoted_glob_pattern_in_process_says_it_names_no_file(capsys, tmp_path, monkeypatch):
    """A glob pattern the shell did not expand (quoted) as a position argument was read as a FEN ("invalid
    character 'd' in the placement field"), and as ``--epd PATTERN`` without --workers it said only that the
    file does not exist.  Both now say that no such file exists, that patterns are expanded only by a Dask
    job (or by the shell), and where a file goes; a position argument naming an existing file says to give
    it with --epd / --pgn."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.epd").write_text(f"{chess.STARTING_FEN}\n")
    pattern_help = ("a glob pattern is expanded only by a Dask job (--epd / --pgn PATTERN with --workers N or "
                    "--scheduler ADDRESS, and --output DIR), or by the shell when unquoted")
    status = main(["eval", "data/*.epd"])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.startswith("error: invalid character 'd' in the placement field at column 1 of 'data/*.epd'; "
                          f"no file 'data/*.epd' exists: {pattern_help}"), err
    assert err.rstrip().endswith("a file goes with --epd FILE (positions) or --pgn FILE (games)"), err
    for option in ("--epd", "--pgn"):
        status = main(["eval", option, f"data/*.{option[2:]}"])
        out, err = capsys.readouterr()
        assert status == 2 and out == ""
        assert f"error: Invalid value for '{option}': File 'data/*.{option[2:]}' does not exist: {pattern_help}" \
            in err, err
    status = main(["eval", "data/a.epd"])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.rstrip().endswith("; 'data/a.epd' is a file: give it with --epd FILE (positions) or --pgn FILE "
                                 "(games)"), err
    status = main(["eval", "data/missing.pgn"])
    _, err = capsys.readouterr()
    assert status == 1 and "; no file 'data/missing.pgn' exists; a file goes with --epd" in err, err
    status = main(["eval", "8/8/8 w"])  # a FEN's '/' is no path: no file is named
    _, err = capsys.readouterr()
    assert status == 1 and err == "error: the placement field does not have 8 ranks at column 6 of '8/8/8 w'\n"


def _feed_in_pieces(fd: int, pieces: list[bytes]) -> None:
    """Write ``pieces`` to the pipe ``fd`` (then close it), each once its reader has read everything before it (the
    pipe is empty: FIONREAD), so that each of the reader's reads gets one piece at most, whatever its start-up time."""
    import fcntl
    import struct
    import termios
    import time

    for i, piece in enumerate(pieces):
        if i:
            deadline = time.monotonic() + 120
            while struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # the reader is back in its read, waiting
        os.write(fd, piece)
    os.close(fd)


@pytest.mark.parametrize("option", ["--pgn", "--epd"])
def test_a_nul_byte_after_the_first_piece_of_a_slow_pipe_is_found(option):
    """The binary-input check looks for a NUL byte in an input's first 8 KiB (inputs.SNIFF_BYTES), but read
    from a pipe it saw what the first read gave: a PGN on standard input whose NUL bytes came in a later piece
    was scored (status 0, the second game's tags lost to the NUL bytes before them).  The start of a pipe is
    now read until 8 KiB or its end."""
    import subprocess
    import sys

    if option == "--pgn":
        pieces = [b'[Event "x"]\n\n1. e4 e5 *\n', b'\0\0\0[Event "y"]\n\n1. d4 *\n']
    else:
        pieces = [f"{chess.STARTING_FEN}\n".encode(), f"{START_E5}\n\0\n".encode()]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "nnue_infer", "eval", option, "-"], stdin=r,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(r)
    try:
        with ThreadPoolExecutor(1) as pool:
            fed = pool.submit(_feed_in_pieces, w, pieces)
            out, err = proc.communicate(timeout=300)
            fed.result()
    finally:
        proc.kill()
        proc.wait()
    kind = "a PGN text file" if option == "--pgn" else "an EPD/FEN text file"
    at, line = (len(pieces[0]), 4) if option == "--pgn" else (len(pieces[0]) + len(START_E5) + 1, 3)
    assert proc.returncode == 1 and out == b"", (proc.returncode, out)
    assert f"error: <stdin>: NUL byte at byte offset {at} (line {line}): binary data, not {kind}" in err.decode(), err


def test_a_nul_byte_in_a_later_gzip_member_is_found(tmp_path, capsys):
    """One step of the gzip decoder gives one member's bytes: a NUL byte in the second member of a short
    first one went unseen as from a slow pipe (zstd frames were read on to the chunk's end already)."""
    import gzip

    path = tmp_path / "games.pgn.gz"
    path.write_bytes(gzip.compress(b'[Event "x"]\n\n1. e4 e5 *\n') + gzip.compress(b'\0\0\0[Event "y"]\n\n1. d4 *\n'))
    status = main(["eval", "--pgn", str(path)])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err == f"error: {path}: NUL byte at byte offset 24 (line 4): binary data, not a PGN text file\n"


@pytest.mark.parametrize("refusal", ["other network", "damaged manifest", "parts without manifest", "pgn in epd",
                                     "output is a file", "errors dir is a file"])
def test_a_refused_dask_job_starts_no_cluster(tmp_path, capsys, monkeypatch, refusal):
    """``eval --workers N`` started its local cluster (about 4 s, N processes) before the checks that refuse a
    job without one (its output's manifest, its inputs' content, the output path): a refused job took seconds
    and started processes for nothing.  The checks (io.distributed.check_job) now come first: the job is
    refused at once, no cluster is constructed (distributed.LocalCluster and Client raise here), and nothing
    is created."""
    distributed = pytest.importorskip("distributed")
    from nnue_infer.io.distributed import MANIFEST, score_files
    from nnue_infer.resources import default_network_path

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for a refused job")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    monkeypatch.setattr(distributed, "Client", no_cluster)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.epd").write_text(f"{chess.STARTING_FEN}\n")
    inputs, net = ["--epd", "a.epd"], []
    out = tmp_path / "ds"
    expected = {
        "other network": f"error: {out} holds results of network 'default', not 'net.nnue': use another output "
                         "directory\n",
        "damaged manifest": f"error: {out / MANIFEST}: not JSON",
        "parts without manifest": f"error: {out} holds parts (part-a-0123456789ab.parquet) but no manifest",
        "pgn in epd": "error: games.epd:1: this is PGN (a tag pair or moves), not a FEN/EPD line",
        "output is a file": f"error: {out}: exists and is not a directory",
        "errors dir is a file": f"error: {out / '_errors'}: exists and is not a directory",
    }[refusal]
    if refusal == "other network":
        score_files([str(tmp_path / "a.epd")], str(out), "default")  # in process, no cluster
        (tmp_path / "net.nnue").write_bytes(default_network_path().read_bytes())
        net = ["--net", "net.nnue"]
    elif refusal == "damaged manifest":
        out.mkdir()
        (out / MANIFEST).write_text("{")
    elif refusal == "parts without manifest":
        out.mkdir()
        (out / "part-a-0123456789ab.parquet").write_bytes(b"")
    elif refusal == "pgn in epd":
        (tmp_path / "games.epd").write_text('[Event "x"]\n\n1. e4 *\n')
        inputs = ["--epd", "games.epd"]
    elif refusal == "output is a file":
        out.write_text("mine\n")
    else:
        out.mkdir()
        (out / "_errors").write_text("mine\n")
    before = sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    status = main(["eval", *inputs, *net, "--workers", "1", "-o", str(out), "-q"])
    stdout, err = capsys.readouterr()
    assert status == 1 and stdout == ""
    assert err.startswith(expected), err
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before  # nothing created or changed
