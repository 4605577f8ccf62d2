"""Keeping Numba's reference counting out of inlined kernels: :func:`last_use`.

An array argument of a kernel inlined into another (``inline="always"``) becomes a new variable
of the caller: Numba increments the array's reference count where the variable is bound and
decrements it after the variable's last use, each a call doing an atomic add.  A pass of
llvmlite's (``refprune``) deletes such pairs when it can match them, which it cannot when the
last uses of several arrays fall in different branches: LLVM then sinks the decrements of
*different* arrays at the join into one call whose pointer is a phi, and the pass no longer
sees a pair.  In a loop over an inlined kernel the pairs then run on every call (Stockfish
15.1's quiet-move accumulator update with its branches over instruction sets and tile sizes:
14 pairs, 83 ns; the same body ending in ``last_use``: no pairs, 43 ns; AVX2, thread CPU).

Call ``last_use((a, b, ...))`` as the last statement of such a kernel with every array it
takes: all last uses are then in one block, the decrements sit together there and the pass
deletes every pair.  It generates no code.
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic, overload


def last_use(arrays: tuple) -> None:
    """No-op use of each element of the tuple ``arrays`` (see the module docstring).

    Plain Python (``NUMBA_DISABLE_JIT``): does nothing.  Compiled: :func:`_mark`, inlined.
    """


@intrinsic
def _mark(typingctx, arrays):
    """The compiled :func:`last_use`: a use of ``arrays`` that generates no code."""
    if not isinstance(arrays, types.BaseTuple):
        return None

    def codegen(context, builder, sig, args):
        return context.get_dummy_value()

    return types.none(arrays), codegen


@overload(last_use, inline="always")
def _last_use(arrays):
    if isinstance(arrays, types.BaseTuple):
        return lambda arrays: _mark(arrays)
    return None
