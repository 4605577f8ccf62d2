"""nnue-infer: exact, fast CPU inference of chess NNUE networks from Python.

Quick start::

    import chess, nnue_infer
    board = chess.Board("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
    nnue_infer.evaluate(board)          # -36: internal units, side to move (361 = 1 pawn)
    nnue_infer.evaluate(board, nnue_infer.stockfish_15_1_network())   # -52: Stockfish 15.1's net

Without a network argument the bundled default network is used (:func:`default_network`: small,
distilled from Stockfish 15.1's, see ``weights/README.md``).  See :class:`Evaluator` for traces and
centipawns, :func:`load` for network files.
"""

import importlib as _importlib
from typing import TYPE_CHECKING

from .errors import (
    ConcurrentUseError,
    FenError,
    IllegalMoveError,
    InputError,
    InputKindError,
    NetworkFormatError,
    NetworkNotFoundError,
    NnueError,
    PositionError,
    QuantisationRangeError,
    QuantisationWarning,
    SimdPathError,
)

#: The public names that live in submodules, by submodule: each is imported on first access
#: (PEP 562 ``__getattr__``), so ``import nnue_infer`` (and ``nnue-infer --help``) loads neither
#: NumPy nor Numba nor a kernel module.
_LAZY = {
    "evaluator": ("Evaluator", "evaluate", "evaluate_batch", "evaluate_cp", "evaluate_game", "evaluate_moves",
                  "final_evaluation"),
    "float_network": ("FloatNetwork", "forward_float"),
    "formats": ("load", "save"),
    "formats.extract": ("extract_network",),
    "formats.stockfish": ("read_stockfish", "write_stockfish"),
    "network": ("Architecture", "HiddenLayer", "Network", "stockfish_15_1_architecture"),
    "quantisation": ("QuantisationScheme", "dequantise", "quantise"),
    "resources": ("default_network", "default_network_path", "network_from_spec", "stockfish_15_1_network",
                  "stockfish_15_1_network_path"),
    "normalisation": ("wdl",),
    "trace": ("Trace",),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}

if TYPE_CHECKING:  # what the names above are, for type checkers and IDEs
    from .evaluator import (Evaluator, evaluate, evaluate_batch, evaluate_cp, evaluate_game, evaluate_moves,
                            final_evaluation)
    from .float_network import FloatNetwork, forward_float
    from .formats import load, save
    from .formats.extract import extract_network
    from .formats.stockfish import read_stockfish, write_stockfish
    from .network import Architecture, HiddenLayer, Network, stockfish_15_1_architecture
    from .normalisation import wdl
    from .quantisation import QuantisationScheme, dequantise, quantise
    from .resources import (default_network, default_network_path, network_from_spec, stockfish_15_1_network,
                            stockfish_15_1_network_path)
    from .trace import Trace


def __getattr__(name: str):
    """A public name of :data:`_LAZY`, imported from its submodule on first access."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


__version__ = "0.1.0"

__all__ = [
    "Architecture",
    "ConcurrentUseError",
    "Evaluator",
    "FenError",
    "FloatNetwork",
    "HiddenLayer",
    "IllegalMoveError",
    "InputError",
    "InputKindError",
    "Network",
    "NetworkFormatError",
    "NetworkNotFoundError",
    "NnueError",
    "PositionError",
    "QuantisationRangeError",
    "QuantisationWarning",
    "QuantisationScheme",
    "SimdPathError",
    "Trace",
    "default_network",
    "default_network_path",
    "network_from_spec",
    "stockfish_15_1_network",
    "dequantise",
    "evaluate",
    "evaluate_batch",
    "evaluate_cp",
    "evaluate_game",
    "evaluate_moves",
    "extract_network",
    "final_evaluation",
    "forward_float",
    "load",
    "quantise",
    "read_stockfish",
    "save",
    "stockfish_15_1_architecture",
    "stockfish_15_1_network_path",
    "wdl",
    "write_stockfish",
]
