"""Issue 12's API findings: networks by name or path everywhere, push_uci / push_san, evaluate_cp,
stockfish_15_1_network(binary=...), and Trace.svg() (parsed, and rasterised when cairo is there)."""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET

import chess
import pytest

import nnue_infer
from nnue_infer import resources
from nnue_infer.errors import IllegalMoveError, NetworkNotFoundError

AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
SVG = "{http://www.w3.org/2000/svg}"


def test_evaluator_takes_a_name_or_a_path(network, network_path):
    assert nnue_infer.Evaluator("stockfish").network is nnue_infer.stockfish_15_1_network()
    assert nnue_infer.Evaluator(network_path).evaluate(AFTER_E4) == -52
    assert nnue_infer.Evaluator(str(network_path)).evaluate(AFTER_E4) == -52
    assert nnue_infer.Evaluator("default").network is nnue_infer.default_network()
    with pytest.raises(NetworkNotFoundError, match="does not exist"):
        nnue_infer.Evaluator("no-such-net.nnue")
    with pytest.raises(TypeError, match="a network file or a name"):
        nnue_infer.Evaluator(42)


def test_module_functions_take_a_name_or_a_path(network_path):
    assert nnue_infer.evaluate(AFTER_E4, "stockfish") == -52
    assert nnue_infer.evaluate(AFTER_E4, network_path) == -52
    assert nnue_infer.evaluate_batch([AFTER_E4, chess.STARTING_FEN], "stockfish").tolist() == [-52, 69]
    assert nnue_infer.evaluate_game(chess.Board(), ["e2e4"], str(network_path)).tolist() == [69, -52]


def test_module_evaluate_cp(network):
    assert nnue_infer.evaluate_cp(AFTER_E4, network) == -14
    assert nnue_infer.evaluate_cp(AFTER_E4, "stockfish", white_pov=True) == 14
    assert nnue_infer.evaluate_cp(AFTER_E4) == nnue_infer.Evaluator().evaluate_cp(AFTER_E4)
    results = []
    threads = [threading.Thread(target=lambda: results.append(nnue_infer.evaluate_cp(AFTER_E4, "stockfish")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [-14] * 4


def test_push_uci_and_push_san(network):
    ev = nnue_infer.Evaluator(network)
    assert ev.push_uci("e2e4") == chess.Move.from_uci("e2e4")
    assert ev.push_san("e5") == chess.Move.from_uci("e7e5")
    ev.push_san("Nf3")
    ev.push_uci("b8c6")
    ev.push_san("Bc4")
    ev.push_san("Nf6")
    assert ev.push_san("O-O") == chess.Move.from_uci("e1g1")
    assert ev.evaluate() == -66 and ev.evaluate() == ev.evaluate(ev.board)
    with pytest.raises(TypeError, match=r"push_uci\('e2e4'\) and push_san\('e4'\) take text"):
        ev.push("e2e4")
    fen = ev.board.fen()
    for bad, push in (("e2e4", ev.push_uci), ("Ke2", ev.push_san), ("xyz", ev.push_uci), ("Nc3", ev.push_san)):
        with pytest.raises(IllegalMoveError, match=fen.split()[0].replace("/", "/")):
            push(bad)
        assert ev.board.fen() == fen  # nothing changed


def test_stockfish_network_from_a_given_binary(tmp_path, monkeypatch, stockfish_binary, network):
    monkeypatch.setattr(resources, "_stockfish", None)
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path / "cache"))
    net = nnue_infer.stockfish_15_1_network(binary=stockfish_binary)
    assert (tmp_path / "cache" / "nn-ad9b42354671.nnue").is_file()
    assert nnue_infer.Evaluator(net).evaluate(AFTER_E4) == -52
    monkeypatch.setattr(resources, "_stockfish", None)
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path / "other"))
    with pytest.raises(NetworkNotFoundError, match="no-binary"):
        nnue_infer.stockfish_15_1_network(binary=tmp_path / "no-binary")


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


def test_evaluate_game_names_an_illegal_uci_move_and_the_position_once():
    """python-chess's parse_uci message names the FEN too: it appeared twice (fresh-user trial)."""
    board = chess.Board()
    board.push_uci("e2e4")
    with pytest.raises(IllegalMoveError) as info:
        nnue_infer.evaluate_game(chess.Board(), ["e2e4", "e2e4"])
    assert str(info.value) == f"moves[1] ('e2e4') in {board.fen()}: illegal uci: 'e2e4'"
