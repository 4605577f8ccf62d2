"""How each Stockfish version turns internal units into the pawns its ``eval`` prints.

* 15.1 and 16: a fixed pawn, ``v / 361`` (15.1) or ``v / 328`` (16) (``NormalizeToPawnValue``).
* 17.1, 18, 19: the WDL model's ``a``, a cubic in the material:
  ``m = clamp(P + 3N + 3B + 5R + 9Q, 17, 78) / 58``, ``a = ((c0 m + c1) m + c2) m + c3`` in IEEE
  double, and ``to_cp(v) = round(100 v / a)`` (halves away from zero); each version has its own
  coefficients.

Source: Stockfish sf_15.1 / sf_16 ``uci.h`` (``NormalizeToPawnValue``), sf_17.1 / sf_18
``uci.cpp`` (``win_rate_params``, ``UCIEngine::to_cp``); Stockfish 19's release constants from
``shared/reference/stockfish-19-nnue.md`` section 10.1 (read from the release binary).
"""

from __future__ import annotations

import math

import chess

#: Fixed pawn values (internal units per pawn) of the versions that have one.
PAWN_VALUE = {"15.1": 361, "16": 328}
#: WDL-model coefficients (c0, c1, c2, c3) of ``a(m)`` per version.
WDL_A = {
    "17.1": (-13.50030198, 40.92780883, -36.82753545, 386.83004070),
    "18": (-72.32565836, 185.93832038, -144.58862193, 416.44950446),
    "19": (-142.72052667, 372.35176398, -340.71073572, 415.23490212),
}


def material(board: chess.Board) -> int:
    """``P + 3N + 3B + 5R + 9Q`` over both colours (the WDL model's input)."""
    return (chess.popcount(board.pawns) + 3 * chess.popcount(board.knights) + 3 * chess.popcount(board.bishops)
            + 5 * chess.popcount(board.rooks) + 9 * chess.popcount(board.queens))


def wdl_a(version: str, mat: int) -> float:
    """The WDL model's ``a`` (internal units per pawn) for ``version`` at material ``mat``."""
    c0, c1, c2, c3 = WDL_A[version]
    m = min(max(mat, 17), 78) / 58.0
    return ((c0 * m + c1) * m + c2) * m + c3


def round_half_away(x: float) -> int:
    """C's ``std::round``: halves away from zero."""
    r = math.floor(abs(x))
    if abs(x) - r >= 0.5:
        r += 1
    return int(r) if x >= 0 else -int(r)


def to_cp(value: int, version: str, mat: int) -> int:
    """Centipawns as ``version`` prints them: ``round(100 v / a(material))`` (17.1 and later), or
    ``tdiv(100 v, pawn)`` for 15.1 and 16."""
    if version in PAWN_VALUE:
        q = abs(100 * value) // PAWN_VALUE[version]
        return q if value >= 0 else -q
    return round_half_away(100 * value / wdl_a(version, mat))
