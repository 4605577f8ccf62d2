"""Tools for network authors: ``permute`` (sparse feature-transformer output) and ``check`` (overflow,
clipping, sparsity, quantisation error)."""

from __future__ import annotations

import json
import os
import sys

import click

from .common import check_output_dir, example, json_option, quiet_option

_POSITIONS_HELP = ("Positions: an EPD/FEN file, JSON lines with a 'fen' field, a PGN (every position of every "
                   "game) or training data (.binpack, .bin, .plain); gzip/zstd allowed.")


def _open_network(spec: str):
    """``(network, file, format)`` of a network file or name (a float network stays float)."""
    from ..errors import NnueError
    from ..formats import detect_format, load
    from ..resources import is_network_name, network_file, network_from_spec

    try:
        if not is_network_name(spec) and not os.path.exists(spec):
            network_from_spec(spec)  # raises: no such file (the message names the networks there are)
        path = network_file(spec)
        fmt = detect_format(path)
        network = network_from_spec(spec) if is_network_name(spec) else load(path)
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    return network, os.fspath(path), fmt


def _read(path: str, limit: int | None):
    from ..errors import NnueError
    from ..inspection.positions import read_positions

    try:
        return read_positions(path, limit)
    except (NnueError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


@click.command(epilog=example(
    "nnue-infer permute stockfish --positions selfplay.binpack -o sf15.1-permuted.nnue",
    "nnue-infer permute net.safetensors --positions games.pgn --held-out 0.1 -o permuted.safetensors --json"))
@click.argument("net", metavar="NET")
@click.option("--positions", "data", required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=False),
              help=_POSITIONS_HELP)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The permuted network, written in "
              "NET's format (.nnue or .safetensors).")
@click.option("--limit", type=click.IntRange(min=2), default=100_000, show_default=True,
              help="Positions read from the file (the first ones).")
@click.option("--held-out", type=click.FloatRange(0.0, 0.9), default=0.2, show_default=True,
              help="Share of the positions read (the last ones) kept out of the fitting, to measure the zero-chunk "
                   "share on.")
@click.option("--rounds", type=click.IntRange(min=0), default=50, show_default=True,
              help="Most rounds of neuron exchanges after the greedy grouping.")
@json_option("Print one JSON object (positions, shares before and after, order).")
@quiet_option
def permute(net, data, output, limit, held_out, rounds, as_json, quiet):
    """Permute NET's feature-transformer neurons so that the zeros of its output fall into whole
    4-byte chunks on the given positions (a sparse first dense layer skips those chunks).

    The permuted network evaluates every position exactly as NET does (the same function, its
    neurons in another order). Prints the share of all-zero chunks before and after, on the
    fitting positions and on the held-out ones.
    """
    from ..errors import NnueError
    from ..float_network import FloatNetwork
    from ..formats import save
    from ..inspection.permutation import permute as permute_net
    from ..inspection.permutation import zero_chunk_share

    check_output_dir(output, "-o")
    network, path, fmt = _open_network(net)
    if isinstance(network, FloatNetwork):
        raise click.ClickException(f"{path} holds a float network; permute a quantised one (nnue-infer quantise)")
    positions = _read(data, limit)
    n_fit = len(positions) - int(round(len(positions) * held_out))
    if n_fit < 1:
        raise click.ClickException(f"{data}: {len(positions)} position(s), none left to fit on with --held-out {held_out}")
    fit, hold = positions[:n_fit], positions[n_fit:]
    try:
        result = permute_net(network, fit.bitboards, fit.stm, max_rounds=rounds)
        before = zero_chunk_share(network, hold.bitboards, hold.stm) if len(hold) else None
        after = zero_chunk_share(result.network, hold.bitboards, hold.stm) if len(hold) else None
        save(result.network, output, fmt)
    except (NnueError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"network": path, "output": output, "format": fmt, "fitted_positions": len(fit),
                               "held_out_positions": len(hold), "fitted_before": result.share_before,
                               "fitted_after": result.share_after, "held_out_before": before,
                               "held_out_after": after, "order": result.order.tolist()}))
        return
    if not quiet:
        click.echo(f"all-zero 4-byte chunks of the feature-transformer output: {100 * result.share_before:.1f} % -> "
                   f"{100 * result.share_after:.1f} % on {len(fit)} fitting positions")
        if before is not None:
            click.echo(f"held out: {100 * before:.1f} % -> {100 * after:.1f} % on {len(hold)} positions")
        click.echo(f"wrote {output} ({fmt})")


@click.command(epilog=example("nnue-infer check stockfish", "nnue-infer check sf19 --positions positions.epd --json",
                             "nnue-infer check float.safetensors --positions games.pgn --plot check.png"))
@click.argument("net", metavar="NET")
@click.option("--positions", "data", type=click.Path(exists=True, dir_okay=False), help=_POSITIONS_HELP +
              " With them: dead neurons, zero bytes and chunks, and for a float network its quantisation error.")
@click.option("--limit", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="Positions read from the file (the first ones).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Also write a PNG: every neuron's worst-case range against int16 (and the float error's bands).")
@json_option("Print one JSON object (every neuron's worst-case range, limits, data, float error).")
@quiet_option
def check(net, data, limit, plot_path, as_json, quiet):
    """Check NET: the worst-case range of every accumulator neuron (bias plus the largest weights over
    the most features active at once) and whether int16 (PSQT: int32) overflow is possible, naming
    the neurons; the share of values at the quantisation limits per tensor; with --positions, dead
    neurons and the zero bytes and chunks of the feature-transformer output; for a float network
    (quantised with the stockfish scheme to be checked), the quantised network's error against it.

    Exits with status 1 when an overflow is possible.
    """
    from ..errors import NnueError
    from ..inspection import check as C

    if plot_path:
        check_output_dir(plot_path, "--plot")
    network, _, _ = _open_network(net)
    positions = _read(data, limit) if data else None
    try:
        report = C.check(network, positions)
        if plot_path:
            C.plot(report, plot_path)
    except (NnueError, ValueError, OSError, ImportError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(report.to_dict()) if as_json else str(report))
    if not report.safe:
        sys.exit(1)  # (click's Exit is returned, not raised, by cli.main without standalone mode)
