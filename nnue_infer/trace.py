"""The result of :meth:`Evaluator.trace` and its rendering as the ``eval`` text of Stockfish
15.1, 16, 17.1, 18 and 19; the result of :meth:`Evaluator.activations` (:class:`Activations`).

What differs between versions: the pawn normalisation (:mod:`nnue_infer.normalisation`: 361,
328, or the material-dependent WDL model), the piece-value board (15.1-18 only, values
truncated to centipawns by 15.1/16, rounded by 17.1/18), the table header (19 adds
"Normalized," and drops the leading space) and the value lines (19 adds the raw value in
internal units).  Only 15.1 formats its table cells into fixed char buffers (emulated for
absurd values); later versions use streams.

17.1, 18 and 19 end their text with ``Final evaluation``, Stockfish's own static evaluation
(``Eval::evaluate`` with optimism 0, :func:`stockfish_evaluate`): the network's PSQT and positional
terms blended, scaled by the material, damped by the rule-50 counter.  17.1 and 18 take it from
their small net when the material is unbalanced (:func:`uses_small_net`).

Source of every format: Stockfish sf_15.1 / sf_16 ``nnue/evaluate_nnue.cpp`` (``trace``,
``format_cp_compact``, ``format_cp_aligned_dot``) and ``evaluate.cpp`` (``trace``); sf_17.1 /
sf_18 ``nnue/nnue_misc.cpp`` and ``evaluate.cpp`` (``trace``, ``evaluate``, ``simple_eval``,
``use_smallnet``); Stockfish 19: ``shared/reference/stockfish-19-nnue.md`` section 10.
"""

from __future__ import annotations

from dataclasses import dataclass

import chess
import numpy as np

from .constants import NORMALIZE_TO_PAWN_VALUE as PAWN
from .normalisation import PAWN_VALUE, WDL_A, WDL_VERSIONS, to_cp, wdl, white_side_pawns


def tdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero), for Python ints."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


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


def wrap_int32(x: int) -> int:
    """Two's-complement wrap of a Python int to int32 (C's int arithmetic on x86)."""
    return (x + 2**31) % 2**32 - 2**31


#: ``Eval::evaluate`` per version: (PSQT weight, positional weight (both over 128; None: plain
#: sum), complexity divisor, pawn weight in the material, material base, rule-50 divisor,
#: 64-bit products in the blend).  Source: sf_17.1 / sf_18 ``evaluate.cpp``; Stockfish 19's
#: release constants, ``shared/reference/stockfish-19-nnue.md`` section 10.3.
EVALUATE = {
    "17.1": ((125, 131), 18000, 535, 77777, 212, False),
    "18": ((125, 131), 18236, 534, 77871, 199, False),
    "19": (None, 18236, 534, 91000, 199, True),
}
#: 17.1 and 18 keep their small net's value only when ``|(125 psqt + 131 positional) / 128|``
#: reaches this; below it they evaluate the big net.  Source: ``evaluate.cpp`` at the tags.
SMALL_NET_KEEP = {"17.1": 236, "18": 277}
#: Piece values of ``Eval::simple_eval`` and of the non-pawn material (sf_17.1/sf_18 ``types.h``).
SIMPLE_VALUES = {chess.PAWN: 208, chess.KNIGHT: 781, chess.BISHOP: 825, chess.ROOK: 1276, chess.QUEEN: 2538}
#: ``VALUE_TB_WIN_IN_MAX_PLY - 1``: Stockfish's static evaluation stays within +-31506.
EVALUATE_LIMIT = 31506


def uses_small_net(board: chess.Board) -> bool:
    """Whether Stockfish 17.1 / 18 try their small net first: ``|simple_eval| > 962``, the
    side to move's material minus the opponent's (pawn 208, N 781, B 825, R 1276, Q 2538)."""
    simple = sum(value * (chess.popcount(board.pieces_mask(piece, board.turn))
                          - chess.popcount(board.pieces_mask(piece, not board.turn)))
                 for piece, value in SIMPLE_VALUES.items())
    return abs(simple) > 962


def small_net_kept(psqt: int, positional: int, version: str) -> bool:
    """Whether 17.1 / 18 keep the small net's terms (:data:`SMALL_NET_KEEP`)."""
    return abs(tdiv(wrap_int32(125 * psqt + 131 * positional), 128)) >= SMALL_NET_KEEP[version]


def stockfish_evaluate(psqt: int, positional: int, board: chess.Board, version: str) -> int:
    """Stockfish's static evaluation (``Eval::evaluate``, optimism 0) from one net's terms.

    Parameters
    ----------
    psqt, positional : int
        The used bucket's PSQT and positional terms of the net that version evaluates with,
        each divided by OutputScale (``tdiv(Trace.psqt[bucket], 16)``): internal units, side to
        move's point of view.
    board : chess.Board
        The position (its pawns and non-pawn material, its half-move clock).
    version : str
        ``"17.1"``, ``"18"`` or ``"19"``.

    Returns
    -------
    int
        Internal units, side to move's point of view, within +-31506: ``n`` = the blend
        (``(125 psqt + 131 positional) / 128``; 19: ``psqt + positional``) less
        ``n * |psqt - positional| / complexity``, times ``(base + material) / base`` with
        material = pawn weight * pawns + non-pawn material, less ``v * rule50 / divisor``;
        C integer divisions, 32-bit products where that version's are (:data:`EVALUATE`).

    Raises
    ------
    ValueError
        For another version (15.1's and 16's add a classical evaluation nnue-infer does not have).
    """
    if version not in EVALUATE:
        raise ValueError(f"Stockfish {version}'s final evaluation is not computed from the networks alone; "
                         f"versions with one: {', '.join(EVALUATE)}")
    weights, complexity_div, pawn, base, rule50_div, wide = EVALUATE[version]
    narrow = (lambda x: x) if wide else wrap_int32
    nnue = psqt + positional if weights is None else tdiv(wrap_int32(weights[0] * psqt + weights[1] * positional), 128)
    nnue -= tdiv(narrow(nnue * abs(psqt - positional)), complexity_div)
    npm = sum(SIMPLE_VALUES[p] * chess.popcount(board.pieces_mask(p, chess.WHITE) | board.pieces_mask(p, chess.BLACK))
              for p in (chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN))
    v = tdiv(narrow(nnue * (base + pawn * chess.popcount(board.pawns) + npm)), base)
    v = wrap_int32(v)
    v -= tdiv(wrap_int32(v * board.halfmove_clock), rule50_div)
    return max(min(v, EVALUATE_LIMIT), -EVALUATE_LIMIT)


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


class Activations:
    """Every intermediate array of a network's evaluation of one position or a batch, as exact integers.

    Made by :meth:`nnue_infer.Evaluator.activations` (one position: no leading axis) and
    :meth:`nnue_infer.Evaluator.activations_batch` (a leading ``N`` axis, written below).  Read
    the arrays as attributes (``acts.fc_0``) or with :meth:`to_dict`; :attr:`names` lists them in
    order.  Integer layers only: a float hidden layer and those after it are not recorded.

    Arrays
    ------
    accumulator : int16[N, 2, L1]
        The feature transformer's accumulators, row 0 White's perspective, row 1 Black's
        (Stockfish's ``accumulation[WHITE]``, ``accumulation[BLACK]``), threat and pawn-pair rows
        included (Stockfish 18/19).
    psqt : int32[N, 2, P]
        The PSQT accumulators, same rows.
    ft_output : uint8[N, F] (int8 for the signed activations glu, bilinear, hswish_glu, lut_glu)
        The feature-transformer activation's output, side to move's half first: ``F = L1`` for
        pairwise multiplication and the gated activations, ``2 * L1`` for crelu/screlu.
    bucket : int32[N]
        The layer stack used, ``(pieces - 1) // 4`` for 8 stacks.
    fc_0 : int32[N, L2 + 1]
        The first dense layer's sums before activation (Stockfish 15.1-18: 16; 19: 32).
    fc_0_activated : uint8[N, 2 * L2]
        Its activation: Stockfish 15.1-18 SqrClippedReLU of the first 15 sums then ClippedReLU
        of the same 15 (Stockfish 17.1's ``ac_sqr_0`` then ``ac_0``, 30 bytes; the 16th sum is the
        forward skip); Stockfish 19 both of all 32 (64 bytes).
    fc_1 : int32[N, L3]
        The second dense layer's sums (32).
    fc_1_activated : uint8[N, ...]
        Its activation: ClippedReLU (Stockfish 15.1-18, ``ac_1``, 32 bytes); Stockfish 19
        SqrClippedReLU then ClippedReLU of all 32 (64 bytes, which with fc_0's 64 make the 128
        inputs of its fc_2).  Further hidden layers continue as ``fc_2``, ``fc_2_activated``, ...
    output : int32[N]
        The output layer's sum (``fc_2`` in Stockfish 15.1-19), before the forward skip.
    positional : int32[N]
        The layer stack's result with the forward skip (Stockfish's ``positional``), internal
        units x OutputScale, side to move's view.
    value : int32[N]
        The network's value, :meth:`nnue_infer.Evaluator.evaluate`: internal units, side to move's view.

    With ``buckets="all"`` every layer's array and ``output`` / ``positional`` gain a bucket
    axis after ``N`` (``fc_0`` int32[N, B, L2 + 1], ``output`` int32[N, B]); ``bucket`` and
    ``value`` stay those of the used stack.
    """

    def __init__(self, arrays: dict, batched: bool) -> None:
        self._arrays = arrays
        self.batched = batched

    @property
    def names(self) -> list[str]:
        """The arrays' names, in data-flow order."""
        return list(self._arrays)

    def __getattr__(self, name: str):
        arrays = self.__dict__.get("_arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"no array {name!r}; this network's arrays: {', '.join(arrays)}")

    def __len__(self) -> int:
        """Number of positions."""
        return len(self._arrays["value"]) if self.batched else 1

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={v.dtype}{list(v.shape)}" for k, v in self._arrays.items())
        return f"Activations({shapes})"

    def to_dict(self) -> dict:
        """``{name: numpy array}``, the arrays themselves (not copies), in :attr:`names` order."""
        return dict(self._arrays)

    def to_arrow(self):
        """A ``pyarrow.Table`` with one row per position and one column per array: integer
        columns for per-position scalars, fixed-size lists (nested for 2-D rows) otherwise,
        values as the arrays' dtypes; an axis of length 0 (``psqt`` of a network without PSQT)
        as variable-size lists, all empty.

        Raises
        ------
        ImportError
            pyarrow is not installed, naming the extra to install (``pip install 'nnue-infer[parquet]'``).
        """
        try:
            import pyarrow as pa
        except ImportError as exc:  # a bare ModuleNotFoundError named no extra (fresh-user trial)
            raise ImportError("Activations.to_arrow() needs pyarrow: pip install 'nnue-infer[parquet]'") from exc

        columns = {}
        for name, arr in self._arrays.items():
            rows = arr if self.batched else arr[np.newaxis]
            column = pa.array(np.ascontiguousarray(rows).reshape(-1))
            for level in range(rows.ndim - 1, 0, -1):
                width = rows.shape[level]
                if width:
                    column = pa.FixedSizeListArray.from_arrays(column, width)
                else:  # Arrow has no fixed-size list of size 0 (psqt of a network without PSQT): empty lists
                    lists = int(np.prod(rows.shape[:level]))
                    column = pa.ListArray.from_arrays(pa.array(np.zeros(lists + 1, np.int32)), column)
            columns[name] = column
        return pa.table(columns)
