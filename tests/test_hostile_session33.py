"""Hostile pass over network files, the Python API and thread safety (session 33).

Each test is a way a careless or malicious user broke a loader or an evaluator: the standard is an
error naming the file, the field and its byte offset (or the argument), never a crash, a hang, an
allocation of gigabytes or a silently wrong number, and a failed operation changes nothing.
"""

from __future__ import annotations

import contextlib
import resource
import struct

import numpy as np
import pytest

from nnue_infer import NetworkFormatError, load
from nnue_infer import constants as C
from nnue_infer.formats import stockfish as S


@contextlib.contextmanager
def _address_space_left(extra: int):
    """Limit the process's address space to what it maps now plus ``extra`` bytes (Linux: VmSize of
    /proc/self/status), so an allocation of gigabytes fails at once with ``MemoryError``."""
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _leb128_block(payload: bytes) -> bytes:
    return S.LEB128_MAGIC + struct.pack("<I", len(payload)) + payload


def test_item1_leb128_block_shorter_than_its_values_allocates_nothing(tmp_path):
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


def test_item1_truncated_at_the_magic_of_the_second_leb128_block(tmp_path):
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


def _bullet_architecture():
    from nnue_infer import Architecture, HiddenLayer

    return Architecture(feature_set="Chess768", ft_width=32, ft_activation="screlu", ft_clamp=255, ft_shift=8,
                        psqt_buckets=0, output_buckets=1, layers=(HiddenLayer(1, "none"),))


@pytest.mark.parametrize("reader", ["bullet", "npz"])
def test_item1_bullet_and_npz_readers_refuse_what_is_not_a_regular_file(tmp_path, reader):
    """Network files, never a hang: ``read_bullet`` and ``float_network_from_arrays`` (the documented ways
    trained weights come in) opened whatever they were given: a named pipe blocked for ever in ``open``
    and ``/dev/zero`` was read until memory ran out (``MemoryError``), where ``load`` refuses both.  Now
    both readers say the path is not a regular file, as ``load`` does, before opening it."""
    import os
    import threading

    from nnue_infer.formats.arrays import float_network_from_arrays
    from nnue_infer.formats.bullet import read_bullet

    read = (lambda p: read_bullet(p, _bullet_architecture())) if reader == "bullet" else \
        (lambda p: float_network_from_arrays(_bullet_architecture(), p))
    fifo = tmp_path / "net.bin"
    os.mkfifo(fifo)
    outcome = []

    def run():
        try:
            read(fifo)
        except Exception as exc:  # noqa: BLE001 - the outcome is checked below
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # blocked in open(): give it a writer that closes at once, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"{reader}: reading a named pipe blocked")
    assert isinstance(outcome[0], NetworkFormatError) and str(outcome[0]) == (
        f"{fifo}: not a regular file (a directory, device or FIFO); "
        + ("bullet's quantised output is a file" if reader == "bullet" else "an .npz archive is a file"))
    with _address_space_left(1 << 30), pytest.raises(NetworkFormatError, match="^/dev/zero: not a regular file"):
        read("/dev/zero")


def _interleaved(function, call, action):
    """Run ``call()`` once per bytecode of ``function``'s frame (the method ``call`` calls), running
    ``action()`` (standing for another thread's call on the same evaluator) just before that bytecode;
    returns ``call()``'s results (or the exceptions it raised), one per bytecode, and the exceptions
    ``action`` raised."""
    import inspect
    import sys

    code = inspect.unwrap(function).__code__  # the method's own frame, inside any wrapper taking the token
    results, refused = [], []
    k = 0
    while True:
        count = [0]
        done = [False]

        def local(frame, event, arg, target=k):
            if event == "opcode":
                if count[0] == target and not done[0]:
                    done[0] = True
                    try:
                        action()
                    except Exception as exc:  # noqa: BLE001 - ConcurrentUseError is the promised outcome
                        refused.append(exc)
                count[0] += 1
            return local

        def tracer(frame, event, arg):
            if frame.f_code is code:
                frame.f_trace_opcodes = True
                return local
            return None

        sys.settrace(tracer)
        try:
            results.append(call())
        except Exception as exc:  # noqa: BLE001 - compared by the caller
            results.append(exc)
        finally:
            sys.settrace(None)
        if not done[0]:
            return results[:-1], refused
        k += 1


def test_item3_activations_batch_while_the_network_is_reassigned():
    """Thread safety: ``activations_batch`` (not guarded by the in-use token, like ``evaluate_batch``) read
    the network's arrays and then, separately, the network whose architecture sizes its output buffers;
    another thread assigning ``Evaluator.network`` between the two reads handed the kernel a 32-wide
    network's arrays with 64-wide buffers (uninitialised columns in the result; the other way round the
    kernel writes past its buffers).  Now one read gives both: with a reassignment at any bytecode the
    result is wholly one network's (shapes and values)."""
    import chess

    from nnue_infer import Evaluator, FloatNetwork, quantise, stockfish_15_1_architecture

    narrow = quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1))
    wide = quantise(FloatNetwork.random(stockfish_15_1_architecture(64), seed=2))
    boards = [chess.Board(), chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")]
    expected = {net.architecture.ft_width: Evaluator(net).activations_batch(boards).to_dict() for net in (narrow, wide)}
    ev = Evaluator(narrow)

    def reassign():
        ev.network = wide

    def run():
        ev.network = narrow
        return ev.activations_batch(boards).to_dict()

    results, refused = _interleaved(Evaluator.activations_batch, run, reassign)
    assert len(results) > 100 and not refused
    for i, got in enumerate(results):
        ref = expected[got["accumulator"].shape[-1]]
        assert got.keys() == ref.keys() and all(np.array_equal(got[k], ref[k]) for k in ref), f"bytecode {i}"


@pytest.mark.parametrize("method", ["evaluate_cp", "evaluate_moves_cp"])
def test_item3_centipawns_while_another_thread_pushes_or_reassigns(method):
    """Thread safety: ``evaluate_cp`` and ``evaluate_moves_cp`` released the in-use token after the value
    and then read the side to move and the network's units per pawn; another thread's ``push`` or
    ``network`` assignment in that gap was not refused with ``ConcurrentUseError`` (as the docs promise for
    a call made while another is inside one) and the result mixed them: the value of one position with
    the side to move of the next (White's view with the wrong sign), or one network's value in another's
    units.  Now the token is held for the whole call: at any bytecode the other call is refused or comes
    first, and the result is that of one position and one network."""
    import dataclasses

    import chess

    from nnue_infer import ConcurrentUseError, Evaluator, FloatNetwork, quantise, stockfish_15_1_architecture

    arch = stockfish_15_1_architecture(32)
    first = quantise(FloatNetwork.random(arch, seed=1))
    second = quantise(FloatNetwork.random(dataclasses.replace(arch, units_per_pawn=100), seed=1))
    start = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    after = start.copy()
    after.push_san("Bb5")

    def value(net, board):
        ev = Evaluator(net)
        out = getattr(ev, method)(board, white_pov=True)
        return out.tolist() if method == "evaluate_moves_cp" else out

    allowed = {repr(value(net, b)) for net in (first, second) for b in (start, after)}
    assert len(allowed) == 4
    ev = Evaluator(first)
    for action in (lambda: ev.push(after.move_stack[-1]), lambda: setattr(ev, "network", second)):
        def run():
            ev.network = first
            ev.set_position(start)
            out = getattr(ev, method)(white_pov=True)
            return out.tolist() if method == "evaluate_moves_cp" else out

        results, refused = _interleaved(getattr(Evaluator, method), run, action)
        assert len(results) > 20 and all(isinstance(exc, ConcurrentUseError) for exc in refused), refused[:3]
        for i, got in enumerate(results):
            assert repr(got) in allowed, f"bytecode {i}: {got!r}"


def test_item1_a_damaged_cached_network_is_named_as_such(tmp_path, monkeypatch):
    """Registry: a cached known network cut short or replaced (a disk full during a copy, another file
    under its name) with no npm package in the cache was reported as "nn-61e7af4bb97d.nnue ... is not in
    <cache>", though the file is there: the user looks for a missing file.  Now the message says the
    cached file is damaged or replaced (its size and SHA-256 against the expected ones) and how to
    fetch it again; nothing is deleted."""
    from nnue_infer import NetworkNotFoundError
    from nnue_infer.formats.registry import known_by_spec
    from nnue_infer.resources import known_network_path

    known = known_by_spec("sf19-lite")
    good = known_network_path("sf19-lite").read_bytes()
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path))
    damaged = tmp_path / known.name
    damaged.write_bytes(good[:1000])
    with pytest.raises(NetworkNotFoundError) as info:
        known_network_path("sf19-lite")
    message = str(info.value)
    assert message.startswith(f"{damaged}: damaged or replaced (1000 bytes, SHA-256 ")
    assert f"expected {known.size} bytes, SHA-256 {known.sha256[:16]}" in message
    assert "nnue-infer fetch sf19-lite" in message and "is not in" not in message
    assert damaged.read_bytes() == good[:1000]


def test_item1_a_directory_named_like_a_network_does_not_shadow_the_name(tmp_path, monkeypatch):
    """Registry: a known network's name is a name "only when no file has it", but a *directory* of that
    name in the working directory (a folder ``sf19-lite/`` of one's own data) shadowed it:
    ``Evaluator("sf19-lite")`` and ``eval --net sf19-lite`` failed with "sf19-lite: not a regular file".
    Now only a regular file takes the name over; the directory is ignored and the known network loads."""
    from nnue_infer import Evaluator
    from nnue_infer.resources import known_network, network_from_spec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sf19-lite").mkdir()
    assert network_from_spec("sf19-lite") is known_network("sf19-lite")
    assert Evaluator("sf19-lite").network is known_network("sf19-lite")
    from nnue_infer.resources import is_network_name  # the rule, also for nnue-infer info

    assert is_network_name("sf19-lite") and not is_network_name(str(tmp_path / "sf19-lite"))  # a path is a path
    (tmp_path / "sf16").write_bytes(b"not a network")
    assert not is_network_name("sf16")  # a regular file of that name is the file (it is loaded, and refused here)
    with pytest.raises(NetworkFormatError, match="^sf16: unknown network format"):
        network_from_spec("sf16")


def test_item2_evaluate_moves_names_the_illegal_move_of_an_iterator():
    """Children evaluation: ``moves=`` is documented as an iterable, but an illegal move given through
    an iterator or generator raised ``IndexError: list index out of range`` (the error message re-read
    the already consumed iterator to quote the move) from ``evaluate_moves``, ``evaluate_moves_cp``
    and the module-level ``evaluate_moves``.  Now it is the ``IllegalMoveError`` a list gives, naming
    the index and the move, and the evaluator is unchanged."""
    import chess

    import nnue_infer
    from nnue_infer import Evaluator, IllegalMoveError

    board = chess.Board()
    ev = Evaluator()
    ev.push_uci("g1f3")
    message = f"moves[1] ('e1g1') is not a legal move in {chess.STARTING_FEN}"
    for call in (lambda m: ev.evaluate_moves(board, m), lambda m: ev.evaluate_moves_cp(board, m),
                 lambda m: nnue_infer.evaluate_moves(board, m)):
        for moves in (iter(["e2e4", "e1g1"]), (m for m in ["e2e4", "e1g1"]), map(str, ["e2e4", "e1g1"])):
            with pytest.raises(IllegalMoveError) as info:
                call(moves)
            assert str(info.value) == message
    assert ev.board.fen() == "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1"
    assert ev.evaluate() == ev.evaluate(ev.board)
    assert ev.evaluate_moves(board, iter(["e2e4", "d2d4"])).tolist() == ev.evaluate_moves(board, ["e2e4", "d2d4"]).tolist()


@pytest.mark.parametrize("spec", ["sf17.1-small", "sf19-lite"])
def test_item1_the_other_versions_header_word_is_named(tmp_path, spec):
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


def test_item2_module_functions_see_a_network_file_replaced_with_its_old_stamp(tmp_path, monkeypatch):
    """Python API, module-level ``evaluate(board, "ck.nnue")``: the per-thread network cache knew a file by
    its name, size and modification time, so a checkpoint of the same architecture saved over it (same
    size) whose modification time was kept (``cp -p``, ``rsync -t``, ``tar x``, a file system with a
    coarse clock) was evaluated with the old network, a silently wrong number; a relative name
    in another working directory likewise.  The key now has the file's device, inode and
    status-change time, which no copy keeps."""
    import os

    import chess

    import nnue_infer
    from nnue_infer import Evaluator, FloatNetwork, quantise, save, stockfish_15_1_architecture

    nets = [quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=s)) for s in (1, 2)]
    board = chess.Board()
    truth = [Evaluator(n).evaluate(board) for n in nets]
    assert truth[0] != truth[1]
    path = tmp_path / "ck.nnue"
    save(nets[0], path)
    stamp = os.stat(path)
    assert nnue_infer.evaluate(board, str(path)) == truth[0]
    save(nets[1], path)  # same architecture: same size
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert os.stat(path).st_size == stamp.st_size
    assert nnue_infer.evaluate(board, str(path)) == truth[1]
    (tmp_path / "other").mkdir()
    save(nets[0], tmp_path / "other" / "ck.nnue")
    os.utime(tmp_path / "other" / "ck.nnue", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    monkeypatch.chdir(tmp_path)
    assert nnue_infer.evaluate(board, "ck.nnue") == truth[1]
    monkeypatch.chdir(tmp_path / "other")
    assert nnue_infer.evaluate(board, "ck.nnue") == truth[0]


@pytest.mark.parametrize("version", ["17", "20", 19, 16.0])
def test_item2_format_stockfish_names_an_unknown_version(version):
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


#: 29 pieces, one king each, nothing on a back rank a pawn could not stand on: a position the network
#: represents, with 271 legal moves for White (found by hill climbing on python-chess's move count).
MANY_MOVES = "BQQQQQBk/Q5RB/Q6Q/Q6Q/Q6Q/Q6Q/Q6Q/KQQQQQQQ w - - 0 1"


def test_item2_children_of_a_position_with_more_than_256_moves():
    """Children evaluation of positions with many moves: the move generator's buffers held 256 moves
    ("most legal moves of any chess position, 218, rounded up"), but the evaluator accepts any
    position with one king a side and at most 32 pieces, and one with 271 legal moves made
    ``evaluate_moves`` return 256 values (15 moves silently missing) and ``evaluate_children_batch``
    write past its buffers (glibc: "free(): invalid next size", the process aborted).  The buffers now
    hold any such position's moves (at most 30 pieces x 27 + 10 for the king = 820, rounded up to
    1,024); every child equals push / evaluate / pop, in ``board.legal_moves`` order."""
    import json
    import subprocess
    import sys

    import chess

    from nnue_infer import Evaluator

    board = chess.Board(MANY_MOVES)
    legal = list(board.legal_moves)
    assert len(legal) == 271
    ev = Evaluator()
    expected = []
    for move in legal:
        child = board.copy(stack=False)
        child.push(move)
        expected.append(ev.evaluate(child))
    assert ev.evaluate_moves(board).tolist() == expected
    script = (
        "import json, chess, nnue_infer\n"
        f"offsets, moves, values = nnue_infer.Evaluator().evaluate_children_batch([{MANY_MOVES!r}, chess.Board()], "
        "uci=True)\n"
        "print(json.dumps([offsets.tolist(), moves, values.tolist()]))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]  # before: aborted by glibc (heap overwritten)
    offsets, moves, values = json.loads(run.stdout)
    start = list(chess.Board().legal_moves)
    assert offsets == [0, 271, 291]
    assert moves == [m.uci() for m in legal + start]
    assert values[:271] == expected and values[271:] == ev.evaluate_moves(chess.Board()).tolist()


def test_item2_all_buckets_of_a_single_bucket_network_keep_the_bucket_axis():
    """Activations output: ``activations_batch(..., buckets="all")`` is documented to give every layer's array
    a bucket axis after ``N``, but for a network with one output bucket (bullet-style nets) the axis was
    squeezed away, so code written for ``[N, B, ...]`` broke on those nets (``fc_0`` [N, 16] instead of
    [N, 1, 16]).  Now the axis is there for any number of buckets, and its one entry is the used stack's."""
    import warnings

    import chess

    from nnue_infer import Architecture, Evaluator, FloatNetwork, HiddenLayer, quantise

    arch = Architecture(feature_set="Chess768", ft_width=64, ft_activation="screlu", ft_clamp=255, ft_shift=8,
                        psqt_buckets=0, output_buckets=1, layers=(HiddenLayer(16, "crelu"), HiddenLayer(1, "none")),
                        output_units=400, units_per_pawn=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saturated parameters of a random network
        ev = Evaluator(quantise(FloatNetwork.random(arch, seed=1)))
    boards = [chess.Board(), chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")]
    used, every = ev.activations_batch(boards).to_dict(), ev.activations_batch(boards, buckets="all").to_dict()
    for name in ("fc_0", "fc_0_activated", "output", "positional"):
        assert every[name].shape == (2, 1, *used[name].shape[1:]), name
        assert np.array_equal(every[name][:, 0], used[name]), name
    for name in ("accumulator", "psqt", "ft_output", "bucket", "value"):
        assert np.array_equal(every[name], used[name]), name


def test_item2_activations_of_a_network_without_psqt_convert_to_arrow(tmp_path):
    """Activations output: ``Activations.to_arrow()`` (and so ``nnue-infer eval --activations -o x.parquet``)
    failed with a pyarrow traceback ("list_size needs to be a strict positive integer") for any network
    without PSQT (``psqt_buckets=0``: bullet-style nets), whose ``psqt`` array is [N, 2, 0].  Now such an
    axis becomes variable-size lists (empty ones): every column is there, one row per position."""
    pytest.importorskip("pyarrow", reason="needs the parquet extra: pip install -e '.[parquet]'")
    import warnings

    import chess

    from nnue_infer import Architecture, Evaluator, FloatNetwork, HiddenLayer, quantise, save
    from nnue_infer.cli import main

    arch = Architecture(feature_set="Chess768", ft_width=64, ft_activation="screlu", ft_clamp=255, ft_shift=8,
                        psqt_buckets=0, output_buckets=8, layers=(HiddenLayer(16, "crelu"), HiddenLayer(1, "none")),
                        output_units=400, units_per_pawn=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saturated parameters of a random network
        net = quantise(FloatNetwork.random(arch, seed=1))
    boards = [chess.Board(), chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")]
    for buckets in ("used", "all"):
        acts = Evaluator(net).activations_batch(boards, buckets=buckets)
        table = acts.to_arrow()
        assert table.column_names == acts.names and table.num_rows == 2
        for name, arr in acts.to_dict().items():
            assert np.array_equal(np.array(table.column(name).to_pylist(), dtype=arr.dtype).reshape(arr.shape), arr)
        assert table.column("psqt").to_pylist() == [[[], []], [[], []]]
    save(net, tmp_path / "nopsqt.safetensors")
    out = tmp_path / "acts.parquet"
    assert main(["eval", "--quiet", "--net", str(tmp_path / "nopsqt.safetensors"), "--activations", "-o", str(out),
                 "startpos"]) in (0, None)
    import pyarrow.parquet as pq

    assert pq.read_table(out).column("psqt").to_pylist() == [[[], []]]


@pytest.mark.parametrize("where", ["header", "metadata"])
def test_item1_safetensors_json_nested_too_deeply(tmp_path, where):
    """Network files, safetensors with a lying header: a JSON header (or the ``nnue-infer`` metadata
    string) of 200,000 nested arrays made ``load``, ``Evaluator(path)`` and the command line die with
    Python's ``RecursionError`` traceback instead of a format error.  Now it is a
    ``NetworkFormatError`` naming the file and the part that is not readable JSON."""
    import json

    deep = '{"a": ' + "[" * 200_000 + "]" * 200_000 + "}"
    raw = deep.encode() if where == "header" else json.dumps({"__metadata__": {"nnue-infer": deep}}).encode()
    path = tmp_path / "deep.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(NetworkFormatError) as info:
        load(path)
    expected = (f"{path}: safetensors header at offset 8 is not JSON: nested too deeply" if where == "header"
                else f"{path}: metadata 'nnue-infer' is not JSON: nested too deeply")
    assert str(info.value) == expected


def test_item3_board_read_while_another_thread_pushes():
    """Thread safety: ``Evaluator.board`` copied the evaluator's board without the in-use token, so a thread
    reading it while another was inside ``push`` (python-chess's ``Board.push`` appends the move to the stack
    before it moves the pieces) got a board that is no position of the game: the move on its stack, the
    pieces before it (popping it then "undid" a move that was never made).  Now reading ``board`` during
    another call raises ``ConcurrentUseError`` like every other call; read alone it is the position."""
    import chess

    from nnue_infer import ConcurrentUseError, Evaluator

    ev = Evaluator()
    start = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    move = chess.Move.from_uci("f1c4")
    after = start.copy()
    after.push(move)
    seen = []

    def read():
        board = ev.board
        seen.append((board.fen(), tuple(m.uci() for m in board.move_stack)))

    def run():
        ev.set_position(start.copy(stack=False))
        ev.push(move)

    results, refused = _interleaved(chess.Board.push, run, read)
    assert len(results) > 20 and all(isinstance(exc, ConcurrentUseError) for exc in refused)
    assert set(seen) <= {(start.fen(), ()), (after.fen(), ("f1c4",))}, seen
    assert ev.board.fen() == after.fen() and ev.board.move_stack == [move]
