"""``Evaluator.activations`` / ``activations_batch`` against a plain NumPy recomputation from each
network's arrays (file layout, int64 arithmetic, wraps where Stockfish's int16/int32 lanes
wrap), and against nnue-interface 0.2.7 (Stockfish 17.1's own code, PyPI) on its big net.

The oracle takes feature indices from the package's feature sets (their index math is checked
against Stockfish elsewhere: ``test_threat_inputs.py``, ``test_sf19.py``, ``test_corpus.py``) and
nothing else from it: accumulators, activations, every layer, the skip and the value are
recomputed here from ``Network.ft_weights``, ``int8_weights``, ``layer_weights`` and
``layer_biases``.
"""

from __future__ import annotations

import os
from pathlib import Path

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer.errors import NetworkNotFoundError
from nnue_infer.features import architecture_features, full_threats, full_threats_18, pawn_pairs
from nnue_infer.resources import known_network

from node_engines import generated_positions, threat_positions
from nnue_infer.cli import main
from nnue_infer.static_evaluation import uses_small_net
from tests.core.test_evaluator import _interleaved

SPECS = ["default", "sf15.1", "sf16", "sf17.1", "sf17.1-small", "sf17.1-lite", "sf18", "sf19", "sf19-lite"]


def _net(spec: str) -> nnue_infer.Network:
    if spec == "default":
        return nnue_infer.default_network()
    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:
        pytest.skip(str(exc))


def wrap(x, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to ``bits`` bits (still int64)."""
    half = 1 << (bits - 1)
    return ((np.asarray(x, np.int64) + half) & ((1 << bits) - 1)) - half


def tdiv(a: int, b: int) -> int:
    q = abs(int(a)) // abs(int(b))
    return q if (a < 0) == (b < 0) else -q


def int8_rows(arch, board: chess.Board) -> tuple[list[int], list[int]]:
    """Rows of ``int8_weights`` active for White's and Black's perspective (threats, then pairs)."""
    rows: tuple[list[int], list[int]] = ([], [])
    offset = 0
    for name in arch.int8_feature_sets:
        module = {full_threats.NAME: full_threats, full_threats_18.NAME: full_threats_18, pawn_pairs.NAME: pawn_pairs}[name]
        for p, found in enumerate(module.active(board)):
            rows[p].extend(offset + f for f in found)
        offset += module.NUM_FEATURES
    return rows


def ft_activation(arch, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The integer feature-transformer activation of one perspective (halves a, b for paired ones)."""
    qa, s = arch.ft_clamp, arch.ft_shift
    if arch.ft_activation == "pairwise":
        return (np.clip(a, 0, qa) * np.clip(b, 0, qa)) >> s
    if arch.ft_activation == "crelu":
        return np.clip(np.concatenate([a, b]), 0, qa) >> s
    if arch.ft_activation == "screlu":
        return np.clip(np.concatenate([a, b]), 0, qa) ** 2 >> s
    if arch.ft_activation == "glu":
        return (np.clip(a, 0, qa) * np.clip(b, -qa, qa)) >> s
    if arch.ft_activation == "bilinear":
        return (np.clip(a, -qa, qa) * np.clip(b, -qa, qa)) >> s
    raise NotImplementedError(arch.ft_activation)


def recompute(net: nnue_infer.Network, board: chess.Board) -> dict:
    """Every array of ``Activations`` for one position, all buckets (bucket axis first)."""
    arch = net.architecture
    features = architecture_features(arch).active(board)
    extra = int8_rows(arch, board)
    acc, psqt = [], []
    for p in range(2):
        a = net.ft_biases.astype(np.int64) + net.ft_weights[features[p]].astype(np.int64).sum(axis=0)
        q = net.psqt_weights[features[p]].astype(np.int64).sum(axis=0)
        if extra[p]:
            a = a + net.int8_weights[extra[p]].astype(np.int64).sum(axis=0)
            q = q + net.int8_psqt_weights[extra[p]].astype(np.int64).sum(axis=0)
        acc.append(wrap(a, 16))
        psqt.append(wrap(q, 32))
    stm = 0 if board.turn == chess.WHITE else 1
    half = arch.ft_width // 2
    ft = np.concatenate([ft_activation(arch, acc[r][:half], acc[r][half:]) for r in (stm, 1 - stm)])
    pieces = chess.popcount(board.occupied)
    used = (pieces - 1) // (32 // arch.output_buckets)
    out = {"accumulator": np.array(acc), "psqt": np.array(psqt), "ft_output": ft, "bucket": used, "layers": []}
    positional = []
    for k in range(arch.output_buckets):
        blocks = [np.pad(ft, (0, net.layer_weights[0].shape[2] - ft.size))]
        record = []
        skip = 0
        for l, layer in enumerate(arch.layers):
            W = net.layer_weights[l][k].astype(np.int64)
            B = net.layer_biases[l][k].astype(np.int64)
            x = np.concatenate(blocks[1:]) if layer.concat_inputs else blocks[-1]
            z = wrap(B + W @ np.pad(x, (0, W.shape[1] - x.size)), 32)
            if l == 0 and arch.skip_index >= 0:
                skip = int(z[arch.skip_index]) - (int(z[arch.skip_subtract_index]) if arch.skip_subtract_index >= 0 else 0)
            if layer.activation == "none":
                record.append((z[0], None))
                o = int(z[0])
                break
            shift = arch.layer_shift(l)
            n = layer.n_activated
            sqr = np.minimum(z[:n] * z[:n] >> (2 * shift + 7), 127)
            clipped = np.clip(z[:n] >> shift, 0, 127)
            act = {"crelu": clipped, "sqr_crelu": sqr, "sqr_crelu+crelu": np.concatenate([sqr, clipped])}[layer.activation]
            record.append((z, act))
            blocks.append(np.pad(act, (0, -act.size % 32)))
        if arch.skip_index < 0:
            pos = wrap(o, 32)
        elif arch.skip_mode == "output":
            pos = wrap(tdiv((o + skip) * arch.skip_numerator, arch.skip_denominator), 32)
        else:
            pos = wrap(o + tdiv(wrap(skip * arch.skip_numerator, 32), arch.skip_denominator), 32)
        out["layers"].append(record)
        positional.append(int(pos))
    out["positional"] = positional
    p = tdiv(wrap(int(psqt[stm][used]) - int(psqt[1 - stm][used]), 32), 2) if arch.psqt_buckets else 0
    scale = arch.output_scale
    out["value"] = (tdiv(p, scale) + tdiv(positional[used], scale) if arch.value_division == "each"
                    else tdiv(wrap(p + positional[used], 32), scale))
    return out


def check_against(acts, ref: dict, i: int, k: int | None) -> None:
    """Row ``i`` of ``acts`` (bucket axis index ``k`` for buckets="all", None for "used") equals ``ref``."""
    b = ref["bucket"] if k is None else k
    assert acts.bucket[i] == ref["bucket"]
    np.testing.assert_array_equal(acts.accumulator[i], ref["accumulator"])
    np.testing.assert_array_equal(acts.psqt[i], ref["psqt"])
    np.testing.assert_array_equal(acts.ft_output[i].astype(np.int64), ref["ft_output"])
    sel = (lambda a: a[i]) if k is None else (lambda a: a[i, k])
    for l, (z, act) in enumerate(ref["layers"][b]):
        if act is None:
            assert int(sel(acts.output)) == int(z)
        else:
            np.testing.assert_array_equal(sel(getattr(acts, f"fc_{l}")), z)
            np.testing.assert_array_equal(sel(getattr(acts, f"fc_{l}_activated")), act)
    assert int(sel(acts.positional)) == ref["positional"][b]
    assert int(acts.value[i]) == ref["value"]


def positions(n: int) -> list[chess.Board]:
    boards = [chess.Board(fen, chess960=c960) for fen, c960 in generated_positions(n, seed=2121)]
    boards += [chess.Board(fen) for fen, _ in threat_positions(n // 2, seed=2122)]
    return boards


@pytest.mark.parametrize("spec", SPECS)
def test_activations_equal_numpy_recomputation(spec):
    net = _net(spec)
    ev = nnue_infer.Evaluator(net)
    boards = positions(12)
    acts = ev.activations_batch(boards)
    every = ev.activations_batch([b.fen() for b in boards], buckets="all")
    np.testing.assert_array_equal(acts.value, ev.evaluate_batch(boards))
    np.testing.assert_array_equal(every.value, acts.value)
    for i, board in enumerate(boards):
        ref = recompute(net, board)
        check_against(acts, ref, i, None)
        for k in range(net.architecture.output_buckets):
            check_against(every, ref, i, k)
    one = ev.activations(boards[0])
    assert not one.batched and one.accumulator.shape == (2, net.architecture.ft_width)
    for name in acts.names:
        np.testing.assert_array_equal(one.to_dict()[name], acts.to_dict()[name][0])


@pytest.mark.parametrize("activation", ["glu", "bilinear", "crelu"])
def test_signed_and_element_wise_activations(activation):
    """``ft_output`` is int8 for the signed gates (the kernels store x + 128), and 2 L1 wide for
    crelu; every array equals the recomputation (random quantised networks)."""
    import warnings

    from nnue_infer import Architecture, FloatNetwork, HiddenLayer, quantise
    from nnue_infer.quantisation import SCHEMES

    arch = Architecture(feature_set="Chess768", ft_width=64, ft_activation=activation, ft_clamp=255,
                        ft_shift=1 if activation == "crelu" else 9, psqt_buckets=0, output_buckets=8,
                        layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"),
                                HiddenLayer(1, "none")), skip_index=15, skip_numerator=9600, skip_denominator=8128,
                        output_units=400, units_per_pawn=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = quantise(FloatNetwork.random(arch, seed=3), SCHEMES["qa255-qb64"])
    boards = positions(8)
    acts = nnue_infer.Evaluator(net).activations_batch(boards)
    assert acts.ft_output.dtype == (np.uint8 if activation == "crelu" else np.int8)
    assert acts.ft_output.shape == (len(boards), 128 if activation == "crelu" else 64)
    assert activation == "crelu" or acts.ft_output.min() < 0
    for i, board in enumerate(boards):
        check_against(acts, recompute(net, board), i, None)


def _interface():
    """nnue_interface with its nets placed from the project's cache (it would download them
    otherwise); skips when the wheel or the nets are missing."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("nnue_interface") is None:
        pytest.skip("nnue-interface is not installed (pip install nnue-interface==0.2.7; x86-64 Linux, CPython 3.11)")
    target = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stockfish_nnue"
    target.mkdir(parents=True, exist_ok=True)
    from nnue_infer.resources import known_network_path

    for spec in ("sf17.1", "sf17.1-small"):
        try:
            source = known_network_path(spec)
        except NetworkNotFoundError as exc:
            pytest.skip(str(exc))
        if not (target / source.name).is_file():  # copied whole: another worker process may read it at once
            shutil.copyfile(source, target / f"{source.name}.{os.getpid()}")
            os.replace(target / f"{source.name}.{os.getpid()}", target / source.name)
    import nnue_interface

    return nnue_interface


def stockfish_memory_order(acc: np.ndarray) -> np.ndarray:
    """An accumulator row as Stockfish 17.1 keeps its big net's in memory: doubled (its
    ``scale_weights`` at load) and, in each run of four 8-lane blocks, blocks 1 and 2 swapped
    (the AVX2 ``packus`` order of ``permute_weights``)."""
    blocks = acc.astype(np.int64).reshape(-1, 4, 8)[:, [0, 2, 1, 3], :]
    return 2 * blocks.reshape(-1)


def test_against_nnue_interface():
    """nnue-interface 0.2.7 (pybind11 over Stockfish 17.1) on its big net, where 17.1 uses it.

    Its accumulators are Stockfish's in-memory ones (:func:`stockfish_memory_order` of ours),
    its PSQT accumulators ours, its evaluation our ``final_evaluation / 100``.  Its fc_0/fc_1
    activations are not the network's: it re-runs the pairwise multiplication on the in-memory
    (permuted) accumulators, pairing lanes in memory order, then Stockfish's layers; recomputing
    that from its own accumulators gives its numbers exactly (checked here), while ours are the
    forward pass Stockfish evaluates with (checked against the recomputation above and, through
    the value, against the engines)."""
    ni = _interface()
    net = _net("sf17.1")
    ev = nnue_infer.Evaluator(net)
    boards = [b for b in positions(40) if not b.is_check() and not uses_small_net(b)][:30]
    acts = ev.activations_batch(boards)
    differ = 0
    for i, board in enumerate(boards):
        acc_w, acc_b, psqt, fc0_act, fc1_act, final, _ = ni.get_activations_and_eval(board.fen())
        theirs = [np.asarray(a).astype(np.int64) for a in (acc_w, acc_b)]
        for p in range(2):
            np.testing.assert_array_equal(theirs[p], stockfish_memory_order(acts.accumulator[i, p]))
        np.testing.assert_array_equal(np.asarray(psqt).astype(np.int64), acts.psqt[i])
        assert round(final * 100) == nnue_infer.final_evaluation(board, net)
        stm = 0 if board.turn == chess.WHITE else 1
        half = net.architecture.ft_width // 2
        x = np.concatenate([np.clip(theirs[r][:half], 0, 254) * np.clip(theirs[r][half:], 0, 254) // 512
                            for r in (stm, 1 - stm)])
        k = int(acts.bucket[i])
        z0 = net.layer_biases[0][k].astype(np.int64) + net.layer_weights[0][k][:, :x.size].astype(np.int64) @ x
        a0 = np.concatenate([np.minimum(z0[:15] ** 2 >> 19, 127), np.clip(z0[:15] >> 6, 0, 127)])
        np.testing.assert_array_equal(np.asarray(fc0_act).astype(np.int64), a0)
        z1 = net.layer_biases[1][k].astype(np.int64) + net.layer_weights[1][k].astype(np.int64) @ np.pad(a0, (0, 2))
        np.testing.assert_array_equal(np.asarray(fc1_act).astype(np.int64), np.clip(z1 >> 6, 0, 127))
        differ += not np.array_equal(a0, acts.fc_0_activated[i])
    assert len(boards) >= 20 and differ >= len(boards) // 2


def test_cli_writes_activations(tmp_path):
    """``nnue-infer eval --activations -o FILE.npz|.parquet``: the arrays of activations_batch, with the FENs."""
    from click.testing import CliRunner

    from nnue_infer.cli import cli

    fens = ["rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", chess.STARTING_FEN]
    want = nnue_infer.Evaluator(nnue_infer.default_network()).activations_batch(fens)
    runner = CliRunner()
    npz = tmp_path / "acts.npz"
    result = runner.invoke(cli, ["eval", "--activations", "-o", str(npz), "--fen", fens[0], "--fen", fens[1]])
    assert result.exit_code == 0, result.output
    with np.load(npz) as data:
        assert data["fen"].tolist() == fens
        for name in want.names:
            np.testing.assert_array_equal(data[name], want.to_dict()[name])
    pq = pytest.importorskip("pyarrow.parquet")
    epd = tmp_path / "in.epd"
    epd.write_text("\n".join(fens) + "\n")
    parquet = tmp_path / "acts.parquet"
    result = runner.invoke(cli, ["eval", "--activations", "--all-buckets", "--epd", str(epd), "-o", str(parquet)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(parquet)
    every = nnue_infer.Evaluator(nnue_infer.default_network()).activations_batch(fens, buckets="all")
    assert table.column("fen").to_pylist() == [chess.Board(f).fen() for f in fens]
    assert table.column("fc_0").to_pylist() == every.fc_0.tolist()
    assert table.column("accumulator").to_pylist() == every.accumulator.tolist()
    result = runner.invoke(cli, ["eval", "--activations", "-o", str(tmp_path / "x.csv"), "startpos"])
    assert result.exit_code == 2 and "FILE.npz or FILE.parquet" in result.output


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
def test_cli_activations_write_that_fails_leaves_the_file(tmp_path, suffix):
    """A write cut short (the file-size limit, as a full disk would) left a partial .npz or no
    .parquet at all where a complete file stood; now the file is as it was and no temporary remains."""
    import resource
    import signal
    import subprocess
    import sys

    pytest.importorskip("pyarrow")
    out = tmp_path / f"acts{suffix}"
    before = os.urandom(4000)
    out.write_bytes(before)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (5120, 5120))

    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "--activations", "-o", str(out), "startpos",
                           "startpos moves e2e4"], capture_output=True, text=True, timeout=900, preexec_fn=limit,
                          check=False)
    assert proc.returncode == 1 and f"cannot write {out}" in proc.stderr, proc.stderr
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [out.name]


# -- hostile input ---------------------------------------------------------------------------------------------------


def test_activations_batch_while_the_network_is_reassigned():
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

    results, refused = _interleaved(Evaluator._activations, run, reassign)  # the method reading the network
    assert len(results) > 100 and not refused
    for i, got in enumerate(results):
        ref = expected[got["accumulator"].shape[-1]]
        assert got.keys() == ref.keys() and all(np.array_equal(got[k], ref[k]) for k in ref), f"bytecode {i}"


def test_all_buckets_of_a_single_bucket_network_keep_the_bucket_axis():
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


def test_activations_of_a_network_without_psqt_convert_to_arrow(tmp_path):
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
