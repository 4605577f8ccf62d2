"""A slow, independent forward pass of Stockfish 15.1's network, written from the spec.

Source: ``shared/reference/stockfish-15.1-nnue.md`` (sections 3-6).  Everything is int64 NumPy
or Python ints with explicit C truncating division; feature indices come from python-chess's
``piece_map()``, not from the package's kernels.  The parameters are taken from the package's
:class:`~nnue_infer.network.Network` in its *file* layout (``layer_weights[i][bucket]`` is
``[outputs][padded inputs]``), never from the kernels' compute layout.

It plays the role of STUMPY's ``tests/naive.py``: the kernels are tested against it bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import chess
import numpy as np

QA = 127
WEIGHT_SCALE_BITS = 6
OUTPUT_SCALE = 16
SKIP_NUM, SKIP_DEN = 9600, 8128
PAWN = 361
SLOT = {chess.PAWN: 0, chess.KNIGHT: 2, chess.BISHOP: 4, chess.ROOK: 6, chess.QUEEN: 8}


def tdiv(a: int, b: int) -> int:
    """C integer division of Python ints: truncates toward zero."""
    a, b = int(a), int(b)
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def wrap32_array(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to the int32 range (still int64)."""
    return ((np.asarray(x, np.int64) + 2**31) & 0xFFFFFFFF) - 2**31


def wrap32(x: int) -> int:
    """Two's-complement wrap of a Python int to int32."""
    x = int(x) & 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def orientation_mask(king_sq: int, perspective: chess.Color) -> int:
    """Spec 3: 7 if the perspective's own king is on files a-d, XOR 56 for Black."""
    m = 7 if chess.square_file(king_sq) < 4 else 0
    return m ^ 56 if perspective == chess.BLACK else m


def king_bucket(king_sq: int, perspective: chess.Color) -> int:
    """Spec 3: kb = 4 * (7 - rank(K')) + (7 - file(K')) with K' = K ^ m."""
    k = king_sq ^ orientation_mask(king_sq, perspective)
    return 4 * (7 - chess.square_rank(k)) + (7 - chess.square_file(k))


def feature_index(sq: int, piece: chess.Piece, king_sq: int, perspective: chess.Color) -> int:
    """Spec 3: (s ^ m) + 64 * slot + 704 * kb."""
    m = orientation_mask(king_sq, perspective)
    if piece.piece_type == chess.KING:
        slot = 10
    else:
        slot = SLOT[piece.piece_type] + (0 if piece.color == perspective else 1)
    return (sq ^ m) + 64 * slot + 704 * king_bucket(king_sq, perspective)


def features(board: chess.Board, perspective: chess.Color) -> list[int]:
    """Sorted active HalfKAv2_hm features of ``perspective`` (both kings included)."""
    king = board.king(perspective)
    return sorted(feature_index(sq, p, king, perspective) for sq, p in board.piece_map().items())


def accumulate(net, feats: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Accumulator ``bias + sum(W[f])`` wrapped to int16 as Stockfish's int16 lanes, and PSQT
    accumulator ``sum(PSQT[f])`` (not wrapped; the PSQT term wraps the difference), both as int64."""
    acc = net.ft_biases.astype(np.int64).copy()
    psqt = np.zeros(net.psqt_weights.shape[1], np.int64)
    for f in feats:
        acc += net.ft_weights[f].astype(np.int64)
        psqt += net.psqt_weights[f].astype(np.int64)
    return acc.astype(np.int16).astype(np.int64), psqt


def pairwise(acc_stm: np.ndarray, acc_opp: np.ndarray) -> np.ndarray:
    """Spec 4: per half, clamp(A[j], 0, 127) * clamp(A[j + L/2], 0, 127) >> 7, stm first (int64)."""
    parts = []
    for a in (acc_stm, acc_opp):
        a = np.asarray(a, np.int64)
        half = a.shape[0] // 2
        parts.append((np.clip(a[:half], 0, QA) * np.clip(a[half:], 0, QA)) >> 7)
    return np.concatenate(parts)


def crelu(z: np.ndarray) -> np.ndarray:
    """ClippedReLU: clamp(z >> 6, 0, 127), int64."""
    return np.clip(np.asarray(z, np.int64) >> WEIGHT_SCALE_BITS, 0, 127)


def sqr_crelu(z: np.ndarray, int32_square: bool = False) -> np.ndarray:
    """SqrClippedReLU: min(127, z*z >> 19) with a 64-bit square.

    ``int32_square`` computes the square in wrapping int32 instead (the pitfall, for tests
    that show it matters), clamping negative results to 0 as a uint8 store would not.
    """
    z = np.asarray(z, np.int64)
    sq = z * z
    if int32_square:
        sq = np.array([wrap32(v) for v in sq], np.int64)
    return np.clip(sq >> (2 * WEIGHT_SCALE_BITS + 7), 0, 127)


@dataclass
class StackTrace:
    """Intermediate values of one layer stack (all int64 / Python ints)."""

    z: np.ndarray  # fc_0 outputs [16]
    fc1_in: np.ndarray  # [32]: 15 squared, 15 clipped, 2 zero pads
    y: np.ndarray  # fc_1 outputs [32]
    a: np.ndarray  # ClippedReLU of y [32]
    o: int  # fc_2 output
    fwd: int  # forward skip
    positional: int


def layer_stack(net, bucket: int, x: np.ndarray, wrap_skip: bool = True, int32_square: bool = False) -> StackTrace:
    """Spec 5, steps 1-9, for layer stack ``bucket`` on the transformed features ``x`` (1024).

    ``wrap_skip=False`` and ``int32_square=True`` reproduce two pitfalls (for tests only).
    """
    W0 = net.layer_weights[0][bucket].astype(np.int64)
    B0 = net.layer_biases[0][bucket].astype(np.int64)
    W1 = net.layer_weights[1][bucket].astype(np.int64)
    B1 = net.layer_biases[1][bucket].astype(np.int64)
    W2 = net.layer_weights[2][bucket].astype(np.int64)
    B2 = net.layer_biases[2][bucket].astype(np.int64)
    x = np.asarray(x, np.int64)
    z = wrap32_array(B0 + W0 @ x)  # int32 sums, as Stockfish's affine transforms
    fc1_in = np.zeros(W1.shape[1], np.int64)
    fc1_in[:15] = sqr_crelu(z[:15], int32_square)
    fc1_in[15:30] = crelu(z[:15])
    y = wrap32_array(B1 + W1 @ fc1_in)
    a = crelu(y)
    o = wrap32(int(B2[0] + W2[0] @ a))
    z15 = int(z[15])
    product = wrap32(z15 * SKIP_NUM) if wrap_skip else z15 * SKIP_NUM
    fwd = tdiv(product, SKIP_DEN)
    return StackTrace(z, fc1_in, y, a, o, fwd, wrap32(o + fwd))


@dataclass
class Evaluation:
    """Reference numbers of one position, side to move's point of view unless named _white."""

    features: tuple[list[int], list[int]]  # (White's, Black's)
    acc: tuple[np.ndarray, np.ndarray]
    psqt_acc: tuple[np.ndarray, np.ndarray]
    transformed: np.ndarray
    psqt: list[int]
    positional: list[int]
    bucket: int
    value: int
    stacks: list[StackTrace] = field(repr=False)

    @property
    def cp(self) -> int:
        return tdiv(100 * self.value, PAWN)


def evaluate(net, board: chess.Board, wrap_skip: bool = True, int32_square: bool = False,
             features_fn=None) -> Evaluation:
    """Every number of spec sections 4-5 for ``board`` (full refresh, all 8 buckets).

    ``features_fn(board, perspective)`` replaces :func:`features` (tests use it to show that
    a wrong feature computation changes the numbers); the other flags as in :func:`layer_stack`.
    """
    stm = board.turn
    feats = {c: (features_fn or features)(board, c) for c in (chess.WHITE, chess.BLACK)}
    acc, ps = {}, {}
    for c in (chess.WHITE, chess.BLACK):
        acc[c], ps[c] = accumulate(net, feats[c])
    x = pairwise(acc[stm], acc[not stm])
    n = len(board.piece_map())
    bucket = tdiv(n - 1, 4)
    psqt = [tdiv(wrap32(int(ps[stm][k]) - int(ps[not stm][k])), 2) for k in range(8)]  # Stockfish's int32
    stacks = [layer_stack(net, k, x, wrap_skip, int32_square) for k in range(8)]
    positional = [s.positional for s in stacks]
    value = tdiv(wrap32(psqt[bucket] + positional[bucket]), OUTPUT_SCALE)
    return Evaluation((feats[chess.WHITE], feats[chess.BLACK]), (acc[chess.WHITE], acc[chess.BLACK]),
                      (ps[chess.WHITE], ps[chess.BLACK]), x, psqt, positional, bucket, value, stacks)


def value_white(net, board: chess.Board) -> int:
    """NNUE value (internal units) from White's point of view."""
    v = evaluate(net, board).value
    return v if board.turn == chess.WHITE else -v


def piece_values(net, board: chess.Board) -> dict[int, int]:
    """Spec 6.3: value_white(board) - value_white(board without the piece), per non-king piece."""
    base = value_white(net, board)
    out = {}
    for sq, piece in board.piece_map().items():
        if piece.piece_type == chess.KING:
            continue
        b = board.copy(stack=False)
        b.remove_piece_at(sq)
        out[sq] = base - value_white(net, b)
    return out


def random_board(rng: np.random.Generator, max_plies: int = 150, chess960: bool = False,
                 capture_bias: float = 0.0) -> chess.Board:
    """A position after a seeded random legal playout of 0..max_plies plies (stops at game end).

    With ``capture_bias`` p, a capture (if any) is played with probability p, so material
    comes off quickly and low piece counts are covered too.
    """
    if chess960:
        board = chess.Board.from_chess960_pos(int(rng.integers(960)))
    else:
        board = chess.Board()
    for _ in range(int(rng.integers(0, max_plies + 1))):
        moves = list(board.legal_moves)
        if not moves:
            break
        captures = [m for m in moves if board.is_capture(m)]
        if captures and rng.random() < capture_bias:
            moves = captures
        board.push(moves[int(rng.integers(len(moves)))])
    return board


def random_placement(rng: np.random.Generator, n_pieces: int) -> chess.Board:
    """A valid (python-chess ``is_valid``) random placement with ``n_pieces`` pieces, kings included."""
    types = [chess.PAWN] * 8 + [chess.KNIGHT] * 2 + [chess.BISHOP] * 2 + [chess.ROOK] * 2 + [chess.QUEEN]
    while True:
        board = chess.Board(None)
        squares = rng.permutation(64)
        board.set_piece_at(int(squares[0]), chess.Piece(chess.KING, chess.WHITE))
        board.set_piece_at(int(squares[1]), chess.Piece(chess.KING, chess.BLACK))
        for sq in squares[2:n_pieces]:
            color = bool(rng.integers(2))
            pt = types[int(rng.integers(len(types)))]
            if pt == chess.PAWN and chess.square_rank(int(sq)) in (0, 7):
                pt = chess.KNIGHT
            board.set_piece_at(int(sq), chess.Piece(pt, color))
        board.turn = bool(rng.integers(2))
        if board.is_valid():
            return board
