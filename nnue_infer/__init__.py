"""nnue-infer: exact, fast CPU inference of chess NNUE networks from Python.

Quick start::

    import chess, nnue_infer
    board = chess.Board("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
    nnue_infer.evaluate(board)          # -7: internal units, side to move (361 = 1 pawn)
    nnue_infer.evaluate(board, nnue_infer.stockfish_15_1_network())   # -52: Stockfish 15.1's net

Without a network argument the bundled default network is used (:func:`default_network`: small,
distilled from Stockfish 15.1's, see ``weights/README.md``).  See :class:`Evaluator` for traces and
centipawns, :func:`load` for network files.
"""

import importlib.abc as _abc
import sys as _sys

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
from .evaluator import (Evaluator, evaluate, evaluate_batch, evaluate_cp, evaluate_game, evaluate_moves,
                        final_evaluation)
from .float_network import FloatNetwork, forward_float
from .formats import load, save
from .formats.extract import extract_network
from .formats.stockfish import read_stockfish, write_stockfish
from .network import Architecture, HiddenLayer, Network, stockfish_15_1_architecture
from .quantise import QuantisationScheme, dequantise, quantise
from .resources import default_network, default_network_path, network_from_spec, stockfish_15_1_network, stockfish_15_1_network_path
from .normalisation import wdl
from .trace import Trace

__version__ = "0.1.0"

#: Modules that left the top level when the package was split into the inference core, ``io`` and
#: ``training`` (0.1.0 -> 0.2; ``extract`` and ``registry`` joined the network formats): the old name raises an
#: ImportError naming
#: the new one.
MOVED_MODULES = {**{f"nnue_infer.{m}": f"nnue_infer.io.{m}" for m in ("epd", "output", "parquet", "pgn", "score",
                                                                    "distributed")},
                 **{f"nnue_infer.{m}": f"nnue_infer.training.{m}" for m in ("train", "distil", "datagen",
                                                                          "crosscheck", "plotting")},
                 "nnue_infer.extract": "nnue_infer.formats.extract",
                 "nnue_infer.registry": "nnue_infer.formats.registry"}


class _MovedModules(_abc.MetaPathFinder):
    """Raises an ImportError naming the new home of a module in :data:`MOVED_MODULES`."""

    def find_spec(self, fullname, path, target=None):
        new = MOVED_MODULES.get(fullname)
        if new is not None:
            raise ImportError(f"{fullname} has moved: import {new} instead", name=fullname)
        return None


if not any(isinstance(f, _MovedModules) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedModules())

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
