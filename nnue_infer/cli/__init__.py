"""The ``nnue-infer`` command line: ``eval``, ``info``, ``extract``, ``datagen``, ``train``, ``convert``, ``quantise``, ``crosscheck``, ``data``, ``warmup``.

``main(argv) -> int`` is the entry point; heavy imports happen inside the commands.  Options
mean the same in every command: ``--threads N`` (Numba/PyTorch threads), ``--quiet`` (no
progress bar, no chatter on stderr), ``--progress`` (a bar even when stderr is not a
terminal), ``--json`` (machine-readable output), ``-o/--output`` (where the result goes;
``-`` is standard output), ``--net`` (a network file or name).  Every file input may be
``-`` for standard input, and gzip- or zstd-compressed (:mod:`nnue_infer.inputs`).
"""

from .main import cli, main

__all__ = ["cli", "main"]
