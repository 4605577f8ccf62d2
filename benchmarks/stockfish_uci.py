"""Stockfish 15.1 as a speed baseline: one long-lived engine process, ``position fen`` + ``eval``.

``eval`` prints Stockfish's whole evaluation trace (the NNUE bucket table, the derived piece
values, the classical terms) and ends with a ``Final evaluation`` line; a call returns when
that line arrives.
"""

from __future__ import annotations

import subprocess

#: Debian's Stockfish 15.1 (package ``stockfish``).
STOCKFISH = "/usr/games/stockfish"


class StockfishEval:
    """A Stockfish process driven over UCI (``with StockfishEval() as sf: sf.eval(fen)``)."""

    def __init__(self, binary: str = STOCKFISH) -> None:
        self.proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._send("uci")
        self._wait("uciok")
        self.version = self._id
        self._send("isready")
        self._wait("readyok")

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _wait(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("id name "):
                self._id = line[8:].strip()
            if line.startswith(prefix):
                return line
        raise RuntimeError(f"Stockfish exited before printing {prefix!r}")

    def eval(self, fen: str) -> str:
        """Run ``eval`` on ``fen``; returns the ``Final evaluation`` line."""
        self._send(f"position fen {fen}")
        self._send("eval")
        return self._wait("Final evaluation")

    def close(self) -> None:
        """Quit the engine and close the pipes."""
        if self.proc.poll() is None:
            self._send("quit")
            self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> StockfishEval:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
