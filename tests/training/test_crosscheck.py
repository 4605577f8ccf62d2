"""``nnue-infer quantise`` and ``nnue-infer crosscheck``: real networks, real positions."""

from __future__ import annotations

import json

import numpy as np

import nnue_infer
from nnue_infer.cli import main
from nnue_infer.training.crosscheck import crosscheck, read_positions
from nnue_infer.float_network import FloatNetwork, forward_float
from nnue_infer.formats import load, save
from nnue_infer.network import Architecture, HiddenLayer
import chess
import pytest

ARCH = Architecture(feature_set="HalfKAv2_hm", ft_width=128, ft_activation="bilinear", ft_clamp=127, ft_shift=7,
                    psqt_buckets=8, output_buckets=8,
                    layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none")),
                    skip_index=15)


def test_quantise_and_crosscheck_cli(tmp_path, corpus, capsys):
    fpath, qpath, pos, png = (tmp_path / n for n in ("f.safetensors", "q.safetensors", "pos.jsonl", "h.png"))
    fn = FloatNetwork.random(ARCH, seed=11)
    save(fn, fpath)
    rows = corpus[::33]
    pos.write_text("".join(json.dumps({"fen": r["fen"]}) + "\n" for r in rows) + "# a comment\n8/8/8/8/8/8/8/8 w - - 0 1\n")
    assert main(["quantise", str(fpath), str(qpath), "--scheme", "qa255-qb64"]) == 0
    out, err = capsys.readouterr()
    assert "QA=255, shift 9" in out and "no parameter clipped" in out
    # the float file declares QA=127, shift 7: the scheme replacing them is said (fresh-user trial)
    assert f"note: {fpath} declares QA=127, shift 7; the scheme 'qa255-qb64' replaced them (QA=255, shift 9)" in err
    assert main(["quantise", str(fpath), str(tmp_path / "q2.safetensors"), "--qa", "255", "--shift", "9"]) == 0
    assert "declares QA=127, shift 7; --qa and --shift replaced them" in capsys.readouterr().err  # (not the scheme)
    q = load(qpath)
    assert isinstance(q, nnue_infer.Network) and q.architecture.ft_clamp == 255

    assert main(["crosscheck", "--float", str(fpath), "--quantised", str(qpath), "--positions", str(pos),
                 "--plot", str(png), "--json", "--worst", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["positions"] == len(rows) and summary["skipped"] == 1  # the kingless board
    # the same numbers by hand
    ev = nnue_infer.Evaluator(q)
    err = np.array([(ev.evaluate(r["fen"]) - forward_float(fn, r["fen"])) * 100 / 361 for r in rows])
    assert np.isclose(summary["mae_cp"], np.abs(err).mean()) and np.isclose(summary["max_abs_cp"], np.abs(err).max())
    worst = summary["worst"]
    assert len(worst) == 3 and np.isclose(abs(worst[0]["error_cp"]), np.abs(err).max())
    assert worst[0]["fen"] == rows[int(np.argmax(np.abs(err)))]["fen"]

    assert main(["crosscheck", "--float", str(fpath), "--quantised", str(qpath), "--positions", str(pos),
                 "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "correlation:" in text and "worst positions:" in text and "distribution:" in text


def test_crosscheck_refuses_mismatched_networks(tmp_path, capsys):
    fpath = tmp_path / "f.safetensors"
    save(FloatNetwork.random(ARCH, seed=1), fpath)
    other = FloatNetwork.random(Architecture(**{**ARCH.__dict__, "ft_activation": "pairwise"}), seed=1)
    opath = tmp_path / "o.safetensors"
    save(other, opath)
    pos = tmp_path / "p.epd"
    pos.write_text("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\n")
    assert read_positions(pos) == ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"]
    assert main(["quantise", str(opath), str(tmp_path / "oq.safetensors")]) == 0
    assert main(["crosscheck", "--float", str(fpath), "--quantised", str(tmp_path / "oq.safetensors"),
                 "--positions", str(pos)]) == 1
    assert "ft_activation" in capsys.readouterr().err
    assert main(["quantise", str(tmp_path / "oq.safetensors"), str(tmp_path / "x.safetensors")]) == 1
    assert "quantised network" in capsys.readouterr().err


def test_crosscheck_stockfish_against_its_dequantised_self(network, corpus):
    from nnue_infer.quantisation import dequantise

    r = crosscheck(dequantise(network), network, [c["fen"] for c in corpus[::50]])
    s = r.summary()
    assert s["correlation"] > 0.999 and s["skipped"] == 0


def test_eval_refuses_float_network(tmp_path, capsys):
    save(FloatNetwork.random(ARCH, seed=1), tmp_path / "f.safetensors")
    assert main(["eval", "--net", str(tmp_path / "f.safetensors"), "8/8/8/8/8/8/8/K1k5 w - - 0 1"]) == 1
    assert "float network; quantise it first" in capsys.readouterr().err


# -- hostile input ---------------------------------------------------------------------------------------------------

START = chess.STARTING_FEN


def test_crosscheck_positions_file_with_bad_lines(tmp_path):
    """A JSON line whose 'fen' is not a string crashed crosscheck with an AttributeError;
    invalid UTF-8 failed the whole file with a decode error naming neither file nor line."""
    from nnue_infer.training.crosscheck import read_positions

    path = tmp_path / "p.txt"
    path.write_bytes(b'\xef\xbb\xbf' + START.encode() + b'\n\xff garbage\n{"fen": "8/8/8/8/8/8/8/8 w - -"}\n')
    fens = read_positions(path)
    assert fens[0] == START and fens[2] == "8/8/8/8/8/8/8/8 w - -" and len(fens) == 3
    for bad in ('{"fen": 5}', '{"fen": null}', '{"fen": ["x"]}'):
        path.write_text(START + "\n" + bad + "\n")
        with pytest.raises(ValueError, match=r"p\.txt:2: 'fen' must be a string"):
            read_positions(path)
