"""The ``nnue-infer`` command line: ``eval``, ``info``, ``extract``, ``datagen``, ``convert``, ``quantise``, ``crosscheck``.

``main(argv) -> int`` is the entry point; heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click


def _load_network(net: str | None):
    """The network of a ``--net`` value: a file, ``default`` (bundled) or ``stockfish`` (Stockfish 15.1's)."""
    from .resources import network_from_spec

    return network_from_spec(net)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nnue-infer")
def cli() -> None:
    """Exact, fast evaluation of chess positions with NNUE networks."""


def _read_epd(path: str) -> tuple[list[str], list[int]]:
    """FENs from an EPD/FEN file (``-``: stdin; gzip/zstd allowed) and their line numbers (1-based).

    Keeps the first four fields (plus the counters if present); blank lines and lines
    starting with ``#`` are skipped.
    """
    from .inputs import open_input

    fens, lines = [], []
    with open_input(path) as inp:  # bad bytes: that line's FEN error
        for number, line in enumerate(inp.text, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            keep = 6 if len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit() else 4
            fens.append(" ".join(fields[:keep]))
            lines.append(number)
    return fens, lines


#: Rows per batch call in file mode (progress-bar granularity).
_CHUNK = 8192


def _progress_bar(total: int, unit: str, enabled: bool | None):
    """A tqdm bar on stderr, shown when ``enabled`` (``--progress``) or stderr is a terminal."""
    from tqdm import tqdm

    show = enabled or sys.stderr.isatty()
    return tqdm(total=total, unit=unit, unit_scale=unit == "B", file=sys.stderr, disable=not show, dynamic_ncols=True)


class _RowWriter:
    """Writes result rows as CSV with a header (default) or as JSON lines."""

    def __init__(self, out, columns: tuple[str, ...], as_json: bool) -> None:
        import csv

        self._out, self._columns, self._json = out, columns, as_json
        self._csv = None if as_json else csv.writer(out, lineterminator="\n")
        if self._csv is not None:
            self._csv.writerow(columns)

    def write(self, rows) -> None:
        if self._csv is not None:
            self._csv.writerows(rows)
        else:
            self._out.writelines(json.dumps(dict(zip(self._columns, row))) + "\n" for row in rows)


def _centipawns(values, black_to_move, per_pawn: int = 361):
    """(cp side to move, cp White) int64 arrays from int values: ``tdiv(100 * v, per_pawn)``, as ``to_centipawns``."""
    import numpy as np

    v = np.asarray(values, np.int64)
    cp = np.sign(v) * (np.abs(100 * v) // per_pawn)
    return cp, np.where(black_to_move, -cp, cp)


def _eval_epd(ev, path: str, writer: _RowWriter, progress: bool | None) -> int:
    """Batch-evaluate an EPD file in chunks; bad rows go to stderr (file:line) and give status 1."""
    import numpy as np

    from .errors import FenError, PositionError

    from .inputs import input_label

    fens, lines = _read_epd(path)
    path = input_label(path)
    status = 0
    with _progress_bar(len(fens), "pos", progress) as bar:
        for lo in range(0, len(fens), _CHUNK):
            chunk, numbers = fens[lo:lo + _CHUNK], lines[lo:lo + _CHUNK]
            try:
                values = ev.evaluate_batch(chunk)
            except (FenError, PositionError):  # rare: redo this chunk row by row to report every bad row
                values, kept, kept_numbers = [], [], []
                for fen, number in zip(chunk, numbers):
                    try:
                        values.append(ev.evaluate(fen))
                    except ValueError as exc:
                        bar.write(f"error: {path}:{number}: {exc}", file=sys.stderr)
                        status = 1
                        continue
                    kept.append(fen)
                    kept_numbers.append(number)
                chunk = kept
            black = np.array([f.split()[1:2] == ["b"] for f in chunk], bool)
            cp, cp_white = _centipawns(values, black, ev.network.architecture.units_per_pawn)
            writer.write(zip(chunk, np.asarray(values).tolist(), cp.tolist(), cp_white.tolist()))
            bar.update(len(numbers))
    return status


def _eval_pgn(ev, path: str, writer: _RowWriter, progress: bool | None) -> int:
    """Every position of every game's mainline, scored incrementally with ``Evaluator.evaluate_game``.

    ``path`` may be ``-`` (stdin), a pipe, or gzip/zstd-compressed (:mod:`nnue_infer.inputs`).
    """
    import chess
    import chess.pgn
    import numpy as np

    import logging

    # python-chess also logs each game's errors (to stderr, with a traceback); they are reported below.
    logging.getLogger("chess.pgn").addHandler(logging.NullHandler())
    status = 0
    from .inputs import input_label, open_input

    with open_input(path) as inp, _progress_bar(inp.size, "B", progress) as bar:
        f, path = inp.text, input_label(path)
        number = 0
        while True:
            game = chess.pgn.read_game(f)
            if game is None:
                break
            number += 1
            for err in game.errors:
                bar.write(f"error: {path}: game {number}: {err}", file=sys.stderr)
                status = 1
            try:
                board = game.board()
            except ValueError as exc:  # a bad [FEN] header (already among game.errors)
                if not game.errors:
                    bar.write(f"error: {path}: game {number}: {exc}", file=sys.stderr)
                status = 1
                continue
            if board.uci_variant != "chess":
                bar.write(f"error: {path}: game {number}: variant {board.uci_variant!r} is not supported "
                          "(standard chess and Chess960 only)", file=sys.stderr)
                status = 1
                continue
            moves = list(game.mainline_moves())
            try:
                values = ev.evaluate_game(board, moves)
            except ValueError as exc:
                bar.write(f"error: {path}: game {number}: {exc}", file=sys.stderr)
                status = 1
                continue
            fens, black = [board.fen()], [board.turn == chess.BLACK]
            for move in moves:
                board.push(move)
                fens.append(board.fen())
                black.append(board.turn == chess.BLACK)
            cp, cp_white = _centipawns(values, np.array(black), ev.network.architecture.units_per_pawn)
            ucis = [""] + [m.uci() for m in moves]
            writer.write(zip([number] * len(fens), range(len(fens)), ucis, fens, values.tolist(), cp.tolist(),
                             cp_white.tolist()))
            bar.update(inp.bytes_read - bar.n)  # bytes taken from the source: no tell(), pipes work
    return status


@cli.command("eval")
@click.argument("fens", nargs=-1)
@click.option("--net", help="Network: a file (.nnue or .safetensors), 'default' (the bundled network, used when "
              "--net is not given) or 'stockfish' (Stockfish 15.1's net from Debian's stockfish package).")
@click.option("--fen", "fen_opts", multiple=True, help="A position in FEN (may be repeated).")
@click.option("--epd", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="File with one FEN/EPD per line ('-': stdin; gzip/zstd read directly): batch evaluation on "
              "all cores, CSV (or --json) output.")
@click.option("--pgn", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="PGN file ('-': stdin; gzip/zstd read directly): every position of every game's mainline, "
              "incremental; CSV (or --json) output.")
@click.option("--trace", is_flag=True, help="Print Stockfish 15.1's eval text for the NNUE (piece values, bucket table, NNUE line).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per position.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write results to this file instead of stdout.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Threads for batch evaluation (default: all cores).")
@click.option("--progress", is_flag=True, default=None, help="Show a progress bar on stderr even when it is not a terminal.")
def eval_cmd(fens, net, fen_opts, epd, pgn, trace, as_json, output, jobs, progress):
    """Evaluate positions given as FEN arguments, --fen, or files (--epd, --pgn).

    FEN arguments and --fen print, per position, the NNUE value in internal units and
    centipawns from the side to move's point of view, and centipawns from White's (--trace:
    Stockfish's eval text).  --epd and --pgn write CSV rows (--json: JSON lines): for EPD
    "fen,value,cp,cp_white"; for PGN "game,ply,move,fen,value,cp,cp_white" (ply 0 is the
    start position, "move" the UCI move that led to the position).
    """
    from .errors import NnueError
    from .evaluator import Evaluator

    if (epd or pgn) and (fens or fen_opts):
        raise click.UsageError("give FEN arguments / --fen, or a file (--epd / --pgn), not both")
    if epd and pgn:
        raise click.UsageError("give one of --epd and --pgn")
    if pgn and trace:
        raise click.UsageError("--trace works with FEN arguments, --fen and --epd, not --pgn")
    if jobs is not None:
        import numba

        if jobs > numba.config.NUMBA_NUM_THREADS:
            raise click.BadParameter(f"at most {numba.config.NUMBA_NUM_THREADS} (this machine's threads)",
                                     param_hint="--jobs")
        numba.set_num_threads(jobs)
    source = epd or pgn
    if output and source and source != "-" and os.path.exists(output) and os.path.samefile(output, source):
        raise click.UsageError(f"--output {output} is the input file: it would be emptied before it is read")
    try:
        positions = list(fen_opts) + [" ".join(fens)] * bool(fens) + (_read_epd(epd)[0] if epd and trace else [])
    except OSError as exc:
        raise click.ClickException(str(exc)) from exc
    if not positions and not (epd or pgn):
        raise click.UsageError("give a position: FEN arguments, --fen FEN, --epd FILE or --pgn FILE")
    try:
        ev = Evaluator(_load_network(net))
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        out = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
    except OSError as exc:
        raise click.ClickException(f"cannot write --output {output}: {exc.strerror or exc}") from exc
    try:
        if (epd or pgn) and not trace:
            if pgn:
                columns = ("game", "ply", "move", "fen", "value", "cp", "cp_white")
                status = _eval_pgn(ev, pgn, _RowWriter(out, columns, as_json), progress)
            else:
                status = _eval_epd(ev, epd, _RowWriter(out, ("fen", "value", "cp", "cp_white"), as_json), progress)
        else:
            status = _eval_positions(ev, positions, trace, as_json, out)
        out.flush()  # a full disk shows here (or at close), not as a traceback at exit
        if output:
            out.close()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and not output:
            raise  # stdout's reader went away (| head): click ends quietly with status 1
        if exc.filename is None and not isinstance(exc, NnueError):  # the output failed, not an input
            raise click.ClickException(f"cannot write {output or 'to stdout'}: {exc.strerror or exc}") from exc
        raise click.ClickException(str(exc)) from exc
    finally:
        if output and not out.closed:
            try:
                out.close()
            except OSError:
                pass  # already reported
    sys.exit(status)


def _eval_positions(ev, positions: list[str], trace: bool, as_json: bool, out) -> int:
    """One position at a time: text lines, JSON objects or Stockfish-style traces.

    The text line ends with White's value in pawns as Stockfish's ``NNUE evaluation`` line prints
    it (``value / units_per_pawn``, two decimals: +0.28), not the truncated centipawns / 100.
    """
    import chess

    from .errors import clip, quote
    from .trace import to_centipawns

    status = 0
    for fen in positions:
        try:
            board = chess.Board(fen)
            if trace:
                t = ev.trace(board)
                if as_json:
                    click.echo(json.dumps({"fen": fen, "bucket": t.bucket, "value": t.value, "psqt": t.psqt,
                                           "positional": t.positional,
                                           "piece_values": {chess.SQUARE_NAMES[s]: v for s, v in t.piece_values.items()}}),
                               file=out)
                else:
                    click.echo(t.format_stockfish(), file=out)
                continue
            value = ev.evaluate(board)
        except ValueError as exc:
            click.echo(f"error: {quote(fen)}: {clip(str(exc))}", err=True)
            status = 1
            continue
        cp = to_centipawns(value, ev.network.architecture.units_per_pawn)
        white_cp = cp if board.turn == chess.WHITE else -cp
        if as_json:
            click.echo(json.dumps({"fen": fen, "value": value, "cp": cp, "cp_white": white_cp}), file=out)
        else:
            white_value = value if board.turn == chess.WHITE else -value
            pawns = white_value / ev.network.architecture.units_per_pawn  # as Stockfish's "NNUE evaluation" line
            click.echo(f"{fen}\tvalue {value}\tcp {cp:+d} (side to move)\t{pawns:+.2f} (white side)", file=out)
    return status


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def info(file):
    """Show a network file's format, architecture, dimensions, hashes and SHA-256."""
    import dataclasses
    import hashlib

    from . import load
    from .errors import NnueError
    from .formats import detect_format
    from .formats.stockfish import ft_hash, layer_stack_hash

    try:
        fmt = detect_format(file)
        network = load(file)
    except NnueError as exc:
        raise click.ClickException(str(exc)) from exc
    arch = network.architecture
    sha = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    click.echo(f"file:          {file}")
    click.echo(f"format:        {fmt}")
    click.echo(f"sha256:        {sha}")
    click.echo(f"description:   {network.description.encode('utf-8', 'backslashreplace').decode()}")
    click.echo(f"architecture:  {network!r}")
    for key, value in dataclasses.asdict(arch).items():
        click.echo(f"  {key}: {value}")
    click.echo(f"feature transformer: {network.ft_weights.shape[0]} features -> {arch.ft_width} {network.ft_weights.dtype} "
               f"(+{arch.psqt_buckets} PSQT {network.psqt_weights.dtype}) per perspective")
    click.echo("dense layers:  " + ", ".join(f"{l.outputs} {l.activation} ({w.dtype})"
                                              for l, w in zip(arch.layers, network.layer_weights)))
    if fmt == "stockfish":
        l1 = arch.ft_width
        click.echo(f"hashes:        network 0x{ft_hash(l1) ^ layer_stack_hash(l1):08X}, "
                   f"feature transformer 0x{ft_hash(l1):08X}, layer stack 0x{layer_stack_hash(l1):08X}")


@cli.command()
@click.argument("binary", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Where to write the network.")
def extract(binary, output):
    """Extract the NNUE network embedded in an engine BINARY (e.g. /usr/games/stockfish)."""
    from .errors import NnueError
    from .formats.stockfish import extract_network

    _check_output_dir(output, "-o")
    try:
        digest = extract_network(binary, output)
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"wrote {output} (sha256 {digest}, nn-{digest[:12]}.nnue)")


@cli.command()
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Positions file to write (.npz).")
@click.option("-n", "--positions", "n", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Number of distinct positions.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed (same seed and inputs, same file).")
@click.option("--games", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="JSONL games (id, start_fen, moves) to start perturbation episodes from; without: playouts only.")
@click.option("--exclude", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="JSONL with a 'fen' field (or one FEN per line): positions never to emit, e.g. an evaluation corpus.")
@click.option("--teacher", type=click.Path(dir_okay=False),
              help="Network that labels the positions (default: Stockfish 15.1's net from Debian's stockfish).")
@click.option("--holdout-fraction", type=float, default=0.25, show_default=True,
              help="Share of games (by a hash of the game id) never used as starting points.")
@click.option("--perturbation-fraction", type=float, default=0.5, show_default=True,
              help="Share of positions from perturbations of game positions (the rest: playouts).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def datagen(output, n, seed, games, exclude, teacher, holdout_fraction, perturbation_fraction, quiet):
    """Generate labelled training positions for distillation (see nnue_infer.datagen for the file format)."""
    from . import datagen as D
    from .errors import NnueError
    from .resources import stockfish_15_1_network_path

    _check_output_dir(output, "-o")
    if games == "-" and exclude == "-":
        raise click.UsageError("--games and --exclude cannot both read standard input ('-')")
    try:
        from . import Network, load

        net = load(teacher or stockfish_15_1_network_path())
        if not isinstance(net, Network):
            raise click.ClickException(f"--teacher {teacher} holds a float network; the teacher must be quantised "
                                       "(nnue-infer quantise)")
        data = D.generate(n, seed, net, D.read_games(games) if games else None,
                          D.read_exclude(exclude) if exclude else None,
                          D.GenerationSettings(holdout_fraction=holdout_fraction,
                                               perturbation_fraction=perturbation_fraction), progress=not quiet)
        D.save(output, data)
    except (NnueError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps({"output": output, **D.summary(data), "meta": json.loads(str(data["meta"]))}, indent=1))


@cli.command()
@click.argument("data", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for checkpoint.pt, loss.jsonl, loss.png, float.safetensors, network.safetensors, summary.json.")
@click.option("--arch", default="default", show_default=True,
              help="Architecture: a preset (default, stockfish-15.1) or a JSON file (Architecture.to_json).")
@click.option("--ft-width", type=click.IntRange(min=2), help="Override the feature-transformer width.")
@click.option("--epochs", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=16384, show_default=True)
@click.option("--lr", type=float, default=1e-3, show_default=True, help="Initial Adam learning rate (cosine decay).")
@click.option("--lr-final", type=float, default=0.02, show_default=True, help="Final learning rate as a fraction of --lr.")
@click.option("--val-fraction", type=float, default=0.01, show_default=True, help="Share of positions for validation.")
@click.option("--sigmoid-scale", type=float, default=400.0, show_default=True,
              help="S of the loss: win probability = sigmoid(cp / S).")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="PyTorch/Numba threads.")
@click.option("--eval-positions", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Corpus (JSONL with fen and raw.value) to measure the quantised network against the teacher.")
@click.option("--resume", is_flag=True, help="Continue from OUTPUT/checkpoint.pt.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def train(data, out_dir, arch, ft_width, epochs, batch_size, lr, lr_final, val_fraction, sigmoid_scale, seed, threads,
          eval_positions, resume, quiet):
    """Distil: train a float network on positions files (nnue-infer datagen), quantise it, check it.

    Several DATA files are concatenated in order.

    Needs the 'train' extra (PyTorch): pip install 'nnue-infer[train]'.
    """
    from .errors import NnueError

    try:
        from . import train as T
    except ImportError as exc:
        raise click.ClickException(str(exc)) from exc
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        architecture = T.architecture_from_spec(arch, ft_width)
        config = T.TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, lr_final_fraction=lr_final,
                               val_fraction=val_fraction, sigmoid_scale_cp=sigmoid_scale, seed=seed, threads=threads)
        summary = T.run(list(data), out_dir, architecture, config, eval_positions, resume, progress=not quiet,
                        log=lambda m: click.echo(m, err=True))
    except (NnueError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps({k: summary[k] for k in ("network", "network_bytes", "train_seconds", "final",
                                                   "crosscheck_float_vs_quantised", "quantisation")
                           } | ({"accuracy": summary["accuracy"]} if "accuracy" in summary else {}), indent=1))


@cli.command()
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["stockfish", "safetensors"]),
              help="Output format (default: from DEST's extension, .nnue or .safetensors).")
def convert(source, dest, fmt):
    """Convert a network between Stockfish 15.1's .nnue format and the native .safetensors format (lossless)."""
    import hashlib

    from .errors import NnueError
    from .formats import detect_format, format_for_path, load, save

    _check_output_dir(dest, "DEST")
    try:
        fmt = fmt or format_for_path(dest)
        network = load(source)
        save(network, dest, fmt)
    except (NnueError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    sha = hashlib.sha256(Path(dest).read_bytes()).hexdigest()
    click.echo(f"{source} ({detect_format(source)}) -> {dest} ({fmt}), {Path(dest).stat().st_size} bytes, sha256 {sha}")


@cli.command()
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--scheme", type=click.Choice(["stockfish", "qa255-qb64"]), default="stockfish", show_default=True,
              help="Integer scales: stockfish = QA 127 (shift 7 for pairwise), QB 64; qa255-qb64 = QA 255 (shift 9).")
@click.option("--qa", type=int, help="Override QA.")
@click.option("--shift", type=int, help="Override the feature-transformer shift (default: smallest keeping outputs <= 127).")
@click.option("--strict", is_flag=True, help="Fail instead of saturating parameters that do not fit.")
@click.option("--format", "fmt", type=click.Choice(["stockfish", "safetensors"]), help="Output format (default: from DEST).")
def quantise(source, dest, scheme, qa, shift, strict, fmt):
    """Quantise a float network (native .safetensors, kind float) and write it; prints what was clipped."""
    import dataclasses

    from .errors import NnueError
    from .float_network import FloatNetwork
    from .formats import load, save
    from .quantise import SCHEMES, quantise_with_report

    _check_output_dir(dest, "DEST")
    try:
        network = load(source)
        if not isinstance(network, FloatNetwork):
            raise click.ClickException(f"{source} holds a quantised network; quantise needs a float one")
        sch = SCHEMES[scheme]
        if qa is not None:
            sch = dataclasses.replace(sch, qa=qa)
        if shift is not None:
            sch = dataclasses.replace(sch, ft_shift=shift)
        q, report = quantise_with_report(network, sch, clip="error" if strict else "saturate")
        save(q, dest, fmt)
    except (NnueError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(str(report))
    click.echo(f"wrote {dest}")


@cli.command()
@click.option("--float", "float_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Float network (native .safetensors); a quantised file is dequantised.")
@click.option("--quantised", "quant_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Quantised network (.nnue or .safetensors).")
@click.option("--positions", required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Positions: JSON lines with a 'fen' field, or EPD/FEN lines.")
@click.option("--plot", type=click.Path(dir_okay=False), default="crosscheck.png", show_default=True,
              help="Where to write the error histogram (PNG).")
@click.option("--worst", type=int, default=5, show_default=True, help="How many worst positions to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def crosscheck(float_path, quant_path, positions, plot, worst, as_json):
    """Compare a float network with its quantised version over many positions (errors in centipawns)."""
    from .crosscheck import crosscheck as run, plot_histogram, read_positions
    from .errors import NnueError
    from .float_network import FloatNetwork
    from .formats import load
    from .quantise import dequantise

    if plot:
        _check_output_dir(plot, "--plot")  # before the work, not after it
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
        result = run(fnet, qnet, fens, progress=not as_json)
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


def _check_output_dir(path: str, option: str) -> None:
    """Usage error (status 2) naming ``option`` when ``path``'s directory does not exist or is not writable."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise click.BadParameter(f"directory {directory} does not exist", param_hint=option)
    if not os.access(directory, os.W_OK):
        raise click.BadParameter(f"directory {directory} is not writable", param_hint=option)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    try:
        cli.main(args=argv, prog_name="nnue-infer", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
