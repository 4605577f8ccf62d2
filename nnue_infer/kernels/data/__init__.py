"""Data-format kernels, one module per format: Stockfish's training data (``binpack``, ``bin``, ``plain``, and
``records``: what they share), EPD, CSV/JSON text, LEB128.
"""
