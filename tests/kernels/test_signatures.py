"""Each kernel compiles exactly one signature: the Evaluator and the tests pass the same types.

Runs after the other kernel tests (file order) and drives the Evaluator too, so a caller that
passes a read-only, non-contiguous or differently typed array shows up as a second signature.
Run alone (or with a subset, or in a pytest-xdist worker), it checks the kernels of the test files
whose tests all ran in its process.
"""

from __future__ import annotations

import importlib
import pkgutil

import chess
import pytest
from numba.core.registry import CPUDispatcher

import nnue_infer.kernels
from nnue_infer.kernels.nnue import arena
from nnue_infer.kernels.nnue import forward

# The kernels exercised by tests/kernels/*.py (module -> its test file's kernels): each must have
# compiled exactly once when that test file ran in the session.
TEST_FILES = {"nnue.accumulator": "test_accumulator", "nnue.activation": "test_activation", "nnue.dense": "test_dense",
              "nnue.feature_index": "test_feature_kernels", "chess.bitboard": "test_feature_kernels",
              "nnue.forward": "test_forward",
              "nnue.arena": "test_signatures"}  # the Evaluator calls below always run arena's kernels
TESTED = {
    "nnue.accumulator": ["refresh_accumulator", "update_accumulator"],
    "nnue.activation": ["ft_activate", "clipped_relu", "sqr_clipped_relu", "activate"],
    "nnue.dense": ["tdiv", "wrap_int32", "propagate_layer_stack", "psqt_term"],
    "nnue.feature_index": ["orientation", "feature_index", "active_features"],
    "chess.bitboard": ["king_square"],
    # forward.evaluate_stack / evaluate_fresh are inlined into arena's kernels (the Evaluator's calls) and
    # compile no signature of their own; a cached caller links the kernels it calls without compiling them,
    # so only "at most one" applies to those.  The entry kernels are made per forward.Config: see below.
    "nnue.forward": ["forward_bucket"],
}


def kernel_modules():
    """Every kernel module, by its name below ``nnue_infer.kernels`` (``nnue.dense``), family folders included."""
    for info in pkgutil.walk_packages(nnue_infer.kernels.__path__, "nnue_infer.kernels."):
        module = importlib.import_module(info.name)
        if not info.ispkg:
            yield info.name.removeprefix("nnue_infer.kernels."), module


def test_constant_arguments_compile_no_literal_versions():
    """A kernel called with constants from other kernels compiles one plain version (was one
    ``Literal[int]`` version per distinct constant: ``movegen.line_attacks`` 2, ``binpack.read_bin_bits``
    9, and test_one_signature_per_kernel failed or passed by the order the tests ran)."""
    import numpy as np
    from numba import njit

    if not isinstance(nnue_infer.kernels.nnue.dense.tdiv, CPUDispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set: no compiled signatures to check")
    from nnue_infer.kernels.chess import movegen

    @njit
    def rook_then_bishop(sq):  # a caller outside the package, calling one of our kernels with constants
        return movegen.line_attacks(sq, np.int64(0), 0, 4) | movegen.line_attacks(sq, np.int64(0), 4, 8)

    rook_then_bishop(np.int64(27))
    assert all("Literal" not in str(sig) for sig in movegen.line_attacks.signatures), movegen.line_attacks.signatures


def test_one_signature_per_kernel(evaluator, sample_boards, kernel_test_files_run):
    if not isinstance(nnue_infer.kernels.nnue.dense.tdiv, CPUDispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set: no compiled signatures to check")
    for board in sample_boards[:5]:
        evaluator.evaluate(board)
        evaluator.trace(board)
    evaluator.evaluate(chess.Board().fen())
    moves = [chess.Move.from_uci(u) for u in ("e2e4", "e7e5", "e1e2", "e8e7")]
    evaluator.evaluate_game(chess.Board(), moves)  # incremental API: evaluate_sequence, evaluate_ply
    evaluator.set_position(chess.Board())
    for move in moves:
        evaluator.push(move)
        evaluator.evaluate()
    ran = kernel_test_files_run
    problems = []
    config = forward.config_of_cfg(evaluator._cfg)
    for name, made in (("arena", arena.kernels(config)), ("forward", forward.kernels(config))):
        for attr, kernel in made._asdict().items():
            if len(kernel.signatures) != 1:
                problems.append(f"{name}.kernels({config}).{attr}: {len(kernel.signatures)} signatures "
                                f"{kernel.signatures}")
    for attr, kernel in forward.stages(config)._asdict().items():  # compiled by the entry kernels, or linked
        if len(kernel.signatures) > 1:                                  # from their cache: at most one
            problems.append(f"forward.stages({config}).{attr}: {len(kernel.signatures)} signatures {kernel.signatures}")
    for name, module in kernel_modules():
        for attr, obj in vars(module).items():
            if not isinstance(obj, CPUDispatcher) or obj.py_func.__module__ != module.__name__:
                continue
            # A kernel called from another kernel with a constant argument is compiled for its plain type
            # (kernels.cache._get_call_template: no Literal[int] versions); an index of a prange loop can
            # be uint64 in one caller and int64 in another: pass np.int64(i).
            sigs = obj.signatures
            n = len(sigs)
            if n > 1 or (attr in TESTED.get(name, ()) and TEST_FILES[name] in ran and n != 1):
                problems.append(f"{name}.{attr}: {n} signatures {sigs}")
    for name, kernels in TESTED.items():
        module = importlib.import_module(f"nnue_infer.kernels.{name}")
        for k in kernels:
            assert isinstance(getattr(module, k), CPUDispatcher), f"{name}.{k} is not an @njit kernel"
    assert not problems, "\n".join(problems)
