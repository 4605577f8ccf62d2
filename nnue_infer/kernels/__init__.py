"""Numba kernels: array functions with no knowledge of chess or file formats.

Every kernel is a module-level ``@njit(cache=True)`` function over arrays and
integers, writing into buffers the caller provides.

The small kernels on the per-position path are ``inline="always"``: Numba then copies them
into their callers at compile time instead of calling them (a call passing arrays costs tens
of nanoseconds, and there are dozens per evaluation; inlining cut a full-refresh evaluation of
the bundled network from ~1.1 to ~0.8 us inside the kernel).  They stay callable from Python.
The price is compile time on a cold cache (``cache=True`` keeps it to the first run).  An
inlined kernel's code lives in its callers' cache entries, so after editing one, clear
``__pycache__`` (or bump the "Last such change" notes in ``forward.py``, ``batch.py`` and
``arena.py``, whose cached kernels contain the forward kernels they call).
"""

from .threads import choose_threading_layer

choose_threading_layer()  # before any parallel kernel runs: a fork-safe layer (see kernels/threads.py)
