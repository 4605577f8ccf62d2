"""Numba kernels: module-level ``@njit(cache=True)`` functions over arrays and integers, writing
into buffers the caller provides, in families and the machinery they share.

* :mod:`~nnue_infer.kernels.chess`: the rules of chess on bitboards (``bitboard``, ``attacks``,
  ``movegen``, ``make_move`` for the training data's moves, ``status``, ``perft``), FEN and move notation
  (``fen``, ``notation``);
* :mod:`~nnue_infer.kernels.nnue`: the network's arithmetic (``feature_index``, ``threats``,
  ``accumulator``, ``activation``, ``dense``, ``forward``, ``layer_outputs``) and the entry kernels
  over it (``arena``, ``batch``, ``children``); it reads positions as bitboards and imports nothing
  from :mod:`~nnue_infer.kernels.data`;
* :mod:`~nnue_infer.kernels.data`: file and text formats, one module each (``binpack``, ``bin``, ``plain``
  and what they share, ``records``; ``epd``, ``text``, ``leb128``);
* :mod:`~nnue_infer.kernels.search`: the search's kernels;
* here, only how kernels compile and run: :mod:`.cache` (the on-disk cache, stamped with every kernel
  file of the families), :mod:`.threads` (the threading layer), :mod:`.refcount`, :mod:`.simd` (the
  one place that knows instruction sets).

Kernels on the per-position path are inlined into their callers, in two ways.  The heavy leaves
(``dense.affine_*``, ``activation.ft_transform`` / ``ft_activate`` / ``activate*``,
``accumulator.update_accumulator`` / ``refresh_accumulator`` / ``update_relations`` /
``refresh_relations``, ``feature_index.active_features`` /
``changed_features``, ``bitboard.check_bitboards``) are ``forceinline=True``: each compiles once per
signature, is cached on its own, and LLVM inlines its machine code into every caller (a call
passing arrays would cost tens of nanoseconds).  The glue between them is ``inline="always"``:
Numba copies its IR into the caller, where the caller's compile-time constants (the entry kernels
made per ``forward.Config``) prune the branches of paths the network does not use before they are
typed.  Numba-level inlining re-processes a callee's whole IR at every call site and every level of
nesting, which made a cold compile of one entry kernel take minutes when the leaves were inlined
that way too (issue 19: 135 s -> 14 s of CPU for the one-FEN command line).  Every cached kernel
is stamped with the contents of all kernel files, subfolders included (:mod:`nnue_infer.kernels.cache`), so any edit
here recompiles what depends on it.
"""

from . import cache

cache.install()  # before any kernel is defined: its cache locator is chosen by its decorator

from .threads import choose_threading_layer  # noqa: E402

choose_threading_layer()  # before any parallel kernel runs: a fork-safe layer (see kernels/threads.py)
