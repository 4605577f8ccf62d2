"""Stockfish 16-18 as live oracles: the npm package ``stockfish`` under Node.js.

One long-lived process per engine; ``eval_lines(fen)`` sends ``position fen`` + ``eval`` +
``isready`` and returns the lines before ``readyok`` (a time-out restarts the process and
returns None).  The package is unpacked once from ``<cache>/npm/stockfish-V.tgz`` into
``<cache>/npm/unpacked/stockfish-V/`` (never into the repository).  Facts used:
``shared/reference/stockfish-engines.md``.
"""

from __future__ import annotations

import queue
import random
import shutil
import subprocess
import tarfile
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
    with tarfile.open(tgz) as tar:
        tar.extractall(target, filter="data")
    return target / "package"


class NodeEngine:
    def __init__(self, engine: str, sf16_driver: Path | None = None) -> None:
        npm_version, entry, needs_driver = ENGINES[engine]
        package = unpacked(npm_version)
        if package is None or shutil.which("node") is None:
            raise FileNotFoundError(f"stockfish@{npm_version} (npm pack into {npm_dir()}) or node missing")
        self.cwd = (package / entry).parent
        if needs_driver:
            shutil.copy(sf16_driver or _sf16_driver(), self.cwd / "sf16-node.js")
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
