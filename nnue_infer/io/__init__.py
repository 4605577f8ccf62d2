"""File and dataset I/O on top of the inference core: positions and games in, scores out.

* :mod:`~nnue_infer.io.epd`: FEN/EPD files read in chunks by a compiled splitter;
* :mod:`~nnue_infer.io.pgn`: PGN games (the Rust parser of the ``pgn`` extra, or python-chess);
* :mod:`~nnue_infer.io.score`: scoring EPD chunks and PGN games into result tables, and whole files
  into CSV / JSON lines / Parquet (what ``nnue-infer eval --epd/--pgn`` runs);
* :mod:`~nnue_infer.io.output`: columnar result tables and their CSV / JSON-lines writer;
* :mod:`~nnue_infer.io.parquet`: the same tables as Parquet (the ``parquet`` extra);
* :mod:`~nnue_infer.io.distributed`: files scored on a Dask cluster into a Parquet dataset;
* :mod:`~nnue_infer.io.training_data`: Stockfish's training data (``.binpack``, ``.bin``, ``.plain``).

Imports run one way: this package imports the core (:mod:`nnue_infer.evaluator`,
:mod:`nnue_infer.batch`, :mod:`nnue_infer.inputs`, ...); the core never imports it.
"""
