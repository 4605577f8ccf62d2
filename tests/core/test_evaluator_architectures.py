"""Every architecture through every evaluation path: full refresh, incremental (set_position /
push / pop / evaluate), evaluate_game and evaluate_batch give identical integers."""

from __future__ import annotations

import json

import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.float_network import FloatNetwork
from nnue_infer.network import FT_ACTIVATIONS, Architecture, HiddenLayer
from nnue_infer.quantisation import SCHEMES, quantise

SF_LAYERS = (HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none"))
MIRRORED_BUCKETS = tuple((sq // 8) // 2 + 4 * ((sq % 8) >= 2) for sq in range(64))  # 8 buckets


def make(activation, feature_set="HalfKAv2_hm", scheme="stockfish", **kw):
    shift = {1: 0, 2: 7, 3: 14, 4: 21}[FT_ACTIVATIONS[activation].degree]
    base = dict(feature_set=feature_set, ft_width=64, ft_activation=activation, ft_clamp=127, ft_shift=shift,
                psqt_buckets=8, output_buckets=8, layers=SF_LAYERS, skip_index=15)
    base.update(kw)
    return quantise(FloatNetwork.random(Architecture(**base), seed=17), SCHEMES[scheme])


ARCHITECTURES = {
    "halfka-pairwise": lambda: make("pairwise"),
    "halfka-crelu-qa255": lambda: make("crelu", scheme="qa255-qb64"),
    "halfka-screlu": lambda: make("screlu"),
    "halfka-pairwise_screlu": lambda: make("pairwise_screlu", psqt_buckets=0),
    "chess768-glu": lambda: make("glu", "Chess768", output_buckets=1, psqt_buckets=0, skip_index=-1,
                                 layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none"))),
    "chess768-bilinear-buckets-a-d": lambda: make("bilinear", "Chess768", king_buckets=MIRRORED_BUCKETS, mirror="a-d"),
    "chess768-screlu-buckets-e-h": lambda: make("screlu", "Chess768", king_buckets=MIRRORED_BUCKETS, mirror="e-h",
                                                output_buckets=4, psqt_buckets=4),
    "chess768-pairwise-buckets-nomirror": lambda: make("pairwise", "Chess768", king_buckets=tuple(range(64)),
                                                       mirror="none", scheme="qa255-qb64"),
    "halfka-pairwise-float-hidden": lambda: make("pairwise", layers=(
        HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "screlu", precision="float32"),
        HiddenLayer(8, "relu", precision="float32"), HiddenLayer(1, "none", precision="float32"))),
}


@pytest.fixture(scope="module")
def games(data_dir):
    with open(data_dir / "games-dev.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # a few games with castling both ways, en passant and promotions (king moves change frames)
    chosen = [g for g in rows if g["features"].get("castle_queenside") and g["features"].get("en_passant")][:2]
    chosen += [g for g in rows if g["features"].get("underpromotion")][:1] + [g for g in rows if g["id"].startswith("sf-eg")][:1]
    return chosen


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_all_paths_identical(name, games):
    net = ARCHITECTURES[name]()
    inc, ref = Evaluator(net), Evaluator(net)
    for game in games:
        board = chess.Board(game["start_fen"])
        inc.set_position(board)
        fens, values = [board.fen()], [inc.evaluate()]
        for uci in game["moves"]:
            board.push_uci(uci)
            inc.push(chess.Move.from_uci(uci))
            fens.append(board.fen())
            values.append(inc.evaluate())
        full = [ref.evaluate(f) for f in fens]
        assert values == full, name
        # pop back half the game: the stored accumulators still give the same numbers
        for _ in range(len(game["moves"]) // 2):
            inc.pop()
            fens.pop()
            full.pop()
        assert inc.evaluate() == full[-1]
        assert inc.evaluate_game(game["start_fen"], game["moves"]).tolist() == values
        assert np.array_equal(inc.evaluate_batch(fens), np.array(full[: len(fens)], np.int32))


def test_centipawns_follow_units_per_pawn(tmp_path, capsys):
    """A network whose internal unit is the centipawn (bullet-style) reports it unchanged."""
    import dataclasses

    from nnue_infer.cli import main
    from nnue_infer.formats import save

    net = ARCHITECTURES["chess768-glu"]()
    cp_net = dataclasses.replace(net, architecture=dataclasses.replace(net.architecture, units_per_pawn=100))
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 3 3"
    ev = Evaluator(cp_net)
    value = ev.evaluate(fen)
    assert ev.evaluate_cp(fen) == value and ev.evaluate_cp(fen, white_pov=True) == -value
    assert Evaluator(net).evaluate_cp(fen) == int(100 * value / 361)
    save(cp_net, tmp_path / "n.safetensors")
    assert main(["eval", "--net", str(tmp_path / "n.safetensors"), "--json", fen]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["value"] == row["cp"] == value and row["cp_white"] == -value
