"""How each Stockfish version turns internal units into the pawns its ``eval`` prints.

* 15.1 and 16: a fixed pawn, ``v / 361`` (15.1) or ``v / 328`` (16) (``NormalizeToPawnValue``).
* 17.1, 18, 19: the WDL model's ``a``, a cubic in the material:
  ``m = clamp(P + 3N + 3B + 5R + 9Q, 17, 78) / 58``, ``a = ((c0 m + c1) m + c2) m + c3`` in IEEE
  double, and ``to_cp(v) = round(100 v / a)`` (halves away from zero); each version has its own
  coefficients.

The same model gives the win/draw/loss per mille a version prints with ``UCI_ShowWDL``
(:func:`wdl`): the win rate is ``1 / (1 + exp((a - v) / b))`` with a second cubic ``b``; 15.1
and 16 take both cubics in the game ply instead of the material.

Source: Stockfish sf_15.1 / sf_16 ``uci.h`` (``NormalizeToPawnValue``) and ``uci.cpp``
(``win_rate_model``, ``UCI::wdl``), sf_17.1 / sf_18 ``uci.cpp`` (``win_rate_params``,
``win_rate_model``, ``UCIEngine::to_cp``, ``UCIEngine::wdl``); Stockfish 19's release constants
from ``shared/reference/stockfish-19-nnue.md`` section 10.1 and
``shared/reference/stockfish-19-lite-nnue.md`` section 6.4 (read from the release binary).
"""

from __future__ import annotations

import math
import numbers

import chess

#: Fixed pawn values (internal units per pawn) of the versions that have one.
PAWN_VALUE = {"15.1": 361, "16": 328}
#: WDL-model coefficients (c0, c1, c2, c3) of ``a(m)`` per version.
WDL_A = {
    "17.1": (-13.50030198, 40.92780883, -36.82753545, 386.83004070),
    "18": (-72.32565836, 185.93832038, -144.58862193, 416.44950446),
    "19": (-142.72052667, 372.35176398, -340.71073572, 415.23490212),
}

#: WDL-model coefficients (d0, d1, d2, d3) of ``b(m)`` per version (same ``m`` as ``a``).
WDL_B = {
    "17.1": (96.53354896, -165.79058388, 90.89679019, 49.29561889),
    "18": (83.86794042, -136.06112997, 69.98820887, 47.62901433),
    "19": (5.93832785, 15.61267078, -30.57816876, 69.63866711),
}
#: 15.1 and 16: (a coefficients, b coefficients) of cubics in ``m = min(240, ply) / 64``.
WDL_PLY = {
    "15.1": ((-0.58270499, 2.68512549, 15.24638015, 344.49745382),
             (-2.65734562, 15.96509799, -20.69040836, 73.61029937)),
    "16": ((0.38036525, -2.82015070, 23.17882135, 307.36768407),
           (-2.29434733, 13.27689788, -14.26828904, 63.45318330)),
}
#: The integers :func:`wdl` takes (``value``, ``material``, ``ply``): Stockfish's ``int``, 32 bits.
INT_RANGE = (-2**31, 2**31 - 1)
#: The versions :func:`wdl` knows.
WDL_VERSIONS = ("15.1", "16", "17.1", "18", "19")


def material(board: chess.Board) -> int:
    """``P + 3N + 3B + 5R + 9Q`` over both colours (the WDL model's input)."""
    return (chess.popcount(board.pawns) + 3 * chess.popcount(board.knights) + 3 * chess.popcount(board.bishops)
            + 5 * chess.popcount(board.rooks) + 9 * chess.popcount(board.queens))


def _cubic(c: tuple[float, float, float, float], m: float) -> float:
    """``((c0 m + c1) m + c2) m + c3`` in IEEE double, in Stockfish's order."""
    return ((c[0] * m + c[1]) * m + c[2]) * m + c[3]


def wdl_a(version: str, mat: int) -> float:
    """The WDL model's ``a`` (internal units per pawn) for ``version`` at material ``mat``."""
    return _cubic(WDL_A[version], min(max(mat, 17), 78) / 58.0)


def _win_rate(v: float, a: float, b: float) -> int:
    """``int(0.5 + 1000 / (1 + exp((a - v) / b)))`` as C computes it (an overflowing ``exp`` is
    infinity there: win rate 0)."""
    x = (a - v) / b
    return 0 if x > 709.0 else int(0.5 + 1000 / (1 + math.exp(x)))


def wdl(value: int, material: int, version: str, ply: int | None = None) -> tuple[int, int, int]:
    """Win, draw and loss per mille for a value, as ``version`` prints them with ``UCI_ShowWDL``.

    Parameters
    ----------
    value : int
        Internal units, from the side to move's point of view (a search score or a static
        evaluation such as :func:`nnue_infer.final_evaluation`).
    material : int
        ``P + 3N + 3B + 5R + 9Q`` of both colours (:func:`material`); 17.1 and later only.
    version : str
        ``"15.1"``, ``"16"``, ``"17.1"``, ``"18"`` or ``"19"``.
    ply : int, optional
        The game ply (``2 * (fullmove - 1)``, plus 1 with Black to move); 15.1 and 16 only,
        which model the win rate by the ply instead of the material.

    Returns
    -------
    (int, int, int)
        ``(w, d, l)`` per mille, ``w + d + l = 1000``; ``w`` is the win rate of ``value``, ``l``
        that of ``-value``, each ``int(0.5 + 1000 / (1 + exp((a - v) / b)))`` in IEEE double
        (15.1 and 16 first clamp ``v`` to [-4000, 4000]).

    Raises
    ------
    TypeError
        ``value``, ``material`` or ``ply`` not an integer (a bool, a float such as NaN or infinity).
    ValueError
        Unknown version, 15.1/16 without ``ply`` (or a negative one), a negative ``material``
        for 17.1 and later (no position has one; the model would silently take it as 17), or
        ``value``, ``material`` or ``ply`` outside Stockfish's ``int`` (32-bit, :data:`INT_RANGE`),
        which its ``UCI::wdl`` takes them as (a score is within +-32001).
    """
    for name, number in (("value", value), ("material", material), ("ply", ply)):
        if number is None:
            continue
        if isinstance(number, bool) or not isinstance(number, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {number!r}")
        if not INT_RANGE[0] <= number <= INT_RANGE[1]:  # (a larger int overflowed the float conversion)
            got = number if abs(number) < 10**15 else f"an integer of {int(number).bit_length()} bits"
            raise ValueError(f"{name} must be within [{INT_RANGE[0]}, {INT_RANGE[1]}] (Stockfish's 32-bit int), "
                             f"got {got}")
    if version in WDL_PLY:
        if ply is None or ply < 0:
            raise ValueError(f"Stockfish {version}'s WDL model needs the game ply (got ply={ply!r})")
        m = min(240, ply) / 64.0
        a, b = (_cubic(c, m) for c in WDL_PLY[version])
        v = min(max(float(value), -4000.0), 4000.0)
    elif version in WDL_A:
        if material < 0:
            raise ValueError(f"material must be >= 0 (P + 3N + 3B + 5R + 9Q of both colours), got {material}")
        m = min(max(material, 17), 78) / 58.0
        a, b = _cubic(WDL_A[version], m), _cubic(WDL_B[version], m)
        v = float(value)
    else:
        raise ValueError(f"unknown Stockfish version {version!r} for the WDL model; known: {', '.join(WDL_VERSIONS)}")
    w, l = _win_rate(v, a, b), _win_rate(-v, a, b)
    return w, 1000 - w - l, l


def tdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero), for Python ints."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def wrap_int32(x: int) -> int:
    """Two's-complement wrap of a Python int to int32 (C's int arithmetic on x86)."""
    return (x + 2**31) % 2**32 - 2**31


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


def white_side_pawns(value_white: int, version: str, mat: int, per_pawn: int | None = None) -> float:
    """The figure of ``version``'s ``NNUE evaluation ... (white side)`` line, in pawns (printed ``%+.2f``).

    Parameters
    ----------
    value_white : int
        The network's value, internal units, White's point of view.
    version : str
        ``"15.1"``, ``"16"``, ``"17.1"``, ``"18"`` or ``"19"``.
    mat : int
        :func:`material` of the position (used by 17.1 and later).
    per_pawn : int, optional
        Internal units per pawn for 15.1 and 16 (default :data:`PAWN_VALUE`; another network's
        ``Architecture.units_per_pawn`` for one that is not Stockfish's).

    Returns
    -------
    float
        15.1 and 16: ``value_white / per_pawn`` (their ``eval`` divides in double; it prints
        ``-0.00`` just below zero); 17.1 and later: ``0.01 * to_cp(value_white, version, mat)``
        (whole centipawns first, so never ``-0.00``).  Source: sf_15.1 / sf_16 ``evaluate.cpp``
        (``Trace::to_cp``), sf_17.1 / sf_18 ``evaluate.cpp`` (``0.01 * UCIEngine::to_cp``).
    """
    if version in PAWN_VALUE:
        return value_white / (per_pawn or PAWN_VALUE[version])
    return 0.01 * to_cp(value_white, version, mat)
