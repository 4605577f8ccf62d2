"""Issue 8 item 2: after a parallel batch kernel ran, ``multiprocessing`` pools started with ``fork``
(also ``spawn`` and ``forkserver``) work and give the parent's numbers.

Before the fix Numba used GNU OpenMP, and every forked child printed "Terminating: fork() called
from a process already using GNU OpenMP, this is unsafe." and died: the pool never returned.
Each check runs in a fresh interpreter (the threading layer is chosen once per process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import multiprocessing as mp, sys
    import chess, numba, nnue_infer

    FENS = [chess.STARTING_FEN, "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
            "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1"] * 50
    GAME = ["e2e4", "e7e5", "g1f3", "b8c6"]

    def numbers(_=None):
        return (nnue_infer.evaluate_batch(FENS).tolist(), nnue_infer.evaluate(FENS[1]),
                nnue_infer.evaluate_game(chess.Board(), GAME).tolist())

    if __name__ == "__main__":
        parent = numbers()  # the parallel kernel runs in the parent before the pool starts
        for method in sys.argv[1:]:
            with mp.get_context(method).Pool(2) as pool:
                results = pool.map(numbers, range(4))
            assert results == [parent] * 4, (method, results[0], parent)
            print(method, "ok")
        print("layer", numba.threading_layer())
""")


def run(tmp_path, *methods, env_extra=None):
    script = tmp_path / "pool.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(script), *methods], capture_output=True, text=True, timeout=240,
                          env=env, cwd=tmp_path)


def test_pools_after_the_batch_kernel_work_with_every_start_method(tmp_path):
    r = run(tmp_path, "fork", "spawn", "forkserver")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[:3] == ["fork ok", "spawn ok", "forkserver ok"]
    assert lines[3] in ("layer tbb", "layer workqueue")  # fork-safe layers; never GNU OpenMP's "omp"
    assert "Terminating" not in r.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_users_threading_layer_is_kept(tmp_path):
    """``NUMBA_THREADING_LAYER`` set by the user wins (here the fork-safe ``workqueue``)."""
    r = run(tmp_path, "fork", env_extra={"NUMBA_THREADING_LAYER": "workqueue"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["fork ok", "layer workqueue"]
