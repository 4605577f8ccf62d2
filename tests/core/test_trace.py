"""``Trace``: Stockfish's ``eval`` text of each version rendered from a trace (against the text the
engines print), and its SVG picture."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import chess
import pytest

import nnue_infer
from nnue_infer.cli import main


def run(capsys, *argv):
    status = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return status, out, err


def test_svg_into_a_missing_directory_or_a_full_device_is_named(capsys, tmp_path):
    status, out, err = run(capsys, "eval", "--trace", "--svg", tmp_path / "missing" / "t.svg", "startpos")
    assert status == 2 and out == "" and "--svg" in err and "does not exist" in err
    status, _, err = run(capsys, "eval", "--trace", "--svg", "/dev/full", "startpos")
    assert status == 1 and "cannot write --svg /dev/full" in err and "stdout" not in err


#: Stockfish 16's ``eval`` (npm stockfish@16.0.0, its net nn-5af11540bbfe.nnue, 328 units per pawn) on
#: Kiwipete with Black to move: the NNUE part of its output, recorded from the engine (the classical
#: table and the "Classical evaluation" line left out, as ``Trace.format_stockfish("16")`` renders it).
SF16_KIWIPETE_TEXT = """\
 NNUE derived piece values:
+-------+-------+-------+-------+-------+-------+-------+-------+
|   r   |       |       |       |   k   |       |       |   r   |
| -2.97 |       |       |       |       |       |       | -3.35 |
+-------+-------+-------+-------+-------+-------+-------+-------+
|   p   |       |   p   |   p   |   q   |   p   |   b   |       |
| -0.02 |       | -0.34 | -0.74 | -7.35 | -1.27 | -3.16 |       |
+-------+-------+-------+-------+-------+-------+-------+-------+
|   b   |   n   |       |       |   p   |   n   |   p   |       |
| -1.86 | -2.05 |       |       | -0.48 | -1.21 | -0.90 |       |
+-------+-------+-------+-------+-------+-------+-------+-------+
|       |       |       |   P   |   N   |       |       |       |
|       |       |       | +1.21 | +3.97 |       |       |       |
+-------+-------+-------+-------+-------+-------+-------+-------+
|       |   p   |       |       |   P   |       |       |       |
|       | -1.78 |       |       | +1.33 |       |       |       |
+-------+-------+-------+-------+-------+-------+-------+-------+
|       |       |   N   |       |       |   Q   |       |   p   |
|       |       | +3.37 |       |       | +6.60 |       | -1.22 |
+-------+-------+-------+-------+-------+-------+-------+-------+
|   P   |   P   |   P   |   B   |   B   |   P   |   P   |   P   |
| -0.17 | +1.29 | +0.79 | +4.57 | +4.32 | +0.68 | +0.18 | +0.02 |
+-------+-------+-------+-------+-------+-------+-------+-------+
|   R   |       |       |       |   K   |       |       |   R   |
| +4.83 |       |       |       |       |       |       | +4.77 |
+-------+-------+-------+-------+-------+-------+-------+-------+

 NNUE network contributions (Black to move)
+------------+------------+------------+------------+
|   Bucket   |  Material  | Positional |   Total    |
|            |   (PSQT)   |  (Layers)  |            |
+------------+------------+------------+------------+
|  0         |  -  0.06   |  -  0.82   |  -  0.88   |
|  1         |  +  0.02   |  +  1.64   |  +  1.66   |
|  2         |  +  0.07   |  +  1.39   |  +  1.46   |
|  3         |  +  0.05   |  +  1.45   |  +  1.49   |
|  4         |  +  0.02   |  +  1.49   |  +  1.52   |
|  5         |  +  0.02   |  +  1.73   |  +  1.75   |
|  6         |  +  0.04   |  +  1.75   |  +  1.79   |
|  7         |  +  0.06   |  +  1.63   |  +  1.69   | <-- this bucket is used
+------------+------------+------------+------------+

NNUE evaluation        -1.69 (white side)"""


KIWIPETE_BLACK = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1"


def test_trace_text_uses_the_networks_units_per_pawn():
    """The trace text divided by Stockfish's 361 whatever the network: for a network whose output
    is in centipawns (units_per_pawn 100) ``eval --trace`` printed +0.11 where ``eval`` said +0.38.
    The piece cells are checked against a rendering written out here (Stockfish's
    ``format_cp_compact``: sign, then d.dd of the centipawns truncated toward zero), not against
    the package's own ``format_cp_compact``."""
    import warnings

    from nnue_infer import Architecture, Evaluator, FloatNetwork, HiddenLayer, quantise
    from nnue_infer.quantisation import SCHEMES

    arch = Architecture(feature_set="Chess768", ft_width=64, ft_activation="glu", ft_clamp=255, ft_shift=9,
                        psqt_buckets=0, output_buckets=8, layers=(HiddenLayer(16, "crelu"), HiddenLayer(1, "none")),
                        output_units=400, units_per_pawn=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = Evaluator(quantise(FloatNetwork.random(arch, seed=1), SCHEMES["qa255-qb64"]))
    board = chess.Board(KIWIPETE_BLACK)
    trace = ev.trace(board)
    white = ev.evaluate_cp(board, white_pov=True)
    text = trace.format_stockfish()
    assert text.endswith("NNUE evaluation        %+.2f (white side)" % (trace.value_white / 100))
    assert abs(trace.value_white / 100 - white / 100) < 0.01
    for square, v in trace.piece_values.items():
        cp = abs(v)  # units_per_pawn 100: one unit is one centipawn
        assert cp < 1000, "a 4-character cell is rendered differently"
        cell = ("+" if v > 0 else "-" if v < 0 else " ") + f"{cp // 100}.{cp // 10 % 10}{cp % 10}"
        assert cell in text, (chess.square_name(square), v, cell)


def test_trace_text_of_stockfish_16s_net_is_the_engines():
    """Stockfish 16's net (328 units per pawn) against the engine's own text: runs without
    Node.js (the live comparison, tests/oracles/test_node_engines.py, needs it)."""
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        net = known_network("sf16")
    except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
        pytest.skip(str(exc))
    from nnue_infer import Evaluator

    assert Evaluator(net).trace(chess.Board(KIWIPETE_BLACK)).format_stockfish() == SF16_KIWIPETE_TEXT


AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


SVG = "{http://www.w3.org/2000/svg}"


def test_trace_svg_board_values_and_bucket_table(network):
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    t = nnue_infer.Evaluator(network).trace(board)
    svg = t.svg()
    assert t._repr_svg_() == svg
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    inner = root.find(f"{SVG}svg")  # python-chess's board, nested
    assert inner is not None and inner.find(f"{SVG}desc") is not None
    texts = [el.text for el in root.iter(f"{SVG}text")]
    assert "NNUE evaluation +0.28 (white side)" in texts
    assert "NNUE network contributions (White to move)" in texts
    # every piece but the kings: its value in pawns on its square, coloured by sign
    assert texts.count("+7.16") == 1 and t.piece_values[chess.D1] == 2585
    labels = [el.text for el in inner.iter(f"{SVG}text") if el.text and el.text[0] in "+-"]
    assert len(labels) == len(t.piece_values) == 30
    fills = {el.get("fill") for el in inner.iter(f"{SVG}rect")}
    assert any(f and f.startswith("#") and f[1:3] < f[3:5] for f in fills)  # a green square (White's gain)
    assert any(f and f.startswith("#") and f[1:3] > f[3:5] for f in fills)  # a red square (Black's)
    # the bucket table: 8 rows, the used bucket highlighted
    rows = [texts[i:i + 4] for i, s in enumerate(texts) if s in {str(k) for k in range(8)}]
    assert [r[0] for r in rows] == [str(k) for k in range(8)] and rows[7][1:] == ["-0.02", "+0.30", "+0.28"]
    assert len([el for el in root.findall(f"{SVG}rect") if el.get("fill") == "#fff3b0"]) == 1


def test_trace_svg_rasterises(network, tmp_path):
    try:
        import cairosvg
    except (ImportError, OSError) as exc:  # the renderer or the system's cairo library is missing
        pytest.skip(f"no SVG renderer: {exc}")
    svg = nnue_infer.Evaluator(network).trace(AFTER_E4).svg(size=320)
    png = cairosvg.svg2png(bytestring=svg.encode())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 320 and height >= 320
