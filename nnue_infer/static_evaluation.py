"""Stockfish's static evaluation (``Eval::evaluate`` with optimism 0, the ``Final evaluation``
line of its ``eval``) from a network's PSQT and positional terms, for Stockfish 17.1, 18 and 19.

The terms are blended, scaled by the material and damped by the rule-50 counter
(:func:`stockfish_evaluate`); 17.1 and 18 first try their small net when the material is
unbalanced (:func:`uses_small_net`) and keep its value only when it is large enough
(:func:`small_net_kept`).  15.1 and 16 add a classical evaluation that nnue-infer does not have,
so they have no formula here.  :func:`nnue_infer.final_evaluation` and ``Trace.final`` use it.

Source: sf_17.1 / sf_18 ``evaluate.cpp`` (``evaluate``, ``simple_eval``, ``use_smallnet``) and
``types.h`` (piece values); Stockfish 19's release constants,
``shared/reference/stockfish-19-nnue.md`` section 10.3.
"""

from __future__ import annotations

import chess

from .normalisation import tdiv, wrap_int32


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
