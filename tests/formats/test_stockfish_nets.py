"""Stockfish 16-19 networks: LEB128, the format family, extraction, and Stockfish 19 lite's corpus.

The nets come from the npm package ``stockfish`` (``npm pack stockfish@V`` into
``<cache>/npm/``; ``.ci/run`` fetches them); a test whose tarball is missing locally skips and
says which command fetches it.  Oracle for the lite net: ``shared/data/sf19/`` (the engine's
printed raw values for 3,298 positions, 250 generated positions and 26,597 game plies).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import struct

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer import NetworkFormatError
from nnue_infer.errors import NetworkNotFoundError
from nnue_infer.formats.stockfish import parse_stockfish, stockfish_bytes
from nnue_infer.kernels.data import leb128 as L
from nnue_infer.formats.registry import KNOWN_NETWORKS, known_by_spec
from nnue_infer.resources import known_network, known_network_path

from tests.conftest import shared_dir
import contextlib
import resource
from nnue_infer import NetworkFormatError, load
from nnue_infer import constants as C
from nnue_infer.formats import stockfish as S
from tests.formats.test_bullet import _address_space_left


def _net(spec: str) -> nnue_infer.Network:
    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def lite() -> nnue_infer.Network:
    return _net("sf19-lite")


@pytest.fixture(scope="module")
def lite_bytes(lite) -> bytes:
    return known_network_path("sf19-lite").read_bytes()


# -- LEB128 ---------------------------------------------------------------------------------------

def _encode(values) -> bytes:
    v = np.asarray(values, np.int32)
    out = np.empty(L.leb128_size(v), np.uint8)
    assert L.encode_leb128(v, out) == len(out)
    return out.tobytes()


def test_leb128_known_encodings():
    """Shortest signed LEB128 (Wikipedia's examples and the sign-bit edges)."""
    assert _encode([0]) == b"\x00"
    assert _encode([-1]) == b"\x7f"
    assert _encode([63]) == b"\x3f"
    assert _encode([64]) == b"\xc0\x00"  # 0x40 would read as negative: one more byte
    assert _encode([-64]) == b"\x40"
    assert _encode([-65]) == b"\xbf\x7f"
    assert _encode([-123456]) == b"\xc0\xbb\x78"
    assert _encode([2**31 - 1]) == b"\xff\xff\xff\xff\x07"
    assert _encode([-2**31]) == b"\x80\x80\x80\x80\x78"


def test_leb128_round_trip_random():
    rng = np.random.default_rng(9)
    values = np.concatenate([rng.integers(-2**31, 2**31, 5000), rng.integers(-300, 300, 5000),
                             [-2**31, 2**31 - 1, 0, -1, 63, 64, -64, -65]]).astype(np.int32)
    payload = np.frombuffer(_encode(values), np.uint8).copy()  # writeable: the kernels' one signature
    out = np.empty(len(values), np.int32)
    assert L.decode_leb128(payload, out, -2**31, 2**31 - 1, 5) == (L.LEB128_OK, len(values), len(payload))
    assert (out == values).all()


@pytest.mark.parametrize("payload,count,status,index", [
    (b"\x80", 1, L.LEB128_TRUNCATED, 0),           # ends inside a value
    (b"\x01\x02", 3, L.LEB128_TRUNCATED, 2),       # fewer values than expected
    (b"\x80\x80\x80\x01", 1, L.LEB128_OVERLONG, 0),  # 4 bytes for an int16 (at most 3)
    (b"\xff\xff\x03", 1, L.LEB128_OVERLONG, 0),    # 65535 does not fit int16
    (b"\x01\x02\x03", 2, L.LEB128_TRAILING, 2),    # a byte left over
])
def test_leb128_errors(payload, count, status, index):
    out = np.empty(count, np.int32)
    got = L.decode_leb128(np.frombuffer(payload, np.uint8).copy(), out, -32768, 32767, 3)
    assert got[:2] == (status, index)


def _first_leb_block(data: bytes) -> tuple[int, int]:
    at = data.index(b"COMPRESSED_LEB128")
    return at, struct.unpack_from("<I", data, at + 17)[0]


def test_corrupted_leb128_blocks_give_clear_errors(lite_bytes):
    data = bytearray(lite_bytes)
    at, n = _first_leb_block(data)  # feature_transformer.biases at offset 100
    assert at == 100
    short = bytearray(data)
    struct.pack_into("<I", short, at + 17, n - 1)  # count one byte short: the last value is cut
    with pytest.raises(NetworkFormatError, match=r"feature_transformer\.biases \(LEB128 block at offset 100.*truncated"):
        parse_stockfish(np.frombuffer(bytes(short), np.uint8).copy(), "short.nnue")
    longer = bytearray(data[:at + 21 + n]) + b"\x00" + data[at + 21 + n:]
    struct.pack_into("<I", longer, at + 17, n + 1)  # one byte more than the values need
    with pytest.raises(NetworkFormatError, match=r"feature_transformer\.biases.*byte count mismatch.*1 left over"):
        parse_stockfish(np.frombuffer(bytes(longer), np.uint8).copy(), "long.nnue")
    over = bytearray(data)
    over[at + 21:at + 24] = b"\x80\x80\x80"  # the first value runs over 3 bytes
    with pytest.raises(NetworkFormatError, match=r"biases.*overlong value 0 at payload offset 0 \(file offset 121\)"):
        parse_stockfish(np.frombuffer(bytes(over), np.uint8).copy(), "over.nnue")
    cut = bytes(data[:at + 21 + n // 2])
    with pytest.raises(NetworkFormatError, match=r"truncated in feature_transformer\.biases \(LEB128 block at offset 100"):
        parse_stockfish(np.frombuffer(cut, np.uint8).copy(), "cut.nnue")


# -- format family ------------------------------------------------------------------------------

def test_lite_architecture_and_hashes(lite, lite_bytes):
    a = lite.architecture
    assert (a.feature_set, a.mirror, a.king_buckets, a.ft_width, a.ft_clamp, a.ft_shift) == ("Chess768", "e-h", None,
                                                                                            1024, 255, 9)
    assert [l.outputs for l in a.layers] == [32, 32, 1] and a.layer_inputs() == [1024, 64, 128]
    assert (a.skip_index, a.skip_subtract_index, a.skip_mode, a.value_division) == (30, 31, "output", "each")
    assert struct.unpack_from("<II", lite_bytes) == (0x6A448AFA, 0x0C1035AE)
    assert hashlib.sha256(lite_bytes).hexdigest() == known_by_spec("sf19-lite").sha256


def test_lite_round_trip_is_byte_identical(lite, lite_bytes, tmp_path):
    assert stockfish_bytes(lite) == lite_bytes
    nnue_infer.save(lite, tmp_path / "lite.safetensors")
    back = nnue_infer.load(tmp_path / "lite.safetensors")
    assert back.architecture == lite.architecture
    nnue_infer.save(back, tmp_path / "lite.nnue")
    assert (tmp_path / "lite.nnue").read_bytes() == lite_bytes


@pytest.mark.parametrize("spec", ["sf16", "sf17.1", "sf17.1-small", "sf17.1-lite"])
def test_round_trip_is_byte_identical(spec, tmp_path):
    """nnue -> native safetensors -> nnue reproduces the file (LEB128 re-encoded shortest-form)."""
    net = _net(spec)
    original = known_network_path(spec).read_bytes()
    nnue_infer.save(net, tmp_path / "net.safetensors")
    back = nnue_infer.load(tmp_path / "net.safetensors")
    assert stockfish_bytes(back) == original


def test_worked_examples_of_the_lite_spec(lite):
    """stockfish-19-lite-nnue.md section 8: start position 12, after 1.e4 -71, perft 3 71."""
    ev = nnue_infer.Evaluator(lite)
    board = chess.Board()
    assert ev.evaluate(board) == 12
    t = ev.trace(board)
    assert [tdiv16 for tdiv16 in t.positional] == [7676, 4524, -2061, 819, 2610, 152, 196, 195]
    board.push_uci("e2e4")
    assert ev.evaluate(board) == -71
    assert ev.evaluate("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1") == 71


def _rows(name):
    with open(shared_dir() / "data" / "sf19" / name) as f:
        return [json.loads(line) for line in f]


def test_lite_corpus_positions_and_extra(lite):
    """Every position of positions-dev-sf19-lite.jsonl and the lite half of extra-dev.jsonl: raw value."""
    rows = _rows("positions-dev-sf19-lite.jsonl") + [r for r in _rows("extra-dev.jsonl") if "61e7af4bb97d" in r["net"]]
    fens = [r["fen"] for r in rows]
    boards = [chess.Board(r["fen"], chess960=r["chess960"]) for r in rows]
    got = nnue_infer.evaluate_batch(boards, lite)
    checked = 0
    for r, v in zip(rows, got):
        if r["value"] is not None:
            assert v == r["value"], r["fen"]
            checked += 1
    assert checked == 3298 - 180 + 250 - 4 and len(fens) == 3548


def test_lite_corpus_games_incremental(lite):
    """Every ply of the 264 dev games: evaluate_game (incremental) equals the engine's value and a
    full refresh of every ply."""
    ev = nnue_infer.Evaluator(lite)
    plies = 0
    for g in _rows("games-dev-sf19-lite.jsonl"):
        board = chess.Board(g["start_fen"])
        values = ev.evaluate_game(board, g["moves"])
        fresh = nnue_infer.evaluate_batch(g["fens"], lite)
        assert (values == fresh).all(), g["id"]
        for k, want in enumerate(g["values"]):
            if want is not None:
                assert values[k] == want, (g["id"], k)
                plies += 1
    assert plies == 26597 - 2164


def test_lite_push_pop_incremental(lite):
    """The push/pop path (refresh cache across the d/e boundary) on one long game."""
    g = _rows("games-dev-sf19-lite.jsonl")[0]
    ev = nnue_infer.Evaluator(lite)
    ev.set_position(chess.Board(g["start_fen"]))
    for k, uci in enumerate(g["moves"]):
        ev.push(chess.Move.from_uci(uci))
        if g["values"][k + 1] is not None:
            assert ev.evaluate() == g["values"][k + 1]


def test_registry_is_consistent():
    for k in KNOWN_NETWORKS:
        assert k.name == f"nn-{k.sha256[:12]}.nnue" and len(k.sha256) == 64 and k.size > 0
        assert k.role in ("big", "small", "lite")


def test_missing_tarball_says_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path))
    with pytest.raises(NetworkNotFoundError, match=r"npm pack stockfish@17\.1\.0.*nnue-infer fetch sf17\.1-small"):
        known_network_path("sf17.1-small")
    with pytest.raises(NetworkNotFoundError, match="unknown network name"):
        known_network_path("sf99")


def test_extract_from_npm_tarball_lists_every_net(tmp_path):
    from nnue_infer.formats.extract import find_networks
    from nnue_infer.resources import npm_dir

    tgz = npm_dir() / "stockfish-19.0.0.tgz"
    if not tgz.is_file():
        pytest.skip(f"{tgz} missing; fetch it with: npm pack stockfish@19.0.0 --pack-destination {npm_dir()}")
    found = find_networks(tgz, member="package/bin/stockfish-19-lite.wasm")  # passive segments
    assert [(f.name, f.offset) for f in found] == [("nn-61e7af4bb97d.nnue", 40352)]


def test_gzip_raw_corpus_is_readable():
    """The raw engine output exists for the later text tests (first row, lite net)."""
    with gzip.open(shared_dir() / "data" / "sf19" / "positions-dev-sf19-lite-raw.jsonl.gz", "rt") as f:
        row = json.loads(f.readline())
    assert any(line.startswith("NNUE evaluation") for line in row["lines"])


def _nnue_text(lines: list[str]) -> str:
    """The NNUE part of an ``eval`` output: from the table (or the piece board) to the
    ``Final evaluation`` line."""
    first = next(i for i, l in enumerate(lines) if "NNUE derived piece values" in l or "NNUE network contributions" in l)
    last = next(i for i, l in enumerate(lines) if l.startswith("Final evaluation"))
    return "\n".join(lines[first:last + 1])


def test_lite_eval_text_is_byte_identical(lite):
    """Trace.format_stockfish() against the engine's printed lines, every 7th corpus position
    and every generated lite position (not in check)."""
    ev = nnue_infer.Evaluator(lite)
    rows = []
    for name in ("positions-dev-sf19-lite-raw.jsonl.gz", "extra-dev-raw.jsonl.gz"):
        with gzip.open(shared_dir() / "data" / "sf19" / name, "rt") as f:
            rows += [r for k, line in enumerate(f) if (r := json.loads(line))["net"] == "nn-61e7af4bb97d.nnue"
                     and ("extra" in name or k % 7 == 0)]
    checked = 0
    for r in rows:
        if any(l.startswith("Final evaluation: none") for l in r["lines"]):
            continue
        board = chess.Board(r["fen"], chess960=r["chess960"])
        assert ev.trace(board).format_stockfish() == _nnue_text(r["lines"]), r["fen"]
        checked += 1
    assert checked > 600


def test_cli_extract_lists_and_writes(tmp_path, capsys):
    from nnue_infer.cli import main
    from nnue_infer.resources import npm_dir

    tgz = npm_dir() / "stockfish-19.0.0.tgz"
    if not tgz.is_file():
        pytest.skip(f"{tgz} missing; fetch it with: npm pack stockfish@19.0.0 --pack-destination {npm_dir()}")
    lite = known_network_path("sf19-lite")
    assert main(["extract", "--list", str(lite)]) == 0
    out = capsys.readouterr().out
    assert "nn-61e7af4bb97d.nnue\t1166381 bytes" in out and "sf19-lite (Stockfish 19 lite)" in out
    assert main(["extract", str(lite), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "nn-61e7af4bb97d.nnue").read_bytes() == lite.read_bytes()


def test_extract_names_a_truncated_or_incomplete_wasm(tmp_path, capsys):
    """A split module with a part missing, or a cut-short module, is a NetworkFormatError
    naming the truncation (fresh-user finding: it was an IndexError traceback)."""
    import tarfile

    from nnue_infer.cli import main
    from nnue_infer.formats.extract import find_networks
    from nnue_infer.resources import npm_dir

    tgz = npm_dir() / "stockfish-17.1.0.tgz"
    if not tgz.is_file():
        pytest.skip(f"{tgz} missing; fetch it with: npm pack stockfish@17.1.0 --pack-destination {npm_dir()}")
    with tarfile.open(tgz) as tar:
        parts = sorted((m for m in tar.getmembers() if m.name.endswith(".wasm") and "-part-" in m.name
                        and "single" in m.name), key=lambda m: m.name)
        assert len(parts) > 2, [m.name for m in parts]
        for m in parts[:2]:  # part-0 and part-1 only
            (tmp_path / m.name.rsplit("/", 1)[1]).write_bytes(tar.extractfile(m).read())
    first = tmp_path / parts[0].name.rsplit("/", 1)[1]
    with pytest.raises(NetworkFormatError, match=r"truncated .*is a part missing\?"):
        find_networks(first)
    assert main(["extract", str(first), "-o", str(tmp_path / "nets")]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "truncated" in err and "Traceback" not in err
    cut = tmp_path / "cut.wasm"
    cut.write_bytes(first.read_bytes()[:5000])
    with pytest.raises(NetworkFormatError, match=r"cut\.wasm: .*truncated"):
        find_networks(cut)


# -- hostile input ---------------------------------------------------------------------------------------------------


def _leb128_block(payload: bytes) -> bytes:
    return S.LEB128_MAGIC + struct.pack("<I", len(payload)) + payload


def test_leb128_block_shorter_than_its_values_allocates_nothing(tmp_path):
    """Network files, huge declared sizes: a 33 KB ``.nnue`` whose hashes declare L1 = 32,768 (a valid
    header, valid biases, then a 10-byte LEB128 weights block) made the reader allocate the 1.4 GiB
    weights array before decoding found the block short (``MemoryError`` under a memory limit, gigabytes
    of address space without one).  A LEB128 value takes at least one byte, so a block of fewer bytes
    than values is refused from its byte count, naming the block, its offset and both numbers."""
    l1 = 1 << 15
    fth = C.HALFKAV2_HM_HASH ^ (2 * l1)
    head = struct.pack("<IIII", S.VERSION_SF12, fth ^ S.stack_hash(l1, C.SF_L2 + 1, C.SF_L3), 0, fth)
    data = head + _leb128_block(bytes(l1)) + _leb128_block(bytes(10)) + _leb128_block(bytes(10))
    path = tmp_path / "huge.nnue"
    path.write_bytes(data)
    weights_at = len(head) + len(S.LEB128_MAGIC) + 4 + l1
    with _address_space_left(1 << 30), pytest.raises(NetworkFormatError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}: truncated in feature_transformer.weights (LEB128 block at offset {weights_at}): its byte count "
        f"says 10 bytes, fewer than its {22528 * l1} values (at least one byte each)")


def test_truncated_at_the_magic_of_the_second_leb128_block(tmp_path):
    """Network files, truncation at every header field: Stockfish 17.1's small net (LEB128 arrays) cut
    anywhere in the first 17 bytes of the weights block (its ``COMPRESSED_LEB128`` magic) was reported
    as "feature transformer mixes raw and LEB128 arrays" with no offset, as if the file were built
    wrongly; now it is a truncation naming the block and its offset, as every other cut is."""
    from nnue_infer.resources import known_network_path

    full = known_network_path("sf17.1-small").read_bytes()
    biases_at = 12 + struct.unpack("<I", full[8:12])[0] + 4
    assert full[biases_at:biases_at + len(S.LEB128_MAGIC)] == S.LEB128_MAGIC
    weights_at = biases_at + len(S.LEB128_MAGIC) + 4 + struct.unpack("<I", full[biases_at + 17:biases_at + 21])[0]
    assert full[weights_at:weights_at + len(S.LEB128_MAGIC)] == S.LEB128_MAGIC
    path = tmp_path / "cut.nnue"
    for cut in range(weights_at, weights_at + len(S.LEB128_MAGIC)):
        path.write_bytes(full[:cut])
        with pytest.raises(NetworkFormatError) as info:
            load(path)
        assert str(info.value) == (f"{path}: truncated at feature_transformer.weights, offset {weights_at}: the data "
                                   f"ends there ({cut} bytes)")


@pytest.mark.parametrize("spec", ["sf17.1-small", "sf19-lite"])
def test_the_other_versions_header_word_is_named(tmp_path, spec):
    """Network files, wrong version words: a Stockfish 12-18 net with Stockfish 19's version word (or the
    other way round) was read with the other version's layer stack, whose hash happens to match a
    stack of another size (15.1's L2 + 1 = 16 outputs is Stockfish 19's L2 = 16), and the error blamed
    ``layer_stack[1].hash`` at some offset deep in the file.  Now the reader sees that the other
    version's stacks fit the file and its hashes and names the version word at offset 0."""
    from nnue_infer.resources import known_network_path

    data = bytearray(known_network_path(spec).read_bytes())
    version = struct.unpack("<I", data[:4])[0]
    other = S.VERSION_SF19 if version == S.VERSION_SF12 else S.VERSION_SF12
    data[:4] = struct.pack("<I", other)
    path = tmp_path / "swapped.nnue"
    path.write_bytes(bytes(data))
    names = {S.VERSION_SF12: "Stockfish 12-18", S.VERSION_SF19: "Stockfish 19"}
    with pytest.raises(NetworkFormatError) as info:
        load(path)
    assert str(info.value).startswith(
        f"{path}: header.version at offset 0: 0x{other:08X} ({names[other]}), but the file's layer stacks and hashes "
        f"are {names[version]}'s (")
    assert str(info.value).endswith(f"): expected 0x{version:08X}")


@pytest.mark.parametrize("version", ["17", "20", 19, 16.0])
def test_format_stockfish_names_an_unknown_version(version):
    """Trace output: ``Trace.format_stockfish(version=...)`` with a version it does not render (``"17"`` for
    17.1, ``"20"``, the number ``19``) raised a bare ``KeyError: '17'`` from deep inside the formatting.
    Now a ``ValueError`` names the argument and the versions it renders."""
    import chess

    from nnue_infer import Evaluator

    trace = Evaluator().trace(chess.Board())
    with pytest.raises(ValueError) as info:
        trace.format_stockfish(version)
    assert str(info.value) == (f"version: {version!r} is not a Stockfish version this renders; "
                               "give one of '15.1', '16', '17.1', '18', '19' (or None for the network's own)")


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
