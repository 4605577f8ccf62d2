"""Stockfish training data: ``.binpack``, ``.bin`` and ``.plain`` files read and written exactly.

Three formats carry the same record (position, move played, score, game ply, game result):

* ``.binpack``: a sequence of independent blocks (``BINP``, uint32 little-endian size, payload
  of at most 100 MiB); a block holds chains, each a 32-byte first entry (packed position, move,
  score, ply and result, rule-50 counter; big-endian), a uint16 count of the plies that follow and
  a bit stream giving each following ply's move (piece index, move index) and score (difference
  from the negated previous score, zig-zag, 4-bit variable-length groups).  The tools' writer
  starts a chain whenever a row does not continue the previous one and closes a block before a
  chain once the block holds at least 1 MiB, so blocks decode in parallel and
  the output is deterministic;
* ``.bin``: 40-byte nodchip ``PackedSfenValue`` records (Huffman-coded board, score, move, game
  ply, result, padding 0xFF);
* ``.plain``: text records ``fen ...``, ``move ...`` (UCI), ``score``, ``ply``, ``result``, ``e``.

Reading gives :class:`TrainingData` (columns, see :mod:`nnue_infer.kernels.data.records`); writing
takes it.  Output is byte-identical to Stockfish's ``tools`` branch (``convert`` in
``src/tools/convert.cpp``, format rules in ``src/extra/nnue_data_binpack_format.h``; checked
against files it wrote, see ``tests/test_training_data.py``).  Inputs may be gzip or Zstandard
compressed (detected from the content) and ``-`` is standard input / output.  Damaged input
raises :class:`~nnue_infer.errors.TrainingDataError` naming the file and the byte offset (of the
decompressed data) where the problem is.

The package's modules, one concept each (this module re-exports their public names, the import path of
every one of them): :mod:`.data` (the container and the rules a row keeps), :mod:`.reading`,
:mod:`.writing` and :mod:`.operations` (flags, select, rescore, summary).
"""

from ...errors import KindError, TrainingDataError  # (the errors it raises: td.TrainingDataError, as before the split)
from .data import BINPACK_HEAD_PLY, BIN_RESULT_BYTE, BIN_RULE50, KINDS, MAX_FULLMOVE, PLAIN_ROWS, TrainingData, kind_of
from .reading import (GROUP_BYTES, MAX_PLAIN_RECORD, READ_BYTES, RowOrigins, block_ranges, from_arrow, iter_chunks,
                      number_chains, read, read_range)
from .writing import TrainingDataWriter, encode_bin, encode_plain, write
from .operations import SCORE_BINS, Summary, flags, rescore, select

__all__ = ["KINDS", "KindError", "RowOrigins", "Summary", "TrainingData", "TrainingDataError", "TrainingDataWriter", "block_ranges", "encode_bin",
           "encode_plain", "flags", "from_arrow", "iter_chunks", "kind_of", "number_chains", "read", "read_range",
           "rescore", "select", "write"]
