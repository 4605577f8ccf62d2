"""A minimal UCI client for Debian's Stockfish 15.1 and a parser of its ``eval`` output.

One long-lived process, fed ``position fen <fen>`` / ``eval`` / ``isready`` (the way the dev
corpus was produced, see ``shared/data/README.md``).  ``eval`` is not part of UCI proper, so
python-chess's engine module cannot run it; a plain pipe does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

INFO_LINE = "info string NNUE evaluation using nn-ad9b42354671.nnue enabled"


class Stockfish:
    """``Stockfish(path)``; ``eval_lines(fen)`` returns every line ``eval`` printed."""

    def __init__(self, path: str | Path) -> None:
        # Bytes, decoded as Latin-1 and split at "\n" only: Stockfish's piece-value cells print
        # chr('0' + digit) even when the "digit" exceeds 9 (100,000 cp and up, only with extreme
        # networks), which may be any byte, "\r" included; every byte stays one character.
        self.proc = subprocess.Popen([str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.id_lines = self._command("uci", "uciok")
        self.chess960 = False

    def _command(self, text: str, until: str) -> list[str]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write((text + "\n").encode("latin-1"))
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline().decode("latin-1")
            if not line:
                raise RuntimeError(f"stockfish exited while waiting for {until!r} after {text!r}")
            line = line.removesuffix("\n")
            if line == until:
                return lines
            lines.append(line)

    def set_chess960(self, on: bool) -> None:
        if on != self.chess960:
            self._command(f"setoption name UCI_Chess960 value {'true' if on else 'false'}\nisready", "readyok")
            self.chess960 = on

    def eval_lines(self, fen: str, chess960: bool = False) -> list[str]:
        self.set_chess960(chess960)
        return self._command(f"position fen {fen}\neval\nisready", "readyok")

    def search_lines(self, fen: str, depth: int, options: dict[str, str] | None = None) -> list[str]:
        """The lines ``go depth <depth>`` printed, ``bestmove`` included, after ``ucinewgame`` and
        the given ``setoption``s."""
        setup = "".join(f"setoption name {name} value {value}\n" for name, value in (options or {}).items())
        self._command(f"{setup}ucinewgame\nposition fen {fen}\nisready", "readyok")
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"go depth {depth}\n".encode("latin-1"))
        self.proc.stdin.flush()
        lines = []
        while not lines or not lines[-1].startswith("bestmove"):
            line = self.proc.stdout.readline().decode("latin-1")
            if not line:
                raise RuntimeError(f"stockfish exited during go depth {depth} on {fen}")
            lines.append(line.removesuffix("\n"))
        return lines

    def perft(self, fen: str, depth: int, chess960: bool = False) -> dict[str, int]:
        """``go perft <depth>``'s ``move: count`` lines as {UCI move: count} (the total checked against them)."""
        self.set_chess960(chess960)
        self._command(f"position fen {fen}\nisready", "readyok")
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"go perft {depth}\n".encode("latin-1"))
        self.proc.stdin.flush()
        counts: dict[str, int] = {}
        while True:
            line = self.proc.stdout.readline().decode("latin-1").strip()
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"stockfish exited during go perft {depth} on {fen}")
            if line.startswith("Nodes searched: "):
                assert int(line.split()[-1]) == sum(counts.values()), line
                self.proc.stdout.readline()  # the blank line after it
                return counts
            if line:
                move, count = line.split(": ")
                counts[move] = int(count)

    def close(self) -> None:
        assert self.proc.stdin and self.proc.stdout
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


def nnue_part(lines: list[str]) -> list[str] | None:
    """The NNUE part of ``eval`` output as :meth:`Trace.format_stockfish` renders it.

    From `` NNUE derived piece values:`` to the bucket table's bottom border, a blank line, then
    the ``NNUE evaluation`` line.  ``None`` when Stockfish printed no NNUE numbers (in check).
    """
    if "Final evaluation: none (in check)" in lines:
        return None
    start = lines.index(" NNUE derived piece values:")
    head = next(i for i, line in enumerate(lines) if line.startswith(" NNUE network contributions ("))
    end = head + 5 + 8  # title, border, 2 header lines, border, 8 bucket rows
    assert lines[end].startswith("+------------+"), lines[end]
    nnue_line = next(line for line in lines if line.startswith("NNUE evaluation "))
    return lines[start : end + 1] + ["", nnue_line]


def nnue_line(lines: list[str]) -> str | None:
    """The ``NNUE evaluation ... (white side)`` line, or ``None`` in check."""
    return next((line for line in lines if line.startswith("NNUE evaluation ")), None)
