"""Playing chess: the engine's search, the UCI protocol, perft."""

from .perft import perft

__all__ = ["perft"]
