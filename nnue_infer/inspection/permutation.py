"""A permutation of the feature transformer's neurons that makes its output sparse in whole chunks.

The first dense layer reads the feature transformer's output in 4-byte chunks; a sparse first layer
(Stockfish 16 and later: ``find_nnz``, Stockfish PR #4612) skips the chunks that are all zero. Which
neuron sits where in the output is free: moving a neuron (its bias, its weight column in every
feature row, int16 and int8 rows alike, and the first dense layer's input column) gives the same
function, bit for bit, because every sum over neurons is an exact integer sum. This module
chooses the order from how often neurons are zero together on given positions, so that zeros fall
into the same chunks, and writes the permuted network (nnue-pytorch's ``ftperm.py`` does this for
the trainer's networks, on CUDA; here on the CPU with the package's batch activations).

What moves together:

* pairwise activations (Stockfish's ``pairwise``, the gated ones): output neuron ``j`` of a
  perspective's half is the product of accumulator neurons ``j`` and ``j + L1/2``; both move as one;
* element-wise activations (``crelu``, ``screlu``): output neuron ``j`` is accumulator neuron ``j``;
* the same order applies to both perspectives' halves (they share the weights), and to the first
  dense layer's columns of both halves; PSQT columns are per bucket, not per neuron: they stay.

The search (:mod:`nnue_infer.kernels.nnue.permutation`) groups neurons greedily by common zeros into
chunks of four, then exchanges neurons between chunks while the number of all-zero chunks on the
positions grows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..evaluator import Evaluator
from ..kernels.nnue import permutation as KP
from ..kernels.threads import PARALLEL_LOCK
from ..network import Network

#: Positions per call of the batch activations (memory: about 5 KB per position for Stockfish 15.1's net).
BATCH_POSITIONS = 4096
#: Most rounds of exchanges (each applies every independent improving exchange it finds).
MAX_ROUNDS = 50


def half_width(network: Network) -> int:
    """Output neurons per perspective's half of the feature-transformer output (``L1 / 2`` for
    pairwise activations, ``L1`` for element-wise ones): the neurons a permutation orders."""
    return network.architecture.ft_output_width // 2


def ft_outputs(network: Network | Evaluator, bitboards: np.ndarray, stm: np.ndarray,
               batch: int = BATCH_POSITIONS):
    """The feature-transformer outputs of the positions, ``batch`` at a time.

    Yields uint8[b, F] (int8 for signed activations; side to move's half first) from
    :meth:`nnue_infer.Evaluator.activations_bitboards`; raises as that method.
    """
    ev = network if isinstance(network, Evaluator) else Evaluator(network)
    for start in range(0, len(bitboards), batch):
        yield ev.activations_bitboards(bitboards[start:start + batch], stm[start:start + batch]).ft_output


def zero_bits(network: Network | Evaluator, bitboards: np.ndarray, stm: np.ndarray) -> np.ndarray:
    """Which output neurons are zero in which samples, packed: int64[H, ceil(2n / 64)].

    Row ``m`` has bit ``s`` set when neuron ``m`` of a half is zero in sample ``s``; sample ``2i`` is
    position ``i``'s side-to-move half, ``2i + 1`` its other half (H = :func:`half_width`).
    """
    net = network.network if isinstance(network, Evaluator) else network
    H = half_width(net)
    parts = [(out.reshape(-1, H) == 0) for out in ft_outputs(network, bitboards, stm)]
    zeros = np.concatenate(parts) if parts else np.zeros((0, H), bool)
    pad = -len(zeros) % 64
    if pad:
        zeros = np.concatenate([zeros, np.zeros((pad, H), bool)])
    packed = np.packbits(np.ascontiguousarray(zeros.T), axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view(np.int64)


def zero_chunks(out: np.ndarray) -> tuple[int, int]:
    """``(all-zero chunks, chunks)`` of feature-transformer outputs ``out`` [n, F]: 4-byte chunks per
    row, a last chunk shorter than 4 bytes counted when its bytes are zero."""
    n, F = out.shape
    pad = -F % KP.CHUNK
    nz = out != 0
    if pad:
        nz = np.concatenate([nz, np.zeros((n, pad), bool)], axis=1)
    return int((~nz.reshape(n, -1, KP.CHUNK).any(axis=2)).sum()), n * (F + pad) // KP.CHUNK


def zero_chunk_share(network: Network | Evaluator, bitboards: np.ndarray, stm: np.ndarray) -> float:
    """Share of the 4-byte chunks of the feature-transformer output that are all zero, over the
    positions (:func:`zero_chunks`): what a sparse first dense layer skips. ``nan`` for no positions."""
    zero = total = 0
    for out in ft_outputs(network, bitboards, stm):
        z, c = zero_chunks(out)
        zero, total = zero + z, total + c
    return zero / total if total else float("nan")


def find_order(bits: np.ndarray, max_rounds: int = MAX_ROUNDS) -> tuple[np.ndarray, list[int]]:
    """An order of the ``H`` neurons with many all-zero chunks on the samples of ``bits``
    (:func:`zero_bits`): the greedy grouping, then rounds of exchanges between chunks.

    Returns
    -------
    order : int64[H]
        Position ``p`` of the permuted output holds original neuron ``order[p]``.
    counts : list of int
        All-zero (chunk, sample) pairs after the grouping and after each round (never decreasing).
    """
    bits = np.ascontiguousarray(bits, np.int64)
    H = bits.shape[0]
    identity = np.arange(H, dtype=np.int64)
    order = KP.greedy_order(bits)
    # The greedy grouping is not always better than the network's own order: keep the better start.
    if KP.all_zero_chunks(bits, identity) > KP.all_zero_chunks(bits, order):
        order = identity.copy()
    counts = [int(KP.all_zero_chunks(bits, order))]
    gains = np.empty((H, H), np.int64)
    for _ in range(max_rounds):
        with PARALLEL_LOCK:
            KP.swap_gains(bits, order, gains)
        gained = int(KP.apply_best_swaps(gains, order))
        if gained <= 0:
            break
        counts.append(counts[-1] + gained)
    return order, counts


def permute_network(network: Network, order: np.ndarray) -> Network:
    """``network`` with its feature-transformer output neurons in ``order`` (int[H], a permutation
    of ``range(H)``, H = :func:`half_width`): biases, int16 and int8 weight columns and the first
    dense layer's input columns of both halves move; PSQT, the gate table and later layers stay.

    Raises
    ------
    ValueError
        ``order`` is not a permutation of ``range(H)`` (the message says what is wrong).
    """
    arch = network.architecture
    H = half_width(network)
    order = np.asarray(order)
    if order.shape != (H,) or order.dtype.kind not in "iu":
        raise ValueError(f"order: expected {H} integers (the output neurons of one half), got "
                         f"{order.dtype} of shape {list(order.shape)}")
    if not np.array_equal(np.sort(order), np.arange(H)):
        missing = np.setdiff1d(np.arange(H), order)
        raise ValueError(f"order: not a permutation of 0..{H - 1} (neuron {int(missing[0])} is missing)")
    order = order.astype(np.int64)
    acc = np.concatenate([order, order + H]) if arch.ft.paired else order
    cols = np.concatenate([order, order + H])
    first = network.layer_weights[0]
    return dataclasses.replace(
        network,
        ft_biases=np.ascontiguousarray(network.ft_biases[acc]),
        ft_weights=np.ascontiguousarray(network.ft_weights[:, acc]),
        int8_weights=np.ascontiguousarray(network.int8_weights[:, acc]),
        layer_weights=(np.ascontiguousarray(first[:, :, cols]), *network.layer_weights[1:]),
    )


@dataclass(frozen=True)
class Permutation:
    """A permuted network and how sparse its feature-transformer output is.

    Attributes
    ----------
    network : Network
        The permuted network (evaluates as the original, bit for bit).
    order : int64[H]
        Position ``p`` of each half of the permuted output holds original output neuron ``order[p]``.
    positions : int
        Positions the order was fitted on.
    share_before, share_after : float
        Share of all-zero 4-byte chunks of the feature-transformer output on those positions,
        original and permuted (:func:`zero_chunk_share`).
    counts : list of int
        The search's all-zero (chunk, sample) pairs after the grouping and each round.
    """

    network: Network
    order: np.ndarray
    positions: int
    share_before: float
    share_after: float
    counts: list[int]


def permute(network: Network, bitboards: np.ndarray, stm: np.ndarray, max_rounds: int = MAX_ROUNDS) -> Permutation:
    """Permute ``network``'s feature-transformer neurons for all-zero chunks on the positions.

    Parameters
    ----------
    network : Network
        A quantised network of any architecture.
    bitboards : int64[n, 8], stm : uint8[n]
        The positions (:func:`nnue_infer.inspection.positions.read_positions`), n >= 1.
    max_rounds : int
        Most rounds of exchanges after the greedy grouping.

    Returns
    -------
    Permutation
        The permuted network, the order and the zero-chunk shares before and after on these positions
        (measure held-out positions with :func:`zero_chunk_share`).

    Raises
    ------
    ValueError
        No positions, or a row the network cannot evaluate (named).
    """
    if len(bitboards) == 0:
        raise ValueError("no positions to fit the permutation on")
    ev = Evaluator(network)
    bits = zero_bits(ev, bitboards, stm)
    order, counts = find_order(bits, max_rounds)
    permuted = permute_network(network, order)
    return Permutation(permuted, order, len(bitboards), zero_chunk_share(ev, bitboards, stm),
                       zero_chunk_share(permuted, bitboards, stm), counts)
