"""A slow, independent reference for Stockfish 19's FullThreats and PP_3Wide feature indices,
and for Stockfish 18's threat features.

Written from ``shared/reference/stockfish-19-nnue.md`` sections 4 and 5 (Stockfish 18: the
``map`` and ``numValidTargets`` tables and the same-type rule of ``nnue/features/full_threats.cpp``
at tag ``sf_18``) with python-chess only:
attacks come from ``Board.attacks`` (sliders stop at the first occupied square), the empty-board
patterns from a board holding the single piece, and F, R, S, BASE are counted afresh here, not
taken from the package's tables.
"""

from __future__ import annotations

from functools import lru_cache

import chess

N_THREATS = 59_808
N_PAIRS = 4_560
#: (attacker type, attacked type) -> slot (spec 4.1).
SLOTS = {
    chess.PAWN: {chess.KNIGHT: 0, chess.ROOK: 1},
    chess.KNIGHT: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4},
    chess.BISHOP: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
    chess.ROOK: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
    chess.QUEEN: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4},
}
ATTACKERS = [chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN, chess.KING]
N_THREATS_18 = 79_856
#: Stockfish 18: (attacker type, attacked type) -> slot; kings attack and are attacked.
SLOTS_18 = {
    chess.PAWN: {chess.PAWN: 0, chess.KNIGHT: 1, chess.ROOK: 2},
    chess.KNIGHT: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4, chess.KING: 5},
    chess.BISHOP: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.KING: 4},
    chess.ROOK: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.KING: 4},
    chess.QUEEN: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4, chess.KING: 5},
    chess.KING: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
}


def orientation(board: chess.Board, perspective: chess.Color) -> int:
    """Spec 4.2: 7 if the own king is on files e-h, XOR 56 for Black."""
    k = board.king(perspective)
    return (7 if chess.square_file(k) >= 4 else 0) ^ (56 if perspective == chess.BLACK else 0)


@lru_cache(maxsize=None)
def pattern(piece_type: int, own: bool, s: int) -> frozenset[int]:
    """Empty-board attacks of an own / their piece on oriented square ``s`` (own pawns move up)."""
    if piece_type == chess.PAWN and not 8 <= s <= 55:
        return frozenset()
    b = chess.Board(None)
    b.set_piece_at(s, chess.Piece(piece_type, chess.WHITE if own else chess.BLACK))
    return frozenset(b.attacks(s))


@lru_cache(maxsize=None)
def stride(piece_type: int) -> int:
    return sum(len(pattern(piece_type, True, s)) for s in range(64))


@lru_cache(maxsize=None)
def base(piece_type: int, own: bool, sf18: bool = False) -> int:
    order = [(t, True) for t in ATTACKERS] + [(t, False) for t in ATTACKERS]
    table = SLOTS_18 if sf18 else SLOTS
    total = 0
    for t, o in order:
        if (t, o) == (piece_type, own):
            return total
        total += 2 * len(table.get(t, {})) * stride(t)
    raise AssertionError


def threat_index(att: chess.Piece, f: int, vic: chess.Piece, t: int, perspective: chess.Color, o: int,
                 sf18: bool = False) -> int | None:
    """Spec 4.2 (or Stockfish 18's table), or None when the pair is no feature for this perspective."""
    slots = (SLOTS_18 if sf18 else SLOTS).get(att.piece_type, {})
    if vic.piece_type not in slots:
        return None
    fo, to = f ^ o, t ^ o
    # same type: one direction only (sf_18: not for two pawns of one colour, which never see each other)
    if att.piece_type == vic.piece_type and fo < to and (att.color != vic.color or att.piece_type != chess.PAWN):
        return None
    own_a = att.color == perspective
    h = len(slots)
    c = 0 if vic.color == perspective else 1
    F = sum(len(pattern(att.piece_type, own_a, s)) for s in range(fo))
    R = sum(1 for s in pattern(att.piece_type, own_a, fo) if s < to)
    return base(att.piece_type, own_a, sf18) + (c * h + slots[vic.piece_type]) * stride(att.piece_type) + F + R


def threat_features(board: chess.Board, perspective: chess.Color, sf18: bool = False) -> list[int]:
    """Sorted FullThreats indices of ``perspective`` (0 .. 59,807; Stockfish 18's: 0 .. 79,855)."""
    o = orientation(board, perspective)
    out = []
    for f, att in board.piece_map().items():
        if att.piece_type == chess.KING and not sf18:
            continue
        for t in board.attacks(f):
            vic = board.piece_at(t)
            if vic is None or (vic.piece_type == chess.KING and not sf18):
                continue
            i = threat_index(att, f, vic, t, perspective, o, sf18)
            if i is not None:
                out.append(i)
    return sorted(out)


def pair_features(board: chess.Board, perspective: chess.Color) -> list[int]:
    """Sorted PP_3Wide indices of ``perspective``, offset by 59,808 (spec 5)."""
    o = orientation(board, perspective)
    pawns = sorted(board.pieces(chess.PAWN, chess.WHITE) | board.pieces(chess.PAWN, chess.BLACK))
    out = []
    for i, a in enumerate(pawns):
        for b in pawns[i + 1:]:
            if abs(chess.square_file(a) - chess.square_file(b)) > 1:
                continue
            ids = [48 * (0 if board.color_at(s) == perspective else 1) + (s ^ o) - 8 for s in (a, b)]
            hi, lo = max(ids), min(ids)
            out.append(N_THREATS + hi * (hi - 1) // 2 + lo)
    return sorted(out)
