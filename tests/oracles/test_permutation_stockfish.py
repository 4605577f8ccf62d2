"""Debian's Stockfish 15.1 loading the permuted network (``setoption name EvalFile``) prints the same
``eval`` text and searches the same ``bench`` tree as with the original file."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import numpy as np
import pytest

from nnue_infer.formats import save
from nnue_infer.inspection.permutation import half_width, permute, permute_network
from nnue_infer.inspection.positions import read_positions


def _stockfish(binary, directory, commands: list[str]) -> tuple[str, str]:
    """Stockfish's standard output and error for ``commands``, run in ``directory`` with ``EvalFile net.nnue``
    (the same relative name for every network, so the ``info string`` lines match too)."""
    script = "\n".join(["setoption name EvalFile value net.nnue", *commands, "quit"]) + "\n"
    done = subprocess.run([str(binary)], input=script, capture_output=True, text=True, cwd=directory, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "info string NNUE evaluation using net.nnue enabled" in done.stdout  # the file given, not the built-in one
    return done.stdout, done.stderr


@pytest.fixture(scope="module")
def nets(tmp_path_factory, network, network_path, data_dir):
    """Directories ``original``, ``permuted`` and ``wrong`` (only the feature transformer moved), each
    holding ``net.nnue``."""
    root = tmp_path_factory.mktemp("permuted")
    fit = read_positions(data_dir / "binpack" / "selfplay.binpack", limit=3000)
    result = permute(network, fit.bitboards, fit.stm)
    assert result.share_after > result.share_before
    dirs = {name: root / name for name in ("original", "permuted", "wrong")}
    for d in dirs.values():
        d.mkdir()
    shutil.copy(network_path, dirs["original"] / "net.nnue")
    save(result.network, dirs["permuted"] / "net.nnue")
    moved = permute_network(network, np.roll(np.arange(half_width(network)), 1))
    save(dataclasses.replace(moved, layer_weights=network.layer_weights), dirs["wrong"] / "net.nnue")
    return dirs


def test_eval_text_is_the_same(stockfish_binary, nets, corpus):
    rows = corpus[::40]  # 83 positions, in check and not
    commands = [c for row in rows for c in (f"position fen {row['fen']}", "eval")]
    original = _stockfish(stockfish_binary, nets["original"], commands)[0]
    assert original.count("NNUE evaluation  ") >= 60
    assert _stockfish(stockfish_binary, nets["permuted"], commands)[0] == original
    assert _stockfish(stockfish_binary, nets["wrong"], commands)[0] != original  # the comparison can fail


def test_bench_searches_the_same_nodes(stockfish_binary, nets):
    def bench(directory) -> tuple[int, str]:
        out, err = _stockfish(stockfish_binary, directory, ["bench 16 1 13"])
        nodes = re.search(r"^Nodes searched\s*: (\d+)$", err, re.M)
        assert nodes, err
        return int(nodes.group(1)), re.sub(r" (time|nps|hashfull|tbhits) \d+", "", out)

    nodes, searched = bench(nets["original"])
    assert nodes > 1_000_000 and searched.count("bestmove") == 48  # Stockfish 15.1's bench: 48 positions
    assert bench(nets["permuted"]) == (nodes, searched)
