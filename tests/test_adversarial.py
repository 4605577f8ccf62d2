"""Hostile input: each test pins a bug found by trying to break nnue-infer, or an attack that held.

Bad input must give a specific ``ValueError`` subclass from ``nnue_infer.errors`` naming what
is wrong, never a crash, a foreign exception or a silently wrong number; batch and single
evaluation must accept exactly the same FENs (python-chess's ``chess.Board(fen)`` decides).
Fixtures ``evaluator`` and ``corpus`` come from ``conftest.py``.
"""

from __future__ import annotations

import chess
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnue_infer import FenError, PositionError

START = chess.STARTING_FEN

# -- FEN strings: batch (compiled parser) == single (python-chess) -------------------------

#: Text python-chess reads but an ASCII parser would not: Unicode white space (split() splits on
#: it), Unicode digits and '_' in counters (int() reads them), the Kelvin sign 'K' (its lower()
#: is 'k', so python-chess reads a White king).
UNUSUAL_BUT_VALID = [
    START.replace(" w ", "\u00a0w\u3000"),
    START.replace(" 0 1", " \u0661\u0662 1"),
    START.replace(" 0 1", " 1_0 1"),
    START.replace(" 0 1", " 0 \uff11"),
    START + "\u2003",
    "4k3/8/8/8/8/8/8/4\u212a3 w - - 0 1",
]


@pytest.mark.parametrize("fen", UNUSUAL_BUT_VALID)
def test_batch_accepts_what_python_chess_accepts(evaluator, fen):
    """The compiled parser refused these (FenError) although evaluate() accepts them."""
    expected = evaluator.evaluate(fen)
    assert evaluator.evaluate_batch([START, fen]).tolist() == [evaluator.evaluate(START), expected]


@pytest.mark.parametrize("fen", ["\ud800", START + "\udfff", START.replace("w", "\ud83d")])
def test_lone_surrogates_are_fen_errors_naming_the_row(evaluator, fen):
    """Encoding the batch raised UnicodeEncodeError naming no row."""
    with pytest.raises(FenError):
        evaluator.evaluate(fen)
    with pytest.raises(FenError, match=r"^row 1: "):
        evaluator.evaluate_batch([START, fen])


def test_single_evaluation_raises_fen_error(evaluator):
    """evaluate() and forward_float() raised python-chess's bare ValueError for a bad FEN."""
    from nnue_infer import FloatNetwork, forward_float, stockfish_15_1_architecture

    float_net = FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)
    for fen in ["", "garbage", "8/8/8/8/8/8/8/8/8 w - - 0 1", START.replace(" w ", " x "), START.split()[0]]:
        with pytest.raises(FenError) as info:
            evaluator.evaluate(fen)
        with pytest.raises(FenError) as float_info:
            forward_float(float_net, fen)
        assert str(info.value) == str(float_info.value) and repr(fen) in str(info.value)  # one FEN rule


FUZZ_ALPHABET = ("pnbrqkPNBRQK0123456789/ wb-~_+x\t\n\x0b\x1c\x00"
                 "\u00a0\u2003\u3000\x85\u212a\u0661\uff11\uff2b\u00e9\ud800")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_fens_with_unicode_agree_with_single_evaluation(evaluator, data):
    """Random edits (Unicode included) of real FENs: batch and single evaluation agree on
    value, FenError or PositionError."""
    base = data.draw(st.sampled_from([START, "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
                                      "4k3/8/8/8/8/8/8/4K3 b - e3 5 9"]))
    chars = list(base)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(chars)))
        c = data.draw(st.sampled_from(FUZZ_ALPHABET))
        op = data.draw(st.sampled_from(["insert", "delete", "replace", "truncate"]))
        if op == "insert":
            chars.insert(i, c)
        elif op == "truncate":
            del chars[i:]
        elif i < len(chars):
            chars[i : i + 1] = [] if op == "delete" else [c]
    fen = "".join(chars)
    outcomes = []
    for run in (lambda: evaluator.evaluate(fen), lambda: int(evaluator.evaluate_batch([fen])[0])):
        try:
            outcomes.append(run())
        except (FenError, PositionError) as exc:
            outcomes.append(type(exc))
    assert outcomes[0] == outcomes[1], fen


# -- network descriptions ----------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("ft_width", 32.0), ("ft_clamp", 127.0), ("ft_clamp", True), ("output_scale", 16.5), ("skip_numerator", 600.5),
    ("skip_denominator", 0.5), ("weight_scale_bits", 6.5), ("psqt_buckets", 8.0), ("output_units", float("nan")),
    ("units_per_pawn", float("inf")), ("output_scale", 10**30), ("skip_numerator", -(2**40)), ("units_per_pawn", "361"),
])
def test_non_integer_architecture_fields_are_refused_by_name(tmp_path, field, value):
    """Floats were truncated silently into the kernels' int64 parameters (output_scale 16.5 ran
    as 16, skip_numerator 600.5 as 600), or escaped as TypeError / ZeroDivisionError /
    OverflowError from load() or Evaluator()."""
    import json

    import numpy as np
    from safetensors.numpy import load_file, save_file

    from nnue_infer import Architecture, FloatNetwork, NetworkFormatError, load, quantise, save
    from nnue_infer import stockfish_15_1_architecture

    arch = stockfish_15_1_architecture(32)
    data = json.loads(arch.to_json())
    with pytest.raises(NetworkFormatError, match=f"'{field}'"):
        Architecture.from_dict({**data, field: value})
    path = tmp_path / "net.safetensors"
    save(quantise(FloatNetwork.random(arch, seed=1)), path)
    tensors = load_file(path)
    from safetensors import safe_open

    with safe_open(path, "np") as f:
        info = json.loads(f.metadata()["nnue-infer"])
    info["architecture"][field] = value
    save_file(tensors, path, metadata={"nnue-infer": json.dumps(info)})
    with pytest.raises(NetworkFormatError, match=f"'{field}'"):
        load(path)
    assert Architecture.from_dict({**data, "ft_width": np.int64(32)}).ft_width == 32


def test_hidden_layer_sizes_must_be_integers():
    import dataclasses

    from nnue_infer import HiddenLayer, NetworkFormatError, stockfish_15_1_architecture

    arch = stockfish_15_1_architecture(32)
    for layer in (HiddenLayer(16.0, "sqr_crelu+crelu", 15), HiddenLayer(16, "sqr_crelu+crelu", 15.0)):
        with pytest.raises(NetworkFormatError, match=r"layers\[0\]"):
            dataclasses.replace(arch, layers=(layer, *arch.layers[1:]))
    with pytest.raises(NetworkFormatError, match="'layers'"):
        dataclasses.replace(arch, layers=({"outputs": 1, "activation": "none"},))


@pytest.mark.parametrize("version", [1.0, True, "1", 2, None])
def test_format_version_must_be_the_integer_1(tmp_path, version):
    import json

    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from nnue_infer import FloatNetwork, NetworkFormatError, load, quantise, save, stockfish_15_1_architecture

    path = tmp_path / "net.safetensors"
    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)), path)
    with safe_open(path, "np") as f:
        info = json.loads(f.metadata()["nnue-infer"])
    save_file(load_file(path), path, metadata={"nnue-infer": json.dumps({**info, "format_version": version})})
    with pytest.raises(NetworkFormatError, match="format_version"):
        load(path)


# -- boards whose bitboards contradict each other ----------------------------------------

def _typeless_square(board):  # a Black-occupied square without a piece type
    board.occupied_co[chess.BLACK] |= chess.BB_E5
    board.occupied |= chess.BB_E5


def _both_colours(board):
    board.occupied_co[chess.BLACK] |= chess.BB_E1


def _two_types(board):
    board.knights |= chess.BB_E1


@pytest.mark.parametrize("tamper", [_typeless_square, _both_colours, _two_types])
def test_tampered_boards_are_refused_by_every_path(evaluator, tamper):
    """A board whose internals were edited directly: the feature kernel read past the six piece
    types (out of bounds) for a square without a type, and single, incremental and batch paths
    gave three different numbers (-242 / -5 / error for a typeless square)."""
    board = chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 1")
    tamper(board)
    runs = {
        "evaluate": lambda: evaluator.evaluate(board),
        "batch": lambda: evaluator.evaluate_batch([board]),
        "set_position": lambda: evaluator.set_position(board),
        "evaluate_game": lambda: evaluator.evaluate_game(board, []),
        "trace": lambda: evaluator.trace(board),
    }
    for name, run in runs.items():
        with pytest.raises(PositionError, match="e1|e5"):
            run()
    # tampered after set_position, then pushed: the incremental kernel refuses it as well
    evaluator.set_position(chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 1"))
    try:
        evaluator._board.push(chess.Move.from_uci("e1d1"))
        tamper(evaluator._board)
        with pytest.raises(PositionError):
            evaluator.evaluate()
    finally:
        evaluator.set_position(chess.Board())


# -- CLI ------------------------------------------------------------------------------------

def test_epd_with_invalid_utf8_and_bom_reports_lines(tmp_path, capsys, evaluator):
    """Invalid UTF-8 in an EPD file crashed ``eval --epd`` with a UnicodeDecodeError traceback;
    now that line is a FEN error like any other, and a UTF-8 byte-order mark is skipped."""
    from nnue_infer.cli import main

    path = tmp_path / "bad.epd"
    path.write_bytes(b"\xef\xbb\xbf" + START.encode() + b"\n\xff\xfe garbage\n" + START.encode() + b" bm e4;\n")
    status = main(["eval", "--net", "stockfish", "--epd", str(path)])
    captured = capsys.readouterr()
    assert status == 1
    rows = [line.split(",") for line in captured.out.splitlines()[1:]]  # line,fen,value,...
    assert [(r[0], r[1], int(r[2])) for r in rows] == [("1", START, evaluator.evaluate(START)),
                                                       ("3", START, evaluator.evaluate(START))]
    assert captured.err.startswith(f"error: {path}:2: ") and len(captured.err.splitlines()) == 1


# -- imports from other trainers -----------------------------------------------------------

def _bullet_arch():
    from nnue_infer import Architecture, HiddenLayer

    return Architecture(feature_set="Chess768", ft_width=32, ft_activation="screlu", ft_clamp=255, ft_shift=8,
                        psqt_buckets=0, output_buckets=1, layers=(HiddenLayer(1, "none"),), output_units=400,
                        units_per_pawn=100)


@pytest.mark.parametrize("kwargs", [{"qa": 0}, {"qb": 0}, {"qa": -255}, {"qa": 1.5}, {"qb": True}])
def test_bullet_scales_must_be_positive_integers(tmp_path, kwargs):
    """qa=0 divided by zero (RuntimeWarning, then a misleading 'contains NaN'); a negative qa
    silently gave the network with every sign flipped."""
    from nnue_infer import FloatNetwork, NetworkFormatError
    from nnue_infer.formats.bullet import read_bullet, write_bullet

    arch = _bullet_arch()
    write_bullet(FloatNetwork.random(arch, seed=3), tmp_path / "q.bin")
    name = next(iter(kwargs))
    with pytest.raises(NetworkFormatError, match=f"{name} must be a positive integer"):
        read_bullet(tmp_path / "q.bin", arch, **kwargs)


def test_npz_import_of_non_archives_and_overflowing_values(tmp_path):
    """A .npy file raised TypeError, a corrupt archive zipfile.BadZipFile; float64 values beyond
    float32 warned about an overflow in a cast before the NaN/inf error."""
    import numpy as np

    from nnue_infer import FloatNetwork, NetworkFormatError
    from nnue_infer.float_network import network_tensors
    from nnue_infer.formats.arrays import float_network_from_arrays

    arch = _bullet_arch()
    arrays = network_tensors(FloatNetwork.random(arch, seed=3))
    np.save(tmp_path / "a.npy", arrays["ft.biases"])
    (tmp_path / "b.npz").write_bytes(b"PK\x03\x04 not a zip archive")
    np.savez(tmp_path / "c.npz", **{**arrays, "ft.biases": np.array([None] * 32, dtype=object)})
    for name in ("a.npy", "b.npz", "c.npz"):
        with pytest.raises(NetworkFormatError, match="not a readable .npz"):
            float_network_from_arrays(arch, tmp_path / name)
    with pytest.raises(NetworkFormatError, match="'ft.biases'.*NaN or infinity"):
        float_network_from_arrays(arch, {**arrays, "ft.biases": np.full(32, 1e300)})


# -- quantiser ---------------------------------------------------------------------------------

def test_quantise_never_clips_silently():
    """quantise() saturated out-of-range parameters and dropped the report: a hidden weight of
    1e6 became 127 without a word."""
    import numpy as np

    from nnue_infer import FloatNetwork, QuantisationRangeError, QuantisationWarning, quantise
    from nnue_infer import stockfish_15_1_architecture
    from nnue_infer.quantisation import quantise_with_report

    net = FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)
    weights = [w.copy() for w in net.layer_weights]
    weights[1][2, 3, 4] = 1e6
    bad = FloatNetwork(net.architecture, net.ft_biases, net.ft_weights, net.psqt_weights, tuple(weights),
                       net.layer_biases)
    with pytest.warns(QuantisationWarning, match=r"layers\.1\.weights.*1 "):
        q = quantise(bad)
    assert q.layer_weights[1][2, 3, 4] == 127 and np.array_equal(q.layer_weights[0], quantise(net).layer_weights[0])
    with pytest.raises(QuantisationRangeError, match=r"layers\.1\.weights"):
        quantise_with_report(bad, clip="error")


@pytest.mark.parametrize("fields, name", [
    ({"qa": 127.5}, "qa"), ({"qa": 0}, "qa"), ({"ft_shift": -1}, "ft_shift"), ({"weight_scale_bits": -1}, "weight_scale_bits"),
    ({"weight_scale_bits": 31}, "weight_scale_bits"), ({"output_scale": 1.5}, "output_scale"), ({"output_scale": 0}, "output_scale"),
])
def test_bad_scheme_fields_are_named(fields, name):
    """A float QA raised TypeError, a negative shift a bare 'negative shift count', QA=0
    'over by -32767', and weight_scale_bits=-1 blamed skip_denominator."""
    from nnue_infer import QuantisationRangeError, QuantisationScheme

    with pytest.raises(QuantisationRangeError, match=f"scheme field '{name}'"):
        QuantisationScheme(**fields)


def test_pgn_with_a_bad_fen_header_is_reported_and_skipped(tmp_path, capfd):
    """A game whose [FEN] header python-chess cannot read crashed ``eval --pgn`` with a ValueError
    traceback (and python-chess's own log lines doubled every reported error)."""
    from nnue_infer.cli import main

    path = tmp_path / "g.pgn"
    path.write_text('[Event "a"]\n[SetUp "1"]\n[FEN "xyz"]\n\n1. e4 *\n\n[Event "b"]\n\n1. e4 e5 *\n\n'
                    '[Event "c"]\n\n1. e4 e5 2. Ke3 *\n')
    status = main(["eval", "--pgn", str(path)])
    out, err = capfd.readouterr()
    assert status == 1
    import csv
    import io

    assert [(r["game"], r["ply"], r["uci"]) for r in csv.DictReader(io.StringIO(out))] == [
        ("2", "0", ""), ("2", "1", "e2e4"), ("2", "2", "e7e5"), ("3", "0", ""), ("3", "1", "e2e4"), ("3", "2", "e7e5")]
    lines = err.splitlines()  # game 3's wording is the PGN parser's (Rust: "illegal move: Ke3 ...")
    assert len(lines) == 2 and lines[0] == (f"error: {path}: game 1, ply 0: expected 8 rows in position part of fen: "
                                            "'xyz'")
    assert lines[1].startswith(f"error: {path}: game 3, ply 3: ") and "Ke3" in lines[1]


# -- weight files ------------------------------------------------------------------------------

def test_extract_from_a_file_full_of_network_headers(tmp_path):
    """200,000 copies of the 8-byte header with a 1 MB description length: every candidate
    copied up to 1 MB (quadratic: ~20 s for 2.4 MB, hours for an engine-sized file) and the
    error listed every candidate; now bad headers are rejected in place and counted."""
    from nnue_infer import NetworkFormatError, extract_network
    from nnue_infer.formats.stockfish import SF15_1_MAGIC

    path = tmp_path / "magic.bin"
    path.write_bytes((SF15_1_MAGIC + (1 << 20).to_bytes(4, "little")) * 200_000)
    with pytest.raises(NetworkFormatError, match=r"no embedded Stockfish network found") as info:
        extract_network(path, tmp_path / "out.nnue")
    assert len(str(info.value)) < 1000


def _rewrite_safetensors_header(path, edit):
    """Rewrite a safetensors file's JSON header with ``edit(header)`` (tensor data unchanged)."""
    import json
    import struct

    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    edit(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


@pytest.mark.parametrize("edit, match", [
    (lambda h: h["ft.biases"].update(dtype="BF16"), "unreadable safetensors data"),
    (lambda h: h["__metadata__"].update({"nnue-infer": 5}), "'nnue-infer' is not JSON"),
    (lambda h: h["ft.biases"].update(data_offsets=[0, 10**12]), "truncated in tensor .ft.biases."),
])
def test_hand_made_safetensors_headers(tmp_path, edit, match):
    """A BF16 tensor (numpy has no bfloat16) and a non-string metadata value escaped as TypeError."""
    from nnue_infer import FloatNetwork, NetworkFormatError, load, quantise, save, stockfish_15_1_architecture

    path = tmp_path / "net.safetensors"
    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)), path)
    _rewrite_safetensors_header(path, edit)
    with pytest.raises(NetworkFormatError, match=match):
        load(path)


def test_non_utf8_description_survives_conversion(tmp_path):
    """A .nnue description that is not UTF-8 was read as Latin-1 and written back as UTF-8:
    ``convert`` .nnue -> .safetensors -> .nnue changed the file silently."""
    import struct

    from nnue_infer import FloatNetwork, load, quantise, save, stockfish_15_1_architecture
    from nnue_infer.cli import main

    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)), tmp_path / "a.nnue")
    data = (tmp_path / "a.nnue").read_bytes()
    version, net_hash, length = struct.unpack("<III", data[:12])
    desc = b"caf\xe9 \xff net"
    original = struct.pack("<III", version, net_hash, len(desc)) + desc + data[12 + length :]
    (tmp_path / "b.nnue").write_bytes(original)
    assert main(["convert", str(tmp_path / "b.nnue"), str(tmp_path / "b.safetensors")]) in (0, None)
    assert main(["convert", str(tmp_path / "b.safetensors"), str(tmp_path / "c.nnue")]) in (0, None)
    assert (tmp_path / "c.nnue").read_bytes() == original
    assert main(["info", str(tmp_path / "b.safetensors")]) in (0, None)
    assert load(tmp_path / "b.nnue").description == load(tmp_path / "b.safetensors").description


# -- incremental API under odd sequences -------------------------------------------------

@pytest.fixture(scope="module")
def small_network():
    from nnue_infer import FloatNetwork, quantise, stockfish_15_1_architecture

    return quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=4))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=60))
def test_odd_operation_sequences_keep_incremental_equal_to_fresh(network, small_network, ops):
    """Legal, illegal, wrong-side and null moves, pops past the start, set_position with move
    stacks, network swaps, evaluate_game and fresh evaluations interleaved: after every step the
    incremental value equals a fresh evaluation, and a refused move changes nothing."""
    from nnue_infer import Evaluator, IllegalMoveError

    ev = Evaluator(network)
    for op, r in ops:
        board = ev.board
        legal = list(board.legal_moves)
        if op <= 3 and legal:
            ev.push(legal[r % len(legal)])
        elif op == 4:  # a random or wrong-side move
            flipped = board.copy(stack=False)
            flipped.turn = not flipped.turn
            candidates = [chess.Move(r % 64, r // 64 % 64), *flipped.pseudo_legal_moves]
            move = candidates[r % len(candidates)]
            if not board.is_legal(move) and move:
                before = (board.fen(), board.move_stack)
                with pytest.raises(IllegalMoveError):
                    ev.push(move)
                after = ev.board
                assert (after.fen(), after.move_stack) == before
        elif op == 5:
            if board.is_check():  # a pass in check would leave the king in check: refused, nothing changes
                with pytest.raises(IllegalMoveError):
                    ev.push(chess.Move.null())
                assert ev.board.move_stack == board.move_stack
            else:
                ev.push(chess.Move.null())
        elif op == 6:
            if board.move_stack:
                ev.pop()
            else:
                with pytest.raises(IndexError):
                    ev.pop()
        elif op == 7:
            ev.set_position(board if r % 2 else board.fen())
        elif op == 8:
            ev.network = small_network if ev.network is network else network
        else:
            values = ev.evaluate_game(board.root(), board.move_stack)
            assert values[-1] == ev.evaluate(board)
        assert ev.evaluate() == ev.evaluate(ev.board)


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


@pytest.mark.parametrize("single", [START, START.encode(), chess.Board()])
def test_batch_of_a_single_fen_or_board_is_a_type_error(evaluator, single):
    """A FEN string given instead of a list was read letter by letter ('row 0: rank 8 of the
    placement field does not have 8 squares ... of 'r'')."""
    with pytest.raises(TypeError, match="wrap it in a list"):
        evaluator.evaluate_batch(single)


def test_module_functions_do_not_keep_every_network_alive(small_network):
    """nnue_infer.evaluate(board, network=net) cached one evaluator per network forever: a
    program trying many networks kept them all in memory (+12 MB per L1=256 network)."""
    import gc
    import weakref

    import nnue_infer
    from nnue_infer import Network

    def copy_of(net):
        return Network(net.architecture, net.ft_biases.copy(), net.ft_weights.copy(), net.psqt_weights.copy(),
                       net.layer_weights, net.layer_biases)

    first = copy_of(small_network)
    expected = nnue_infer.evaluate(START, network=first)
    gone = weakref.ref(first)
    del first
    for _ in range(8):
        assert nnue_infer.evaluate(START, network=copy_of(small_network)) == expected
    gc.collect()
    assert gone() is None


def test_concurrent_extraction_to_one_path(tmp_path):
    """Processes (here threads) extracting the network at once shared one ``out.part`` file: on a
    fresh cache four simultaneous first uses all failed (FileNotFoundError, 'truncated')."""
    from concurrent.futures import ThreadPoolExecutor

    from nnue_infer import FloatNetwork, extract_network, quantise, save, stockfish_15_1_architecture

    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(1024), seed=1)), tmp_path / "net.nnue")
    binary = tmp_path / "engine"
    binary.write_bytes(b"\x7fELF" + bytes(1000) + (tmp_path / "net.nnue").read_bytes() + bytes(1000))
    out = tmp_path / "out.nnue"
    with ThreadPoolExecutor(4) as pool:
        digests = list(pool.map(lambda _: extract_network(binary, out), range(4)))
    assert len(set(digests)) == 1 and out.read_bytes() == (tmp_path / "net.nnue").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".part"] == []


@pytest.fixture(scope="module")
def small_files(small_network, tmp_path_factory):
    """The small network as .nnue and .safetensors bytes."""
    from nnue_infer import save

    root = tmp_path_factory.mktemp("small")
    save(small_network, root / "n.nnue")
    save(small_network, root / "n.safetensors")
    return {ext: (root / f"n.{ext}").read_bytes() for ext in ("nnue", "safetensors")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_load_exactly_or_fail_with_network_format_error(small_files, small_network, tmp_path, data):
    """Truncations anywhere and bit flips in the headers (where every byte is checked or is
    free text): NetworkFormatError, or a network that evaluates; never another exception."""
    from nnue_infer import Evaluator, NetworkFormatError, load

    ext = data.draw(st.sampled_from(sorted(small_files)))
    blob = bytearray(small_files[ext])
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            blob[data.draw(st.integers(0, 2000))] ^= 1 << data.draw(st.integers(0, 7))
    path = tmp_path / f"damaged.{ext}"
    path.write_bytes(bytes(blob))
    try:
        net = load(path)
    except NetworkFormatError:
        return
    Evaluator(net).evaluate(START)


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
    Node.js (the live comparison, tests/test_live_node_engines.py, needs it)."""
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        net = known_network("sf16")
    except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
        pytest.skip(str(exc))
    from nnue_infer import Evaluator

    assert Evaluator(net).trace(chess.Board(KIWIPETE_BLACK)).format_stockfish() == SF16_KIWIPETE_TEXT


def test_unvalidated_moves_from_empty_or_enemy_squares_change_nothing(network):
    """push(move, validate=False) from an empty square failed python-chess's assertion half-way
    through Board.push: AssertionError, with the move left on the evaluator's stack."""
    from nnue_infer import Evaluator, IllegalMoveError

    ev = Evaluator(network)
    for uci in ("e4e5", "e7e5"):
        with pytest.raises(IllegalMoveError, match="side to move"):
            ev.push(chess.Move.from_uci(uci), validate=False)
        assert ev.board.move_stack == [] and ev.board.fen() == START
        with pytest.raises(IllegalMoveError, match=r"moves\[1\]"):
            ev.evaluate_game(START, ["e2e4", uci if uci == "e4e5" else "e2e4"], validate=False)
    assert ev.evaluate() == ev.evaluate(START)


@pytest.mark.parametrize("mode, text", [("--epd", START + "\n"), ("--pgn", '[Event "x"]\n\n1. e4 *\n')])
def test_output_onto_the_input_file_is_refused(tmp_path, capsys, mode, text):
    """``eval --epd a.epd -o a.epd`` opened the output first: the input was emptied, nothing was
    evaluated, and the exit status was 0."""
    from nnue_infer.cli import main

    path = tmp_path / "in.txt"
    path.write_text(text)
    (tmp_path / "link.txt").symlink_to(path)
    for output in (path, tmp_path / "link.txt"):
        assert main(["eval", mode, str(path), "-o", str(output)]) == 2
        assert "is the input file" in capsys.readouterr().err
    assert path.read_text() == text
