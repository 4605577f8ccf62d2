"""The command line as Stockfish users type it, one option name per concept, help texts, info/extract/crosscheck.

Issue 12's findings, one test each: several FEN arguments, startpos / fen / moves (UCI and SAN),
strict FENs, ``--net FEN``, check and finished games flagged, ``--svg``, ``--help`` with units and
examples, ``info --json``, ``extract`` without ``-o``, ``crosscheck`` without a PNG unless asked.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import chess
import pytest

from nnue_infer.cli import cli, main
import nnue_infer
from nnue_infer.cli import main

SF = ["--net", "stockfish"]
START = chess.STARTING_FEN
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
OPERA_MATE = "1n1Rkb1r/p4ppp/4q3/4p1B1/4P3/8/PPP2PPP/2K5 b k - 1 17"


def run(capsys, *argv):
    status = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return status, out, err


def values(out: str) -> list[int]:
    return [int(line.split("\t")[1].split()[1]) for line in out.splitlines()]


def test_several_fen_arguments_quoted_or_as_words(capsys):
    status, out, err = run(capsys, "eval", *SF, AFTER_E4, START)
    assert status == 0 and err == "" and values(out) == [-52, 69]
    status, out, _ = run(capsys, "eval", *SF, *AFTER_E4.split(), *START.split())
    assert status == 0 and values(out) == [-52, 69]
    status, out, _ = run(capsys, "eval", *SF, "fen", *AFTER_E4.split(), "startpos")
    assert status == 0 and values(out) == [-52, 69]


def test_startpos_and_moves_in_uci_san_or_pasted_pgn(capsys, evaluator):
    board = chess.Board()
    for san in ["e4", "e5", "Nf3", "Nc6"]:
        board.push_san(san)
    expected = evaluator.evaluate(board)
    for words in (["startpos", "moves", "e2e4", "e7e5", "g1f3", "b8c6"],
                  ["startpos", "moves", "e4", "e5", "Nf3", "Nc6"],
                  ["startpos moves 1. e4 e5 2.Nf3 Nc6"],
                  ["fen", START, "moves", "e4", "e7e5", "Nf3", "b8c6"]):
        status, out, err = run(capsys, "eval", *SF, *words)
        assert status == 0 and err == "", words
        assert out.split("\t")[0] == board.fen() and values(out) == [expected], words


def test_illegal_move_names_the_move(capsys):
    status, out, err = run(capsys, "eval", *SF, "startpos", "moves", "e4", "e4")
    assert status == 1 and out == ""
    assert "moves[1]" in err and "'e4'" in err and "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b" in err


def test_strict_fen_names_the_missing_field_lenient_reads_it(capsys, evaluator):
    placement = AFTER_E4.split()[0]
    status, out, err = run(capsys, "eval", *SF, placement)
    assert status == 1 and out == "" and "no side to move field" in err and "--lenient" in err
    status, out, err = run(capsys, "eval", *SF, "--fen", f"{placement} b")
    assert status == 1 and "no castling rights field" in err
    status, out, _ = run(capsys, "eval", *SF, "--lenient", placement)  # python-chess: White to move
    assert status == 0 and values(out) == [evaluator.evaluate(f"{placement} w - - 0 1")] != [-52]
    status, out, _ = run(capsys, "eval", *SF, "--lenient", f"{placement} b")
    assert status == 0 and values(out) == [-52]


def test_net_given_a_fen_says_so(capsys):
    status, out, err = run(capsys, "eval", "--net", AFTER_E4, "startpos")
    assert status == 1 and out == ""
    assert "looks like a FEN" in err and "--net takes a network file or name" in err


def test_check_checkmate_stalemate_are_flagged(capsys):
    status, out, _ = run(capsys, "eval", *SF, "startpos moves f3 e5 g4 Qh4#", "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",
                         "startpos moves e4 f5 Qh5+")
    lines = out.splitlines()
    assert status == 0 and len(lines) == 3
    assert lines[0].endswith("\tcheckmate") and lines[1].endswith("\tstalemate") and lines[2].endswith("\tin check")
    status, out, _ = run(capsys, "eval", *SF, "--empty-in-check", "startpos moves e4 f5 Qh5+", OPERA_MATE)
    assert out.splitlines() == ["rnbqkbnr/ppppp1pp/8/5p1Q/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 2\tvalue none (in check)",
                                f"{OPERA_MATE}\tvalue none (in check)\tcheckmate"]
    status, out, _ = run(capsys, "eval", *SF, "--json", OPERA_MATE)
    obj = json.loads(out)
    assert (obj["value"], obj["cp_white"], obj["in_check"], obj["outcome"]) == (347, -96, True, "checkmate")


def test_trace_svg_file(capsys, tmp_path):
    target = tmp_path / "trace.svg"
    status, out, err = run(capsys, "eval", *SF, "--trace", "--svg", target, "startpos moves e4 e5 Nf3 Nc6")
    assert status == 0 and "NNUE evaluation" in out
    root = ET.fromstring(target.read_text())
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "NNUE evaluation +0.28 (white side)" in texts
    status, _, err = run(capsys, "eval", *SF, "--trace", "--svg", target, "startpos", AFTER_E4)
    assert status == 2 and "--svg draws one position" in err


COMMANDS = ["eval", "info", "extract", "datagen", "train", "convert", "quantise", "crosscheck"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_shows_an_example(capsys, command):
    status, out, _ = run(capsys, command, "--help")
    assert status == 0 and "Examples:" in out and f"nnue-infer {command}" in out.split("Examples:")[1]


@pytest.mark.parametrize("command,words", [
    ("eval", ["internal units", "361", "side to move", "centipawns"]),
    ("datagen", ["internal units", "361"]),
    ("crosscheck", ["centipawns", "side to move"]),
    ("train", ["centipawns"]),
    ("info", ["units_per_pawn"]),
])
def test_help_states_units(capsys, command, words):
    _, out, _ = run(capsys, command, "--help")
    flat = " ".join(out.split())
    assert all(w in flat for w in words), (command, [w for w in words if w not in flat])


def test_one_option_name_per_concept():
    """--threads, --quiet, --json, --output mean one thing each, wherever they appear."""
    seen: dict[str, set] = {}
    for name, command in cli.commands.items():
        for p in command.params:
            for opt in p.opts:
                if not getattr(p, "hidden", False):
                    seen.setdefault(opt, set()).add(name)
    assert "--jobs" not in seen and "-j" not in seen
    assert {"eval", "datagen", "train", "crosscheck"} <= seen["--threads"]
    assert set(COMMANDS) <= seen["--quiet"] | {"info"}
    assert {"eval", "info", "crosscheck"} <= seen["--json"]
    assert {"eval", "extract", "datagen", "train"} <= seen["--output"]
    assert "--positions" not in {o for p in cli.commands["datagen"].params if not getattr(p, "hidden", False) for o in p.opts}


def test_info_json(capsys, network_path):
    status, out, _ = run(capsys, "info", "--json", network_path)
    d = json.loads(out)
    assert status == 0 and d["format"] == "stockfish" and d["sha256"].startswith("ad9b42354671")
    assert d["architecture"]["ft_width"] == 1024 and d["feature_transformer"]["features"] == 22528
    assert d["hashes"] == {"network": "0x3E5AA6EE", "feature_transformer": "0x7F2344B8", "layer_stack": "0x63336A4A"} \
        or d["hashes"]["feature_transformer"] == "0x7F2344B8"
    assert [l["outputs"] for l in d["layers"]] == [16, 32, 1]


def test_extract_names_the_file_after_the_net(capsys, tmp_path, monkeypatch, stockfish_binary):
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "extract", stockfish_binary)
    assert status == 0, err
    assert (tmp_path / "nn-ad9b42354671.nnue").stat().st_size == 47001499
    assert [p.name for p in tmp_path.iterdir()] == ["nn-ad9b42354671.nnue"]  # no temporary file left


def test_crosscheck_draws_only_when_asked_and_names_the_extra(capsys, tmp_path, monkeypatch, network_path, corpus):
    positions = tmp_path / "p.epd"
    positions.write_text("\n".join(r["fen"] for r in corpus[:20]) + "\n")
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "crosscheck", "--float", network_path, "--quantised", network_path,
                           "--positions", positions, "--json")
    # no bar (stderr is not a terminal); the first-use compile notice may come on a cold cache (test_compile)
    others = [line for line in err.splitlines() if "compiling kernels for this CPU" not in line]
    assert status == 0 and json.loads(out)["plot"] is None and others == [], err
    assert not list(tmp_path.glob("*.png"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the plot extra were not installed
    status, out, err = run(capsys, "crosscheck", "--float", network_path, "--quantised", network_path,
                           "--positions", positions, "--plot", tmp_path / "h.png")
    assert status == 1 and "pip install 'nnue-infer[plot]'" in err


def test_datagen_count_option_and_deprecated_alias(capsys, tmp_path, network_path):
    status, out, _ = run(capsys, "datagen", "-o", tmp_path / "a.npz", "--count", "30", "--teacher", network_path)
    assert status == 0 and json.loads(out)["positions"] == 30
    status, out, err = run(capsys, "datagen", "-o", tmp_path / "b.npz", "--positions", "30", "--teacher", network_path)
    assert status == 0 and "deprecated" in err and (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


# -- hostile input ---------------------------------------------------------------------------------------------------

def test_info_of_an_empty_name_is_an_error(capsys):
    """Item 2 (``nnue-infer info NAME``, d0ad832): ``info ""`` died with a FileNotFoundError traceback
    (``Path("")`` is ``.``, which exists, so ``network_from_spec`` went on to load ``""``); it was a usage
    error before the session.  Now the message of a name that is no network and no file, as for any
    missing path; ``Evaluator("")`` raises the same NetworkNotFoundError."""
    status = main(["info", ""])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.startswith("error: '' is no known network name and no file")
    with pytest.raises(nnue_infer.NetworkNotFoundError, match="'' is no known network name"):
        nnue_infer.Evaluator("")
