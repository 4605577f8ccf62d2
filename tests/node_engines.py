"""Stockfish 16-19 as live oracles: the npm package ``stockfish`` under Node.js.

One long-lived process per engine; ``eval_lines(fen)`` sends ``position fen`` + ``eval`` +
``isready`` and returns the lines before ``readyok`` (a time-out restarts the process and
returns None).  The package is unpacked once from ``<cache>/npm/stockfish-V.tgz`` into
``<cache>/npm/unpacked/stockfish-V/`` (never into the repository).  Facts used:
``shared/reference/stockfish-engines.md``.
"""

from __future__ import annotations

import os
import queue
import random
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

import chess

from nnue_infer.resources import npm_dir

_sf16_driver = None  # set below

#: engine -> (npm version, entry inside package/, needs the SF16 driver)
ENGINES = {
    "16": ("16.0.0", "src/stockfish-nnue-16-single.js", True),
    "17.1": ("17.1.0", "src/stockfish-17.1-single-a496a04.js", False),
    "17.1-lite": ("17.1.0", "src/stockfish-17.1-lite-single-03e3232.js", False),
    "18": ("18.0.8", "bin/stockfish-18-single.js", False),
    "18-lite": ("18.0.8", "bin/stockfish-18-lite-single.js", False),
    "19": ("19.0.0", "bin/stockfish-19-single.js", False),
}


def sf16_driver() -> Path:
    """``shared/tools/sf16-node.js`` (the SF16 build's Node driver), found like the shared data."""
    from conftest import shared_dir

    return shared_dir() / "tools" / "sf16-node.js"


_sf16_driver = sf16_driver


def unpacked(npm_version: str) -> Path | None:
    """The unpacked package directory, unpacking the cached tarball on first use (None if absent)."""
    target = npm_dir() / "unpacked" / f"stockfish-{npm_version}"
    if (target / "package").is_dir():
        return target / "package"
    tgz = npm_dir() / f"stockfish-{npm_version}.tgz"
    if not tgz.is_file():
        return None
    target.mkdir(parents=True, exist_ok=True)
    # unpacked beside and renamed into place: another process (a pytest-xdist worker) unpacking the
    # same tarball at once never sees a half-written package
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        try:
            os.rename(Path(tmp) / "package", target / "package")
        except OSError:  # the other process was first
            if not (target / "package").is_dir():
                raise
    return target / "package"


class NodeEngine:
    def __init__(self, engine: str, sf16_driver: Path | None = None) -> None:
        npm_version, entry, needs_driver = ENGINES[engine]
        package = unpacked(npm_version)
        if package is None or shutil.which("node") is None:
            raise FileNotFoundError(f"stockfish@{npm_version} (npm pack into {npm_dir()}) or node missing")
        self.cwd = (package / entry).parent
        if needs_driver:
            tmp = self.cwd / f"sf16-node.js.{os.getpid()}"  # replaced whole: a starting engine never reads half of it
            shutil.copy(sf16_driver or _sf16_driver(), tmp)
            os.replace(tmp, self.cwd / "sf16-node.js")
            self.argv = ["node", "sf16-node.js"]
        else:
            self.argv = ["node", Path(entry).name]
        self.needs_nnue_option = needs_driver
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, encoding="latin-1")
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._pump, args=(self.proc, self.lines), daemon=True)
        self.reader.start()
        self._send("uci")
        self._until("uciok", 60)
        if self.needs_nnue_option:
            self._send("setoption name Use NNUE value true")
        self._send("isready")
        self._until("readyok", 60)

    @staticmethod
    def _pump(proc, lines) -> None:
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def _send(self, text: str) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def _until(self, marker: str, timeout: float) -> list[str] | None:
        out = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                return None
            if line is None:
                return None
            if line == marker:
                return out
            out.append(line)

    def eval_lines(self, fen: str, chess960: bool = False) -> list[str] | None:
        """The lines ``eval`` printed, or None (time-out or crash; the process is restarted)."""
        self._send(f"setoption name UCI_Chess960 value {'true' if chess960 else 'false'}")
        self._send(f"position fen {fen}")
        self._send("eval")
        self._send("isready")
        lines = self._until("readyok", 30)
        if lines is None:
            self.close()
            self.restarts += 1
            self._start()
        return lines

    def search_lines(self, fen: str, depth: int, options: dict[str, str] | None = None) -> list[str] | None:
        """The lines ``go depth <depth>`` printed up to and including ``bestmove``, after
        ``ucinewgame`` and the given ``setoption``s, or None (time-out; the process is restarted)."""
        for name, value in (options or {}).items():
            self._send(f"setoption name {name} value {value}")
        self._send("ucinewgame")
        self._send(f"position fen {fen}")
        self._send(f"go depth {depth}")
        out = []
        while True:
            try:
                line = self.lines.get(timeout=60)
            except queue.Empty:
                line = None
            if line is None:
                self.close()
                self.restarts += 1
                self._start()
                return None
            out.append(line)
            if line.startswith("bestmove"):
                return out

    def close(self) -> None:
        """Stop the process (quit, else kill) and close its pipes."""
        try:
            self._send("quit")
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def generated_positions(n: int, seed: int) -> list[tuple[str, bool]]:
    """(FEN, chess960) of ``n`` distinct positions from seeded random playouts (capture- and
    promotion-biased, a tenth Chess960), sampled at random plies: promotions, e.p. and
    castling rights all occur.  Legal play keeps them within what Stockfish accepts."""
    rng = random.Random(seed)
    out: dict[str, tuple[str, bool]] = {}
    while len(out) < n:
        c960 = rng.random() < 0.1
        board = chess.Board.from_chess960_pos(rng.randrange(960)) if c960 else chess.Board()
        board.chess960 = c960
        stop = rng.randrange(2, 160)
        for _ in range(stop):
            moves = list(board.legal_moves)
            if not moves:
                break
            good = [m for m in moves if m.promotion or board.is_capture(m) or board.is_castling(m)
                    or board.is_en_passant(m)]
            board.push(rng.choice(good) if good and rng.random() < 0.5 else rng.choice(moves))
        if not board.is_game_over() and chess.popcount(board.occupied) >= 3:
            fen = board.fen()
            out.setdefault(fen.rsplit(" ", 2)[0], (fen, c960))
    return list(out.values())


def _accepted(board: chess.Board) -> bool:
    """Whether Stockfish 17.1-19 accept the position (else they print ``Unsupported position`` and
    stop answering): python-chess's validity (one king each, no pawn on the first or last rank,
    at most 8 pawns and 16 pieces a side, the side not to move not in check) plus Stockfish's
    promotion rule: ``max(N-2,0) + max(B-2,0) + max(R-2,0) + max(Q-1,0) <= 8 - pawns`` per side."""
    if not board.is_valid():
        return False
    for colour in chess.COLORS:
        n = [len(board.pieces(t, colour)) for t in (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN)]
        if max(n[1] - 2, 0) + max(n[2] - 2, 0) + max(n[3] - 2, 0) + max(n[4] - 1, 0) > 8 - n[0]:
            return False
    return True


def threat_positions(n: int, seed: int) -> list[tuple[str, bool]]:
    """(FEN, False) of ``n`` random placements rich in threats: per side 0-8 pawns, then as many
    knights, bishops, rooks and queens (up to 4 queens) as Stockfish's promotion rule allows, on
    random squares: many attacked and defended pieces, pins, x-rays and pawn pairs.  A quarter
    have kings and rooks at home with castling rights, a quarter a legal e.p. capture (a pawn
    that just moved two squares beside an enemy pawn).  Kept when Stockfish accepts them
    (:func:`_accepted`) and, but for one in ten, the side to move is not in check."""
    rng = random.Random(seed)
    out: dict[str, tuple[str, bool]] = {}
    while len(out) < n:
        board = chess.Board(None)
        kind = rng.random()
        turn = rng.random() < 0.5
        ep = None
        if kind < 0.25:  # castling: kings on e1/e8, rooks in (some) corners
            for colour, king in ((chess.WHITE, chess.E1), (chess.BLACK, chess.E8)):
                board.set_piece_at(king, chess.Piece(chess.KING, colour))
                for corner in (king - 4, king + 3):
                    if rng.random() < 0.7:
                        board.set_piece_at(corner, chess.Piece(chess.ROOK, colour))
        elif kind < 0.5:  # e.p.: the side not to move just pushed a pawn two squares
            file = rng.randrange(8)
            side = rng.choice([f for f in (file - 1, file + 1) if 0 <= f < 8])
            rank = 3 if turn == chess.BLACK else 4  # the pushed pawn's rank (0-based)
            board.set_piece_at(chess.square(file, rank), chess.Piece(chess.PAWN, not turn))
            board.set_piece_at(chess.square(side, rank), chess.Piece(chess.PAWN, turn))
            ep = chess.square(file, rank - 1 if turn == chess.BLACK else rank + 1)
        keep_empty = () if ep is None else (ep, 2 * ep - chess.square(chess.square_file(ep), rank))  # e.p. and origin
        squares = [s for s in chess.SQUARES if board.piece_at(s) is None and s not in keep_empty]
        rng.shuffle(squares)
        for colour in chess.COLORS:
            if not board.pieces(chess.KING, colour):
                board.set_piece_at(squares.pop(), chess.Piece(chess.KING, colour))
            pawns = rng.randrange(9 - len(board.pieces(chess.PAWN, colour)))
            budget = 8 - pawns - len(board.pieces(chess.PAWN, colour))
            kinds = [chess.PAWN] * pawns
            for piece in (chess.QUEEN, chess.ROOK, chess.BISHOP, chess.KNIGHT):
                usual = 1 if piece == chess.QUEEN else 2
                count = rng.randrange(usual + min(budget, 3) + 1) - len(board.pieces(piece, colour))
                budget -= max(count - usual, 0)
                kinds += [piece] * count
            for piece in kinds:
                square = next((s for s in squares if piece != chess.PAWN or 8 <= s < 56), None)
                if square is not None:
                    squares.remove(square)
                    board.set_piece_at(square, chess.Piece(piece, colour))
        board.turn = turn
        board.castling_rights = chess.BB_CORNERS if kind < 0.25 else chess.BB_EMPTY
        board.castling_rights = board.clean_castling_rights()
        board.ep_square = ep
        if not _accepted(board) or (board.is_check() and rng.random() < 0.9):
            continue
        if ep is not None and not board.has_legal_en_passant():
            continue
        fen = board.fen()
        out.setdefault(fen.rsplit(" ", 2)[0], (fen, False))
    return list(out.values())
