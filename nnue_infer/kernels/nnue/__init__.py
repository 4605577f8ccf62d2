"""NNUE kernels: feature indices, accumulator, activations, dense layers and the entry kernels over them.

Positions come in as bitboards (:mod:`nnue_infer.kernels.chess.bitboard`); nothing here imports
:mod:`nnue_infer.kernels.data` or the chess text kernels beyond the FEN fields the entry kernels read.
"""
