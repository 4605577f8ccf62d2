"""Start-up costs: ``load()`` of the 47 MB network and ``nnue-infer eval --fen`` as a whole process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import chess

import nnue_infer


def test_load_stockfish_network(benchmark):
    path = nnue_infer.stockfish_15_1_network_path()
    nnue_infer.load(path)  # warm: file in the page cache
    benchmark.pedantic(nnue_infer.load, args=(path,), rounds=5)


def test_cli_eval_fen_process_warm(benchmark):
    exe = Path(sys.executable).with_name("nnue-infer")
    cmd = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "nnue_infer"]),
           "eval", "--fen", chess.STARTING_FEN]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the Numba cache
    benchmark.pedantic(subprocess.run, args=(cmd,), kwargs={"check": True, "capture_output": True}, rounds=5)
