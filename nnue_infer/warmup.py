"""Compiling ahead: the kernels of given networks and paths into Numba's cache (``nnue-infer warmup``),
and what that cache holds (``nnue-infer info --cache``).

A path's first use compiles its entry kernel for the network's configuration
(``kernels.nnue.forward.Config``) and this CPU, seconds to a minute of CPU each; :func:`warmup` does
that ahead (Docker images, CI, cluster nodes) by running each path once on a small input.  The
cache's location and validity are :mod:`nnue_infer.kernels.cache`'s.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import chess

if TYPE_CHECKING:  # imported where used: ``nnue-infer --help`` reads PATHS without loading the kernels
    from .evaluator import Evaluator

_FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
_MOVES = ("e2e4", "e7e5", "g1f3")


def _board(ev: Evaluator) -> None:
    ev.evaluate(chess.Board(_FEN))


def _incremental(ev: Evaluator) -> None:
    ev.set_position(chess.Board())
    ev.push(chess.Move.from_uci(_MOVES[0]))
    ev.evaluate()
    ev.pop()


def _batch(ev: Evaluator) -> None:
    ev.evaluate_batch([_FEN])
    ev.evaluate_batch([chess.Board(_FEN)])


def _game(ev: Evaluator) -> None:
    ev.evaluate_game(chess.Board(), list(_MOVES))


def _trace(ev: Evaluator) -> None:
    ev.trace(chess.Board(_FEN))


def _children(ev: Evaluator) -> None:
    ev.evaluate_moves(chess.Board(_FEN))
    ev.evaluate_children_batch([_FEN])


def _activations(ev: Evaluator) -> None:
    ev.activations(chess.Board(_FEN))
    ev.activations_batch([_FEN])


#: The paths :func:`warmup` compiles, by name: ``board`` (``evaluate(board)``, the one-FEN command
#: line), ``incremental`` (push + ``evaluate()`` + pop), ``batch`` (``evaluate_batch``, EPD and
#: multi-FEN command lines), ``game`` (``evaluate_game``, PGN scoring), ``trace``, ``children``
#: (``evaluate_moves``, ``evaluate_children_batch``, ``eval --moves``), ``activations``
#: (``activations``, ``activations_batch``, ``eval --activations``).  The files and datasets path
#: (``nnue_infer.io.score.warm_up_files``) is the ``warmup`` command's (the core imports no ``io``).
PATHS: dict[str, Callable[[Evaluator], None]] = {
    "board": _board, "incremental": _incremental, "batch": _batch, "game": _game, "trace": _trace,
    "children": _children, "activations": _activations,
}


def warmup(networks: Iterable = (None,), paths: Iterable[str] = tuple(PATHS), progress=None,
           registry: Mapping[str, Callable[[Evaluator], None]] = PATHS) -> list[tuple]:
    """Compile (or load from the cache) the kernels of ``paths`` for each of ``networks``.

    Parameters
    ----------
    networks : iterable of Network, str, os.PathLike or None
        Networks or their specs (see :func:`nnue_infer.resources.network_from_spec`; ``None``: the default).
    paths : iterable of str
        Names in ``registry``.
    progress : callable or None
        Called as ``progress(label)`` after each (network, path) step.
    registry : mapping of str to callable
        The paths by name, each run once on an ``Evaluator`` (default :data:`PATHS`; the ``warmup`` command
        adds ``files``).

    Returns
    -------
    list of (network label, path, seconds)
        The process CPU time of each step (about 0 for a path already in the cache).

    Raises
    ------
    ValueError
        An unknown path name (the known ones are listed); network errors as ``Evaluator``.
    """
    paths = list(dict.fromkeys(paths))  # each once, in the order given
    unknown = [p for p in paths if p not in registry]
    if unknown:
        raise ValueError(f"unknown path(s) {', '.join(unknown)}; known: {', '.join(registry)}")
    from .evaluator import Evaluator, as_network

    out = []
    for spec in networks:
        ev = Evaluator(as_network(spec))
        label = "default" if spec is None else os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else repr(spec)
        for path in paths:
            start = time.process_time()
            registry[path](ev)
            out.append((label, path, time.process_time() - start))
            if progress is not None:
                progress(f"{label} {path}")
    return out


def cache_report() -> dict:
    """Where the kernels' cache is and what it holds for this CPU and these kernel sources.

    Returns a dict: ``directory`` (str, or None when no candidate directory is writable or
    readable: then every process compiles again), ``writable`` (bool: False for a read-only cache,
    whose kernels are loaded and which gets no new ones), ``candidates`` (the directories tried, in
    order, ``kernels.cache.cache_dirs``), ``also_read`` (the other candidates holding kernels, read-only
    for this process or not: a kernel ``directory`` lacks is loaded from them, ``KernelCacheLocator.seeds``;
    their kernels are not counted below), ``bytes`` (int, the cache files there), ``kernels``
    (``{kernel name: number of compiled configurations and signatures for this CPU}``, from
    Numba's index files whose stamp matches the current kernel sources).
    """
    from numba.core.registry import cpu_target

    from .kernels.nnue import arena
    from .kernels.cache import KernelCacheLocator, cache_dirs, usable_cache_dir

    py_func = arena.kernels.__wrapped__
    locator = KernelCacheLocator.from_function(py_func, arena.__file__)
    private = locator is None or locator.get_cache_path() not in cache_dirs(arena.__file__)  # this process's only
    directory = None if private else Path(locator.get_cache_path())
    report: dict = {"directory": str(directory) if directory is not None else None,
                    "writable": directory is not None and usable_cache_dir(str(directory)),
                    "candidates": cache_dirs(arena.__file__), "also_read": list(getattr(locator, "seeds", ())),
                    "bytes": 0, "kernels": {}}
    if directory is None or not directory.is_dir():
        return report
    magic = cpu_target.target_context.codegen().magic_tuple()
    stamp = locator.get_source_stamp()
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".nbi", ".nbc"):
            continue
        report["bytes"] += path.stat().st_size
        if path.suffix != ".nbi":
            continue
        try:
            with open(path, "rb") as f:
                pickle.load(f)  # Numba's index version
                file_stamp, overloads = pickle.loads(f.read())
        except Exception:  # not an index this Numba reads: not ours to report
            continue
        if file_stamp != stamp:
            continue
        n = sum(1 for key in overloads if key[1] == magic)
        if n:
            name = path.name.split("-")[0].replace(".locals.", ".")
            report["kernels"][name] = report["kernels"].get(name, 0) + n
    return report
