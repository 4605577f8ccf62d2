"""Chess kernels: bitboards, attacks, legal moves, mate and stalemate, FEN and move notation.

They know nothing of networks: nothing here imports :mod:`nnue_infer.kernels.nnue`.
"""
