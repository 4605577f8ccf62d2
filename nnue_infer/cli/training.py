"""Making networks: ``datagen``, ``train`` and ``crosscheck`` (the ``train`` and ``plot`` extras)."""

from __future__ import annotations

import json

import click

from .common import (FiniteFloatRange, check_output_dir, example, json_option, progress_option, quiet_option, set_threads,
                     show_progress, threads_option)


@click.command(epilog=example("nnue-infer datagen -o positions.npz -n 100000 --seed 1 --games games.jsonl "
                             "--exclude corpus.jsonl",
                             "nnue-infer datagen --search --nodes 400 -o games.binpack -n 100000 --seed 1 "
                             "--games games.jsonl --dedup-set seen.npy"))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Positions file to write (.npz; with --search a training-data file: .binpack, .bin, .plain, .parquet).")
@click.option("-n", "--count", "n", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Number of distinct positions to generate.")
@click.option("--positions", "n_deprecated", type=click.IntRange(min=1), hidden=True,
              help="Deprecated name of --count.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=1, show_default=True,
              help="Random seed (same seed and inputs, same file).")
@click.option("--games", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="JSONL games (id, start_fen, moves) to start perturbation episodes from; without: playouts only.")
@click.option("--exclude", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="JSONL with a 'fen' field (or one FEN per line): positions never to emit, e.g. an evaluation corpus.")
@click.option("--teacher", type=click.Path(dir_okay=False),
              help="Network that labels the positions (default: Stockfish 15.1's net from Debian's stockfish).")
@click.option("--holdout-fraction", type=FiniteFloatRange(0, 1, max_open=True), default=0.25, show_default=True,
              help="Share of games (by a hash of the game id) never used as starting points.")
@click.option("--perturbation-fraction", type=FiniteFloatRange(0, 1), default=0.5, show_default=True,
              help="Share of positions from perturbations of game positions (the rest: playouts).")
@click.option("--selfplay", is_flag=True,
              help="Positions from the teacher's own games (one-ply softmax policy, nnue_infer.training.selfplay) "
                   "instead of perturbations and playouts; with --games, half the games start from their positions.")
@click.option("--endgame-fraction", type=FiniteFloatRange(0, 0.5), default=None,
              help="With --selfplay (default 0) or --search (default 0.2): share of games that start from a random "
                   "endgame (2 kings and 1-6 other pieces).")
@click.option("--search", is_flag=True,
              help="Positions from games of the compiled search at a fixed node count (nnue_infer.training.searchplay), "
                   "written as Stockfish training data with the move played and the game result.")
@click.option("--nodes", type=click.IntRange(min=1), default=400, show_default=True,
              help="With --search: nodes per move.")
@click.option("--label", type=click.Choice(["teacher", "search"]), default="teacher", show_default=True,
              help="With --search: score written per position: the teacher's static evaluation or the search's score.")
@click.option("--dedup-set", type=click.Path(dir_okay=False),
              help="With --search: .npy set of position hashes never to emit (earlier chunks of the data set); "
                   "made if missing, and the new positions are added to it once the output is written.")
@threads_option
@progress_option
@quiet_option
def datagen(output, n, n_deprecated, seed, games, exclude, teacher, holdout_fraction, perturbation_fraction, selfplay,
            endgame_fraction, search, nodes, label, dedup_set, threads, progress, quiet):
    """Generate labelled training positions for distillation (see nnue_infer.training.datagen for the file format).

    Labels are the teacher's values in internal units, side to move's point of view (Stockfish
    15.1: 361 = one pawn).  Prints a JSON summary of the file on stdout.
    """
    from ..training import datagen as D

    if n_deprecated is not None:
        click.echo("warning: --positions is deprecated; use -n/--count", err=True)
        n = n_deprecated
    set_threads(threads)
    from ..errors import NnueError
    from ..resources import stockfish_15_1_network_path

    check_output_dir(output, "-o")
    ctx = click.get_current_context()
    if selfplay and search:
        raise click.UsageError("--selfplay and --search are two generators: give one")
    if endgame_fraction is not None and not (selfplay or search):
        raise click.UsageError("--endgame-fraction applies to --selfplay and --search only")
    for name in ("nodes", "label", "dedup_set"):
        if not search and ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
            raise click.UsageError(f"--{name.replace('_', '-')} applies to --search only")
    source = ctx.get_parameter_source("perturbation_fraction")
    if (selfplay or search) and source is not click.core.ParameterSource.DEFAULT:
        flag = "--selfplay" if selfplay else "--search"
        raise click.UsageError(f"--perturbation-fraction applies without {flag} only ({flag[2:]} games have no "
                               "perturbations)")
    if dedup_set:
        check_output_dir(dedup_set, "--dedup-set")  # before any game: the set is written after the output
    if search:
        from ..io.training_data import KindError, kind_of

        try:
            kind_of(output)
        except KindError as exc:
            raise click.BadParameter(str(exc), param_hint="-o") from exc
    if games == "-" and exclude == "-":
        raise click.UsageError("--games and --exclude cannot both read standard input ('-')")
    try:
        from .. import Network, load

        net = load(teacher or stockfish_15_1_network_path())
        if not isinstance(net, Network):
            raise click.ClickException(f"--teacher {teacher} holds a float network; the teacher must be quantised "
                                       "(nnue-infer quantise)")
        if search:
            _search_datagen(output, n, seed, net, games, exclude, holdout_fraction, endgame_fraction, nodes, label,
                            dedup_set, show_progress(progress, quiet))
            return
        if selfplay:
            from ..training import selfplay as SP

            data = SP.generate(n, seed, net, D.read_exclude(exclude) if exclude else None,
                               SP.SelfPlaySettings(holdout_fraction=holdout_fraction,
                                                   endgame_fraction=endgame_fraction or 0.0),
                               progress=show_progress(progress, quiet), games=D.read_games(games) if games else None)
        else:
            data = D.generate(n, seed, net, D.read_games(games) if games else None,
                              D.read_exclude(exclude) if exclude else None,
                              D.GenerationSettings(holdout_fraction=holdout_fraction,
                                                   perturbation_fraction=perturbation_fraction),
                              progress=show_progress(progress, quiet))
        D.save(output, data)
    except MemoryError as exc:
        raise click.ClickException(f"-n {n}: not enough memory for that many positions ({exc})") from exc
    except (NnueError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps({"output": output, **D.summary(data), "meta": json.loads(str(data["meta"]))}, indent=1))


def _search_datagen(output, n, seed, net, games, exclude, holdout_fraction, endgame_fraction, nodes, label, dedup_set,
                    progress) -> None:
    """``datagen --search``: engine games written as training data; the hash set updated after the output."""
    import os

    import numpy as np

    from ..io.training_data import write
    from ..training import datagen as D
    from ..training import searchplay as S
    from ..training.positionset import PositionSet, position_hashes

    seen = PositionSet.load(dedup_set) if dedup_set and os.path.exists(dedup_set) else PositionSet()
    if exclude:
        keys = np.array(sorted(D.read_exclude(exclude)), np.uint64).reshape(-1, 9)
        seen.add(position_hashes(keys[:, :8], (keys[:, 8] ^ 1).astype(np.uint8)))  # key's turn: True = White
    settings = S.SearchPlaySettings(nodes=nodes, label=label, holdout_fraction=holdout_fraction,
                                    **({} if endgame_fraction is None else {"endgame_fraction": endgame_fraction}))
    data, summary = S.generate(n, seed, net, games=D.read_games(games) if games else None, seen=seen,
                               settings=settings, progress=progress)
    write(data, output)
    if dedup_set:
        seen.save(dedup_set)
    results = {str(k): int(v) for k, v in zip(*np.unique(data.result, return_counts=True))}
    click.echo(json.dumps({"output": output, "positions": len(data), "results_side_to_move": results,
                           "dedup_set": dedup_set, "dedup_set_size": len(seen) if dedup_set else None, **summary},
                          indent=1))


@click.command(epilog=example("nnue-infer train positions.npz -o run/ --epochs 10 --eval-positions corpus.jsonl",
                             "nnue-infer train a.npz b.npz -o run/ --arch stockfish-15.1 --threads 2"))
@click.argument("data", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for checkpoint.pt, loss.jsonl, loss.png, float.safetensors, network.safetensors, summary.json.")
@click.option("--arch", default="default", show_default=True,
              help="Architecture: a preset (default, stockfish-15.1) or a JSON file (Architecture.to_json).")
@click.option("--ft-width", type=click.IntRange(min=2), help="Override the feature-transformer width.")
@click.option("--ft-activation", metavar="NAME",
              help="Override the feature transformer's activation: crelu, screlu, pairwise, pairwise_screlu, glu, "
                   "bilinear, hswish_glu or lut_glu (the bundled network: bilinear).")
@click.option("--epochs", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=16384, show_default=True)
@click.option("--lr", type=FiniteFloatRange(0, min_open=True), default=1e-3, show_default=True, help="Initial Adam learning rate (cosine decay).")
@click.option("--lr-final", type=FiniteFloatRange(0, 1), default=0.02, show_default=True, help="Final learning rate as a fraction of --lr.")
@click.option("--val-fraction", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.01, show_default=True, help="Share of positions for validation (at least 2 of them, at most 50,000, and 1 left for training).")
@click.option("--sigmoid-scale", type=FiniteFloatRange(0, min_open=True), default=400.0, show_default=True,
              help="S of the loss: win probability = sigmoid(cp / S).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=1, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Threads for PyTorch and the compiled kernels.")
@click.option("--eval-positions", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Corpus (JSONL with fen and raw.value) to measure the quantised network against the teacher.")
@click.option("--resume", is_flag=True, help="Continue from OUTPUT/checkpoint.pt.")
@progress_option
@quiet_option
def train(data, out_dir, arch, ft_width, ft_activation, epochs, batch_size, lr, lr_final, val_fraction, sigmoid_scale, seed, threads,
          eval_positions, resume, progress, quiet):
    """Distil: train a float network on positions files (nnue-infer datagen), quantise it, check it.

    Several DATA files are concatenated in order.  The loss compares win probabilities
    sigmoid(cp / S) of the network's and the teacher's values in centipawns (S: --sigmoid-scale);
    the summary's errors are in centipawns.

    Needs the 'train' extra (PyTorch, matplotlib): pip install 'nnue-infer[train]'.
    """
    from ..errors import NnueError

    try:
        from ..training import train as T
    except ImportError as exc:
        raise click.ClickException(str(exc)) from exc
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        architecture = T.architecture_from_spec(arch, ft_width, ft_activation)
        config = T.TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, lr_final_fraction=lr_final,
                               val_fraction=val_fraction, sigmoid_scale_cp=sigmoid_scale, seed=seed, threads=threads)
        summary = T.run(list(data), out_dir, architecture, config, eval_positions, resume, progress=show_progress(progress, quiet),
                        log=(lambda m: None) if quiet else (lambda m: click.echo(m, err=True)))
    except T.TrainingError as exc:
        if exc.field in ("val_fraction", "ft_activation"):
            raise click.BadParameter(str(exc), param_hint=["--" + exc.field.replace("_", "-")]) from exc
        raise click.ClickException(T.failure_message(out_dir, exc)) from exc
    except (NnueError, OSError, ValueError) as exc:
        raise click.ClickException(T.failure_message(out_dir, exc)) from exc
    click.echo(json.dumps({k: summary[k] for k in ("network", "network_bytes", "train_seconds", "final",
                                                   "crosscheck_float_vs_quantised", "quantisation")
                           } | ({"accuracy": summary["accuracy"]} if "accuracy" in summary else {}), indent=1,
                          allow_nan=False))


@click.command(epilog=example("nnue-infer crosscheck --float float.safetensors --quantised net.safetensors "
                             "--positions corpus.jsonl",
                             "nnue-infer crosscheck --float sf.nnue --quantised sf.nnue --positions p.epd.gz --plot e.png"))
@click.option("--float", "float_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Float network (native .safetensors); a quantised file is dequantised.")
@click.option("--quantised", "quant_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Quantised network (.nnue or .safetensors).")
@click.option("--positions", required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Positions file: JSON lines with a 'fen' field, or EPD/FEN lines ('-': stdin; gzip/zstd).")
@click.option("--plot", type=click.Path(dir_okay=False),
              help="Also write the error histogram to this PNG (needs the plot extra: pip install 'nnue-infer[plot]').")
@click.option("--worst", type=click.IntRange(min=0), default=5, show_default=True,
              help="How many worst positions to list.")
@json_option("Print the summary as one JSON object.")
@threads_option
@progress_option
@quiet_option
def crosscheck(float_path, quant_path, positions, plot, worst, as_json, threads, progress, quiet):
    """Compare a float network with its quantised version over many positions.

    Errors are quantised minus float, in centipawns from the side to move's point of view
    (100 * value / units_per_pawn, unrounded).
    """
    from ..training.crosscheck import crosscheck as run, plot_histogram, read_positions
    from ..errors import NnueError
    from ..float_network import FloatNetwork
    from ..formats import load
    from ..quantisation import dequantise

    set_threads(threads)
    if plot:
        check_output_dir(plot, "--plot")  # before the work, not after it
        from ..training.plotting import pyplot

        try:
            pyplot()
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
    try:
        fnet = load(float_path)
        if not isinstance(fnet, FloatNetwork):
            fnet = dequantise(fnet)
        qnet = load(quant_path)
        if isinstance(qnet, FloatNetwork):
            raise click.ClickException(f"{quant_path} holds a float network; --quantised needs a quantised one")
        fens = read_positions(positions)
        if not fens:
            raise click.ClickException(f"{positions}: no positions (the file is empty or holds only comments)")
        result = run(fnet, qnet, fens, progress=show_progress(progress, quiet))
    except (NnueError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    s = result.summary()
    if not s["positions"]:
        raise click.ClickException(f"{positions}: none of the {len(fens)} positions could be evaluated "
                                   f"(first skipped: {result.skipped[0] if result.skipped else '?'})")
    if plot:
        try:
            plot_histogram(result, plot)
        except OSError as exc:
            raise click.ClickException(f"cannot write --plot {plot}: {exc.strerror or exc}") from exc
    if as_json:
        import math

        finite = {k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in s.items()}  # JSON has no NaN
        click.echo(json.dumps({**finite, "worst": [dict(zip(("fen", "float_cp", "quantised_cp", "error_cp"), w))
                                                   for w in result.worst(worst)], "plot": plot}, allow_nan=False))
        return
    click.echo(f"positions:   {s['positions']} ({s['skipped']} skipped)")
    click.echo(f"error (quantised - float), centipawns: mean |e| {s['mae_cp']:.3f}, max |e| {s['max_abs_cp']:.3f}, "
               f"rmse {s['rmse_cp']:.3f}, bias {s['bias_cp']:+.3f}")
    click.echo(f"|e| percentiles: 50% {s['p50_abs_cp']:.3f}, 90% {s['p90_abs_cp']:.3f}, 99% {s['p99_abs_cp']:.3f}")
    click.echo(f"correlation: {s['correlation']:.6f}")
    click.echo("distribution:")
    for lo, hi, c in result.histogram(8):
        click.echo(f"  [{lo:+8.2f}, {hi:+8.2f})  {c:6d}  {'#' * round(50 * c / max(1, s['positions']))}")
    click.echo("worst positions:")
    for fen, f, q, e in result.worst(worst):
        click.echo(f"  {e:+8.2f} cp  float {f:+9.2f}  quantised {q:+9.2f}  {fen}")
    if plot:
        click.echo(f"histogram:   {plot}")
