"""What a network is made of and how it behaves on positions: tools for network authors.

* :mod:`~nnue_infer.inspection.positions`: the positions a tool looks at, from an EPD/FEN/JSON-lines,
  PGN or training-data file (``.binpack``, ``.bin``, ``.plain``), as bitboards;
* :mod:`~nnue_infer.inspection.permutation`: an order of the feature transformer's neurons that puts
  its output's zeros into whole 4-byte chunks (the chunks a sparse first dense layer skips), and the
  permuted network, which evaluates bit for bit as the original;
* :mod:`~nnue_infer.inspection.check`: worst-case accumulator ranges (int16 / int32 overflow), weights
  at the quantisation limits, dead neurons and the output's sparsity on data, and a float network's
  quantisation error.

A room of its own beside ``io`` and ``training``, not part of the inference core: these tools read
files of positions (``io``) and compare float networks with their quantised form (``training``),
which the core may never import; the core never imports this room, and this room never imports the
command line (``tests/test_layout.py``).
"""
