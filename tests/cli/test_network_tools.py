"""``nnue-infer permute`` and ``nnue-infer check`` on the command line, and the commands of
docs/network-tools.md, run as written."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from nnue_infer import Evaluator, load
from nnue_infer.cli.main import main
from nnue_infer.float_network import FloatNetwork
from nnue_infer.formats import save
from nnue_infer.inspection.positions import read_positions
from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import quantise

DOC = Path(__file__).resolve().parents[2] / "docs" / "network-tools.md"


def run(capsys, *argv):
    status = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return status, out, err


def _float_net(seed: int = 3) -> FloatNetwork:
    arch = Architecture(feature_set="Chess768", ft_width=32, ft_activation="pairwise", ft_clamp=127, ft_shift=7,
                        psqt_buckets=8, output_buckets=8, layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")),
                        output_units=400, units_per_pawn=100)
    return FloatNetwork.random(arch, seed=seed)


@pytest.fixture
def workdir(tmp_path, data_dir, monkeypatch):
    shutil.copy(data_dir / "binpack" / "selfplay.binpack", tmp_path)
    shutil.copy(data_dir / "positions-dev.jsonl", tmp_path)
    save(_float_net(), tmp_path / "float.safetensors")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), re.S)


def test_the_documented_commands_run_and_print_what_the_page_shows(capsys, workdir):
    """Each ``$`` line of the page's console blocks, run as written: status 0, and every output line
    the page shows is printed with the same words (the numbers depend on the machine's data)."""
    ran = 0
    for block in _blocks("console"):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ nnue-infer "):
                continue
            shown = []
            for follow in lines[i + 1:]:
                if follow.startswith("$ "):
                    break
                shown.append(follow)
            status, out, err = run(capsys, *shlex.split(line[len("$ nnue-infer "):]))
            assert status == 0, (line, err)
            words = lambda s: re.sub(r"-?\d+(\.\d+)?", "#", s)  # noqa: E731
            assert [words(s) for s in shown] == [words(s) for s in out.splitlines()[:len(shown)]], line
            ran += 1
    assert ran >= 3
    assert load(workdir / "sf15.1-permuted.nnue").architecture.ft_width == 1024


def test_the_documented_python_runs(workdir):
    (code,) = _blocks("python")
    exec(compile(code, str(DOC), "exec"), {})
    assert (workdir / "sf15.1-permuted.nnue").stat().st_size == 47001499


def test_permute_writes_the_input_format_and_the_same_function(capsys, workdir):
    net = quantise(_float_net(seed=5))
    save(net, workdir / "net.safetensors")
    status, out, err = run(capsys, "permute", "net.safetensors", "--positions", "positions-dev.jsonl", "--limit", "1000",
                           "-o", "permuted.safetensors", "--json")
    assert status == 0, err
    d = json.loads(out)
    assert d["format"] == "safetensors" and d["fitted_positions"] == 800 and d["held_out_positions"] == 200
    assert sorted(d["order"]) == list(range(16)) and d["fitted_after"] >= d["fitted_before"]
    permuted = load(workdir / "permuted.safetensors")
    positions = read_positions(workdir / "positions-dev.jsonl")
    a, _ = Evaluator(net).evaluate_bitboards(positions.bitboards, positions.stm)
    b, _ = Evaluator(permuted).evaluate_bitboards(positions.bitboards, positions.stm)
    np.testing.assert_array_equal(a, b)


def test_permute_refuses_a_float_network_and_writes_nothing(capsys, workdir):
    status, _, err = run(capsys, "permute", "float.safetensors", "--positions", "positions-dev.jsonl", "-o", "p.nnue")
    assert status == 1 and "holds a float network; permute a quantised one" in err
    assert not (workdir / "p.nnue").exists()


def test_permute_names_a_bad_position(capsys, workdir):
    (workdir / "bad.epd").write_text("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n"
                                     "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNZ w KQkq - 0 1\n")
    status, _, err = run(capsys, "permute", "stockfish", "--positions", "bad.epd", "-o", "p.nnue")
    assert status == 1 and "row 1" in err and "Z" in err
    assert not (workdir / "p.nnue").exists()


def test_check_exits_with_1_and_names_the_neurons_that_can_overflow(capsys, workdir):
    net = quantise(_float_net())
    w = net.ft_weights.copy()
    w[:, 9] = 1200
    save(dataclasses.replace(net, ft_weights=w), workdir / "over.safetensors")
    status, out, _ = run(capsys, "check", "over.safetensors")
    assert status == 1 and "INT16 OVERFLOW POSSIBLE in 1 neuron(s): 9 (" in out
    status, out, _ = run(capsys, "check", "over.safetensors", "--json")
    d = json.loads(out)
    assert status == 1 and d["accumulator"]["int16_overflow_neurons"] == [9] and d["safe"] is False
    assert d["accumulator"]["high"][9] > 32767


def test_check_of_a_float_network_reports_its_quantisation_error_and_plots(capsys, workdir):
    pytest.importorskip("matplotlib")
    status, out, err = run(capsys, "check", "float.safetensors", "--positions", "positions-dev.jsonl", "--limit", "200",
                           "--json", "--plot", "check.png")
    assert status == 0, err
    d = json.loads(out)
    assert d["quantised_from_float"] and d["float_error"]["positions"] == 200 and d["data"]["positions"] == 200
    assert (workdir / "check.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
