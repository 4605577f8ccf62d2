"""Compiled parts of the chess search (:mod:`nnue_infer.search`): Zobrist keys, the transposition
table, static exchange evaluation and the alpha-beta search over the accumulator stack."""
