"""The result of :meth:`Evaluator.trace` and its rendering as the ``eval`` text of Stockfish
15.1, 16, 17.1, 18 and 19.

What differs between versions: the pawn normalisation (:mod:`nnue_infer.normalisation`: 361,
328, or the material-dependent WDL model), the piece-value board (15.1-18 only, values
truncated to centipawns by 15.1/16, rounded by 17.1/18), the table header (19 adds
"Normalized," and drops the leading space) and the value lines (19 adds the raw value in
internal units).  Only 15.1 formats its table cells into fixed char buffers (emulated for
absurd values); later versions use streams.

17.1, 18 and 19 end their text with ``Final evaluation``, Stockfish's own static evaluation
(:attr:`Trace.final`, computed by :mod:`nnue_infer.static_evaluation`).

Source of every format: Stockfish sf_15.1 / sf_16 ``nnue/evaluate_nnue.cpp`` (``trace``,
``format_cp_compact``, ``format_cp_aligned_dot``) and ``evaluate.cpp`` (``trace``); sf_17.1 /
sf_18 ``nnue/nnue_misc.cpp`` and ``evaluate.cpp`` (``trace``); Stockfish 19: ``shared/reference/stockfish-19-nnue.md`` section 10.
"""

from __future__ import annotations

from dataclasses import dataclass

import chess

from .constants import NORMALIZE_TO_PAWN_VALUE as PAWN
from .normalisation import PAWN_VALUE, WDL_A, WDL_VERSIONS, tdiv, to_cp, wdl, white_side_pawns, wrap_int32


def to_centipawns(value: int, per_pawn: int = PAWN) -> int:
    """Internal units to centipawns as Stockfish 15.1 does: ``tdiv(100 * value, 361)``.

    ``per_pawn`` is the network's ``Architecture.units_per_pawn`` (361 for Stockfish 15.1).
    """
    return tdiv(100 * value, per_pawn)


def _sign(x: int) -> str:
    return "+" if x > 0 else "-" if x < 0 else " "


def format_cp_compact(value: int, per_pawn: int = PAWN, cp: int | None = None) -> str:
    """5-character piece value: sign then ``d.dd`` / ``dd.d`` / ``ddd `` (truncated centipawns).

    Exactly as Stockfish 15.1's ``format_cp_compact`` computes it, also for absurd values
    (only extreme networks reach them): ``100 * v`` is an int32 product (wraps), and each digit
    is the char ``'0' + d``, so a "digit" of 10 or more (100,000 cp and up) prints as the
    Latin-1 character with that code (mod 256).  ``cp`` gives the centipawns directly
    (Stockfish 17.1/18 round them with the WDL model).
    """
    cp = abs(tdiv(wrap_int32(100 * value), per_pawn) if cp is None else cp)
    if cp >= 10000:
        first, rest = cp // 10000, f"{cp // 1000 % 10}{cp // 100 % 10} "
    elif cp >= 1000:
        first, rest = cp // 1000, f"{cp // 100 % 10}.{cp // 10 % 10}"
    else:
        first, rest = cp // 100, f".{cp // 10 % 10}{cp % 10}"
    return _sign(value) + chr((ord("0") + first) % 256) + rest


def format_cp_aligned(value: int, per_pawn: int = PAWN) -> str:
    """Table cell: sign then C ``%6.2f`` of ``|value| / per_pawn`` (361 for Stockfish 15.1); 7
    characters up to 999.99 pawns, more beyond."""
    return _sign(value) + "%6.2f" % (abs(value) / per_pawn)


def table_cells(cells: tuple[str, str, str]) -> list[str]:
    """The three cells of a bucket row as Stockfish 15.1 prints them.

    Stockfish ``sprintf``s the PSQT, positional and total cells into ``char buffer[3][8]``, in
    that order, then prints each as a C string.  A cell longer than 7 characters (1,000 pawns
    or more) runs into the next buffer and is cut by the next ``sprintf``, whose text then shows
    twice; emulated here so that ``str(trace)`` stays byte-identical for any network.
    """
    memory = bytearray(24)  # memset to 0
    for i, text in enumerate(cells):
        data = text.encode("latin-1") + b"\0"
        end = 8 * i + len(data)
        memory.extend(bytes(max(0, end - len(memory))))
        memory[8 * i:end] = data
    return [memory[8 * i:memory.index(0, 8 * i)].decode("latin-1") for i in range(3)]


@dataclass(frozen=True)
class Trace:
    """Everything Stockfish 15.1's ``eval`` prints about the NNUE, as exact integers.

    Attributes
    ----------
    fen : str
        The position.
    side_to_move : bool
        ``chess.WHITE`` or ``chess.BLACK``.
    psqt : tuple of int
        Per bucket (bucket 0 first): ``tdiv(wrap32(psqt_stm - psqt_opp), 2)``, internal units x
        OutputScale (16), side to move's point of view.
    positional : tuple of int
        Per bucket: layer-stack output including the forward skip, same units and view.
    bucket : int
        The bucket used, ``(pieces - 1) // 4`` for Stockfish 15.1.
    value : int
        ``tdiv(wrap32(psqt[bucket] + positional[bucket]), 16)`` (wrap32: Stockfish's int32
        arithmetic): internal units (361 = one pawn),
        side to move's point of view.
    piece_values : dict of int to int
        Square (a1 = 0) -> value of the piece there (kings excluded), internal units, White's
        point of view: evaluation minus the evaluation without that piece.
    output_scale : int
        OutputScale of the network (16).
    units_per_pawn : int
        Internal units per pawn for the rendered text of versions 15.1 and 16 (the network's
        ``Architecture.units_per_pawn``: 361 for Stockfish 15.1, 328 for 16).
    stockfish_version : str
        Whose ``eval`` text :meth:`format_stockfish` renders by default (the network's
        ``Architecture.stockfish_version``).
    material : int
        P + 3N + 3B + 5R + 9Q of the position (input of the 17.1+ normalisation).
    final : int or None
        Stockfish's static evaluation (its ``Final evaluation``) for ``stockfish_version`` 17.1,
        18 and 19: internal units, side to move's point of view (see
        :func:`nnue_infer.final_evaluation`); None for 15.1 and 16 (their final adds a
        classical evaluation) and where 17.1 / 18 would take it from a small net that is not
        available.
    """

    fen: str
    side_to_move: bool
    psqt: tuple[int, ...]
    positional: tuple[int, ...]
    bucket: int
    value: int
    piece_values: dict[int, int]
    output_scale: int = 16
    units_per_pawn: int = PAWN
    stockfish_version: str = "15.1"
    material: int = 0
    final: int | None = None

    @property
    def wdl(self) -> tuple[int, int, int]:
        """Win, draw and loss per mille of the static evaluation as ``stockfish_version``'s
        ``UCI_ShowWDL`` model gives them (:func:`nnue_infer.normalisation.wdl`): of
        :attr:`final` where there is one, else of :attr:`value` (15.1 and 16: with the game ply
        of :attr:`fen`)."""
        board = chess.Board(self.fen)
        value = self.value if self.final is None else self.final
        return wdl(value, self.material, self.stockfish_version, ply=board.ply())

    @property
    def value_white(self) -> int:
        """``value`` from White's point of view (internal units)."""
        return self.value if self.side_to_move == chess.WHITE else -self.value

    def format_stockfish(self, version: str | None = None) -> str:
        """The NNUE part of a Stockfish version's ``eval`` output, byte for byte.

        ``version`` (default :attr:`stockfish_version`): ``"15.1"``, ``"16"``, ``"17.1"`` or
        ``"18"``: the piece-value board (White's view), the bucket table (side to move's view)
        and the ``NNUE evaluation ... (white side)`` line, separated by blank lines; ``"19"``:
        the table (``Normalized``), then the raw ``(side to move, internal units)`` line and the
        white-side line.  No trailing newline.  Stockfish prints none of it when the side to
        move is in check; this renders it anyway.  The numbers are this trace's network's
        (17.1/18 print their big net's, whichever net evaluates).  ``ValueError`` for another version.
        """
        if version is not None and version not in WDL_VERSIONS:
            raise ValueError(f"version: {version!r} is not a Stockfish version this renders; give one of "
                             f"{', '.join(map(repr, WDL_VERSIONS))} (or None for the network's own)")
        v = version or self.stockfish_version
        per_pawn = self.units_per_pawn if version is None else PAWN_VALUE.get(v)  # 15.1, 16
        if v in PAWN_VALUE:
            def cells(xs: tuple[int, int, int]) -> list[str]:
                texts = tuple(format_cp_aligned(x, per_pawn) for x in xs)
                return table_cells(texts) if v == "15.1" else list(texts)  # 15.1: char buffers

            def compact(x: int) -> str:
                return format_cp_compact(x, per_pawn)
        else:
            def cp(x: int) -> int:
                return to_cp(x, v, self.material)

            def cells(xs: tuple[int, int, int]) -> list[str]:
                return [_sign(x) + "%6.2f" % abs(0.01 * cp(x)) for x in xs]

            def compact(x: int) -> str:
                return format_cp_compact(x, cp=cp(x))
        lines: list[str] = []
        if v != "19":
            lines += [" NNUE derived piece values:", *self._piece_board(compact), ""]
        border = "+------------+------------+------------+------------+"
        color = "White" if self.side_to_move == chess.WHITE else "Black"
        lines += [
            f"NNUE network contributions (Normalized, {color} to move)" if v == "19"
            else f" NNUE network contributions ({color} to move)",
            border,
            "|   Bucket   |  Material  | Positional |   Total    |",
            "|            |   (PSQT)   |  (Layers)  |            |",
            border,
        ]
        for k, (p, q) in enumerate(zip(self.psqt, self.positional)):
            pk, qk = tdiv(p, self.output_scale), tdiv(q, self.output_scale)
            a, b, c = cells((pk, qk, pk + qk))
            row = f"|  {k}         |  {a}   |  {b}   |  {c}   |"
            lines.append(row + (" <-- this bucket is used" if k == self.bucket else ""))
        lines += [border, ""]
        if v == "19":
            lines.append("NNUE evaluation".ljust(25) + "%+d (side to move, internal units)" % self.value)
        white = white_side_pawns(self.value_white, v, self.material, per_pawn)
        lines.append("NNUE evaluation".ljust(23) + "%+.2f (white side)" % white)
        if v == self.stockfish_version and v in WDL_A and self.final is not None:
            final_white = self.final if self.side_to_move == chess.WHITE else -self.final
            lines.append("Final evaluation".ljust(22 if v == "19" else 23)
                         + "%+.2f (white side) [with scaled NNUE, ...]" % (0.01 * cp(final_white)))
        return "\n".join(lines)

    def _piece_board(self, compact) -> list[str]:
        """The 25 lines of the piece-value board (Stockfish 15.1-18), values rendered by ``compact``."""
        board = chess.Board(self.fen)
        grid = [[" "] * 65 for _ in range(25)]
        for r in range(8):
            top = 3 * (7 - r)
            for f in range(8):
                grid[top][8 * f : 8 * f + 9] = "+-------+"
                for line in (top + 1, top + 2):
                    grid[line][8 * f] = grid[line][8 * f + 8] = "|"
                sq = chess.square(f, r)
                piece = board.piece_at(sq)
                if piece is not None:
                    grid[top + 1][8 * f + 4] = piece.symbol()
                if sq in self.piece_values:
                    grid[top + 2][8 * f + 2 : 8 * f + 7] = compact(self.piece_values[sq])
        grid[24] = list("+-------" * 8 + "+")
        # Stockfish prints each row as a C string: a NUL "digit" (format_cp_compact) ends the row
        return ["".join(row).split("\0")[0] for row in grid]

    def __str__(self) -> str:
        return self.format_stockfish()

    def svg(self, size: int = 400) -> str:
        """The trace as a picture: the board with each piece's value, and the bucket table beside it.

        The board is python-chess's SVG board (``chess.svg.board``, ``size`` pixels wide, White
        at the bottom); every piece but the kings sits on a square coloured by its derived value
        (:attr:`piece_values`, White's point of view): green for White's gain, red for Black's,
        the strongest colour at the largest ``|value|`` of the position, with the value in pawns
        written in the square.  Beside it: per bucket the material (PSQT), positional (layer
        stack) and total contributions in pawns, side to move's view, the used bucket marked,
        and the ``NNUE evaluation`` line, as in :meth:`format_stockfish`.

        Returns
        -------
        str
            A standalone SVG document (UTF-8 text, no XML declaration).
        """
        import xml.etree.ElementTree as ET

        import chess.svg

        board = chess.Board(self.fen)
        largest = max((abs(v) for v in self.piece_values.values()), default=0) or 1
        fill = {sq: _value_colour(v / largest) for sq, v in self.piece_values.items()}
        # python-chess's board stays text, nested as it is (its own xmlns declarations); the
        # labels and the outer picture are elements without namespaces, so that nothing is
        # re-serialised with ElementTree's ns0: prefixes.
        inner = chess.svg.board(board, fill=fill, size=size, coordinates=True)
        labels = ET.Element("g")
        margin, square = 15, 45  # python-chess's coordinate margin and square size (viewBox units)
        for sq, v in self.piece_values.items():
            x = margin + chess.square_file(sq) * square
            y = margin + (7 - chess.square_rank(sq)) * square
            ET.SubElement(labels, "rect", {"x": f"{x + 3:g}", "y": f"{y + square - 12:g}", "width": str(square - 6),
                                          "height": "11", "rx": "2", "fill": "#ffffff", "fill-opacity": "0.85"})
            label = ET.SubElement(labels, "text", {"x": f"{x + square / 2:g}", "y": f"{y + square - 3.5:g}",
                                                   "text-anchor": "middle", "font-family": "monospace",
                                                   "font-size": "10", "fill": "#000000"})
            label.text = format_cp_compact(v, self.units_per_pawn).strip()
        width, row = 360, 22
        height = max(size, 60 + row * (len(self.psqt) + 4))
        root = ET.Element("svg", {"xmlns": "http://www.w3.org/2000/svg", "width": str(size + width + 20),
                                  "height": str(height), "viewBox": f"0 0 {size + width + 20} {height}"})
        left = size + 20

        def text(x, y, content, **attrs):
            el = ET.SubElement(root, "text", {"x": f"{x:g}", "y": f"{y:g}", "font-family": "monospace",
                                              "font-size": "13", **attrs})
            el.text = content
            return el

        colour = "White" if self.side_to_move == chess.WHITE else "Black"
        text(left, 20, f"NNUE network contributions ({colour} to move)", **{"font-weight": "bold"})
        columns = ((left, "Bucket"), (left + 70, "Material"), (left + 160, "Positional"), (left + 255, "Total"))
        for x, name in columns:
            text(x, 46, name, **{"font-weight": "bold"})
        for k, (p, q) in enumerate(zip(self.psqt, self.positional)):
            y = 46 + row * (k + 1)
            if k == self.bucket:
                ET.SubElement(root, "rect", {"x": str(left - 4), "y": str(y - 15), "width": str(width - 10),
                                             "height": str(row - 2), "fill": "#fff3b0", "stroke": "#c9a400"})
            pk, qk = tdiv(p, self.output_scale), tdiv(q, self.output_scale)
            cells = (str(k), *(format_cp_aligned(v, self.units_per_pawn).replace(" ", "")
                               for v in (pk, qk, pk + qk)))
            for (x, _), cell in zip(columns, cells):
                text(x, y, cell)
        y = 46 + row * (len(self.psqt) + 2)
        white = white_side_pawns(self.value_white, self.stockfish_version, self.material, self.units_per_pawn)
        text(left, y, f"NNUE evaluation {white:+.2f} (white side)",
             **{"font-weight": "bold"})
        text(left, y + row, "piece values in pawns, White's view", **{"font-size": "11"})
        text(left, y + row + 16, f"(green +, red -; full colour at {largest / self.units_per_pawn:.2f})",
             **{"font-size": "11"})
        end = inner.rindex("</svg>")
        board_svg = inner[:end] + ET.tostring(labels, encoding="unicode") + inner[end:]
        outer = ET.tostring(root, encoding="unicode")
        head = outer.index(">") + 1  # after the outer <svg ...> start tag: the board comes first
        return outer[:head] + board_svg + outer[head:]

    def _repr_svg_(self) -> str:
        """Jupyter's rich display: :meth:`svg`."""
        return self.svg()


def _value_colour(t: float) -> str:
    """``#rrggbbaa`` for ``t`` in [-1, 1]: white at 0, green (#1b9e3e) at +1, red (#d62728) at -1."""
    target = (0x1B, 0x9E, 0x3E) if t >= 0 else (0xD6, 0x27, 0x28)
    a = min(1.0, abs(t))
    r, g, b = (round(255 + (c - 255) * a) for c in target)
    return f"#{r:02x}{g:02x}{b:02x}e6"
