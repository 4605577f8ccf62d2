"""The ``nnue-infer`` command line: ``eval``, ``info``, ``extract``, ``datagen``, ``train``, ``convert``, ``quantise``, ``crosscheck``.

``main(argv) -> int`` is the entry point; heavy imports happen inside the commands.  Options
mean the same in every command: ``--threads N`` (Numba/PyTorch threads), ``--quiet`` (no
progress bar, no chatter on stderr), ``--progress`` (a bar even when stderr is not a
terminal), ``--json`` (machine-readable output), ``-o/--output`` (where the result goes;
``-`` is standard output), ``--net`` (a network file or name).  Every file input may be
``-`` for standard input, and gzip- or zstd-compressed (:mod:`nnue_infer.inputs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import click

def _example(*lines: str) -> str:
    """An ``Examples:`` epilog that click prints verbatim."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def _load_network(net: str | None):
    """The network of a ``--net`` value: a file or a name (``default``, ``stockfish``, ...; :func:`network_from_spec`)."""
    from .errors import NetworkNotFoundError
    from .resources import network_from_spec

    try:
        return network_from_spec(net)
    except NetworkNotFoundError as exc:
        if net and net.count("/") == 7 and not Path(net).exists():
            raise NetworkNotFoundError(f"--net got {net!r}, which looks like a FEN: --net takes a network file or "
                                       "name; give the position after the options (nnue-infer eval --net NET FEN)") from exc
        raise


def _threads(threads: int | None, option: str = "--threads") -> None:
    """Limit Numba's threads (``None``: all cores); a usage error beyond this machine's threads."""
    if threads is None:
        return
    import numba

    if threads > numba.config.NUMBA_NUM_THREADS:
        raise click.BadParameter(f"at most {numba.config.NUMBA_NUM_THREADS} (this machine's threads)",
                                 param_hint=option)
    numba.set_num_threads(threads)


def _show_progress(progress: bool | None, quiet: bool) -> bool:
    """Draw a bar: never with ``--quiet``, always with ``--progress``, else when stderr is a terminal."""
    if quiet:
        return False
    return bool(progress) or sys.stderr.isatty()


def _progress_bar(total: int | None, unit: str, show: bool):
    """A tqdm bar on stderr counting ``unit`` (positions or games), shown when ``show``."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, disable=not show, dynamic_ncols=True)


def threads_option(f):
    return click.option("--threads", type=click.IntRange(min=1),
                        help="Threads for the compiled kernels (default: all cores).")(f)


def quiet_option(f):
    return click.option("-q", "--quiet", is_flag=True, help="No progress bar and no messages on stderr but errors.")(f)


def progress_option(f):
    return click.option("--progress", is_flag=True, default=None,
                        help="Show a progress bar on stderr even when it is not a terminal.")(f)


def output_option(help_text: str, dir_okay: bool = False, **kwargs):
    def decorate(f):
        return click.option("-o", "--output", type=click.Path(dir_okay=dir_okay, allow_dash=True), help=help_text,
                            **kwargs)(f)
    return decorate


def json_option(help_text: str):
    def decorate(f):
        return click.option("--json", "as_json", is_flag=True, help=help_text)(f)
    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=_example("nnue-infer eval startpos moves e2e4", "nnue-infer eval --net stockfish --epd positions.epd -o scores.csv",
                             "nnue-infer COMMAND --help"))
@click.version_option(package_name="nnue-infer")
def cli() -> None:
    """Exact, fast evaluation of chess positions with NNUE networks.

    Every file input may be '-' (standard input) and gzip- or zstd-compressed.
    """


class _Output:
    """Where results go: ``-o FILE``, or standard output (``None`` or ``-``); binary and text views."""

    def __init__(self, path: str | None, parquet: bool = False) -> None:
        self.path = None if path in (None, "-") else path
        self.binary = None
        if parquet:  # ParquetTableWriter writes a temporary file and renames it: the target is not touched here
            return
        if self.path is None:
            sys.stdout.flush()
            self.binary = sys.stdout.buffer
        else:
            try:
                self.binary = open(self.path, "wb")  # noqa: SIM115 (closed by close())
            except OSError as exc:
                raise click.ClickException(f"cannot write --output {self.path}: {exc.strerror or exc}") from exc

    def write_text(self, text: str) -> None:
        self.binary.write(text.encode("utf-8", "surrogateescape"))

    def close(self) -> None:
        if self.binary is None:
            return
        try:
            self.binary.flush()
        finally:
            if self.path is not None:
                self.binary.close()


def _report(label: str, where: str, message: str) -> None:
    click.echo(f"error: {label}:{where}: {message}", err=True)


def _drop_error_column(table: dict, keep_errors: bool):
    """Rows to write: all (with the error column) under ``--keep-errors``, else the good rows without it."""
    from .output import take

    if keep_errors:
        return table
    errors = table["error"]
    good = ~errors.valid if errors.valid is not None else None
    rest = {k: c for k, c in table.items() if k != "error"}
    return rest if good is None else take(rest, good)


def _errors_of(table: dict) -> list[tuple[int, str]]:
    """(row, message) of the rows with an error."""
    errors = table["error"]
    if errors.valid is None:
        return []
    import numpy as np

    return [(int(i), errors[int(i)]) for i in np.flatnonzero(errors.valid)]


def _table_writer(out: _Output, fmt: str):
    """A table writer for ``fmt``: CSV / JSON lines to the output stream, or a Parquet file (``-o NAME.parquet``)."""
    if fmt == "parquet":
        from .parquet import ParquetTableWriter, _pa

        try:
            _pa()  # the extra is checked before any work, not at the first write
            return ParquetTableWriter(out.path)
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
    from .output import TableWriter

    return TableWriter(out.binary, fmt)


@contextlib.contextmanager
def _finishing(writer, fmt: str):
    """Run the scoring loop of a Parquet ``writer``: an input line refused part-way (``InputError``)
    still writes the rows scored before it, as CSV / JSON lines do; any other failure (Ctrl-C, a
    bug) removes the temporary file and leaves an existing target untouched."""
    from .errors import InputError

    if fmt != "parquet":
        yield
        return
    try:
        yield
    except InputError:
        writer.close()
        raise
    except BaseException:
        writer.abort()
        raise
    writer.close()


def _eval_distributed(epd, pgn, output, net, scheduler, workers, progress, quiet) -> int:
    """``eval --epd/--pgn PATTERN --output DIR --scheduler ADDRESS | --workers N``: a Dask job."""
    if not (epd or pgn) or output in (None, "-"):
        raise click.UsageError("--scheduler / --workers score --epd / --pgn files into a Parquet dataset "
                               "directory: give --epd or --pgn and --output DIR")
    if scheduler and workers:
        raise click.UsageError("give one of --scheduler and --workers")
    try:
        import distributed  # noqa: F401  (the dask extra; imported lazily by run_job otherwise)

        from .distributed import run_job
    except ImportError as exc:
        raise click.ClickException(f"{exc}; --scheduler / --workers need the dask extra: "
                                   "pip install 'nnue-infer[dask]'") from exc
    try:
        return run_job([p for p in (epd, pgn) if p], output, net or "default", scheduler=scheduler,
                       workers=workers, progress=_show_progress(progress, quiet),
                       log=lambda m: None if quiet else click.echo(m, err=True))
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _epd_chunks(inp, label: str):
    """The chunks of an EPD/FEN input (:func:`nnue_infer.epd.iter_epd`); a file that starts like PGN is an error."""
    from .epd import iter_epd, looks_like_pgn

    first = True
    for rows in iter_epd(inp.binary, label):
        if first and len(rows):
            first = False
            head = rows.fen.buf[rows.line_start[0]:rows.fen.ends[0]].tobytes()
            if looks_like_pgn(head):
                raise click.ClickException(f"{label}:{rows.line[0]}: this is PGN (a tag pair or moves), not a FEN/EPD "
                                           "line: use --pgn for games")
        yield rows


def _score_epd_file(ev, source: str, out: _Output, fmt: str, show: bool, strict: bool, keep_errors: bool,
                    empty_in_check: bool) -> int:
    from .inputs import input_label, open_input
    from .output import TableWriter
    from .score import VALUE_COLUMNS, score_epd

    label = input_label(source)
    writer = _table_writer(out, fmt)
    status = 0
    with _finishing(writer, fmt), open_input(source, text=False) as inp, _progress_bar(None, "pos", show) as bar:
        for table in score_epd(ev, _epd_chunks(inp, label), strict=strict, empty_in_check=empty_in_check):
            for i, message in _errors_of(table):
                bar.write(f"error: {label}:{table['line'][i]}: {message}", file=sys.stderr)
                status = 1
            writer.write(_drop_error_column(table, keep_errors))
            bar.update(len(table["line"]))
    if fmt != "parquet" and writer.columns is None:  # no positions: the CSV header alone
        TableWriter(out.binary, fmt, columns=["line", "fen", *VALUE_COLUMNS] + ["error"] * keep_errors)
    return status


def _pgn_lines(stream, label: str):
    """The lines of a PGN text stream; a file whose first line (after blank lines, ``%`` escapes and EPD's
    ``#`` comments) is a FEN is an error."""
    from .epd import looks_like_fen

    for number, line in enumerate(stream, 1):
        if line.strip() and not line.startswith(("%", "#")):
            if looks_like_fen(line):
                raise click.ClickException(f"{label}:{number}: this is a FEN/EPD line, not PGN (tag pairs and "
                                           "moves): use --epd for positions")
            yield line
            break
        yield line
    yield from stream


def _score_pgn_file(ev, source: str, out: _Output, fmt: str, show: bool, keep_errors: bool,
                    empty_in_check: bool) -> int:
    from .inputs import input_label, open_input
    from .score import score_pgn

    label = input_label(source)
    writer = _table_writer(out, fmt)
    status = 0
    positions = 0
    with _finishing(writer, fmt), open_input(source) as inp, _progress_bar(None, "game", show) as bar:
        for table, games in score_pgn(ev, _pgn_lines(inp.text, label), source=label, empty_in_check=empty_in_check):
            for i, message in _errors_of(table):
                bar.write(f"error: {label}: game {table['game'][i]}: {message}", file=sys.stderr)
                status = 1
            rows = _drop_error_column(table, keep_errors)
            writer.write(rows)
            positions += len(rows["game"])
            bar.set_postfix_str(f"{positions} positions", refresh=False)
            bar.update(games)
    return status


@cli.command("eval", epilog=_example(
    'nnue-infer eval "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"',
    "nnue-infer eval startpos moves e4 e5 Nf3          (UCI or SAN moves)",
    "nnue-infer eval --net stockfish --trace --svg trace.svg startpos",
    "nnue-infer eval --epd positions.epd.gz -o scores.csv --keep-errors",
    "zcat games.pgn.gz | nnue-infer eval --pgn - --json > plies.jsonl"))
@click.argument("positions", nargs=-1)
@click.option("--net", help="Network: a file (.nnue or .safetensors) or a name: 'default' (the bundled network, "
              "used when --net is not given), 'stockfish' (Stockfish 15.1's net from Debian's stockfish package), "
              "or another name nnue_infer.resources knows.")
@click.option("--fen", "fen_opts", multiple=True, help="A position in FEN (may be repeated).")
@click.option("--epd", type=click.Path(dir_okay=False, allow_dash=True),
              help="File with one FEN/EPD per line ('-': stdin; gzip/zstd read directly): batch evaluation on all "
              "cores; rows: line,fen,value,cp,cp_white,in_check,outcome, then one column per EPD operation (id, bm, ...).")
@click.option("--pgn", type=click.Path(dir_okay=False, allow_dash=True),
              help="PGN file ('-': stdin; gzip/zstd read directly): every position of every game's mainline; rows: "
              "game,event,site,date,round,white,black,result,ply,san,uci,fen,value,cp,cp_white,in_check,outcome.")
@click.option("--scheduler", metavar="ADDRESS", help="Score --epd/--pgn files (glob patterns allowed) on the Dask "
              "cluster whose scheduler is ADDRESS (tcp://host:8786) into the Parquet dataset directory --output "
              "(needs the dask extra; see nnue_infer.distributed).")
@click.option("--workers", type=click.IntRange(min=1), help="As --scheduler, on a local cluster of N worker processes.")
@click.option("--lenient", is_flag=True, help="Read FENs as python-chess does (missing side to move = White, missing "
              "castling = none); by default a FEN lacking a field is an error naming it.")
@click.option("--keep-errors", is_flag=True, help="Write rows that cannot be scored too, with null values and an "
              "'error' column (default: report them on stderr only).")
@click.option("--empty-in-check", is_flag=True, help="Leave value, cp and cp_white empty when the side to move is in "
              "check, as Stockfish prints no NNUE evaluation there.")
@click.option("--trace", is_flag=True, help="Print Stockfish 15.1's eval text for the NNUE (piece values, bucket "
              "table, NNUE line).")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False),
              help="With --trace and one position: also draw the board with each piece's value and the bucket "
              "table into this SVG file.")
@json_option("JSON lines instead of text (positions) or CSV (files); numbers are JSON numbers.")
@output_option("Write the results to this file ('-': stdout, the default): CSV, JSON lines for a .json / .jsonl "
               "name (as --json), Parquet for .parquet; with --workers / --scheduler, the Parquet dataset "
               "directory.", dir_okay=True)  # a directory otherwise: eval names the mistake
@threads_option
@click.option("-j", "--jobs", type=click.IntRange(min=1), hidden=True, help="Deprecated name of --threads.")
@progress_option
@quiet_option
def eval_cmd(positions, net, fen_opts, epd, pgn, scheduler, workers, lenient, keep_errors, empty_in_check, trace, svg_path, as_json,
             output, threads, jobs, progress, quiet):
    """Evaluate positions: FEN arguments, startpos / fen FEN [moves ...], --fen, or files (--epd, --pgn).

    POSITIONS are FENs (quoted, or as separate words), 'startpos', 'fen FEN', each optionally
    followed by 'moves' and UCI or SAN moves, as in Stockfish's 'position' command; several
    positions may follow each other.  Each gets one line: the FEN, value, cp (side to move),
    White's view in pawns, and 'in check' / 'checkmate' / 'stalemate' when so.  --epd and --pgn
    write CSV (--json: JSON lines) with one row per position; rows join back to the input by
    'line' (EPD) or 'game' and 'ply' (PGN).

    Units: 'value' is the network's output in internal units from the side to move's point of
    view (Stockfish 15.1: 361 = one pawn; the network's units_per_pawn); 'cp' is centipawns,
    tdiv(100 * value, units_per_pawn), side to move; 'cp_white' is cp from White's point of view.

    Exit status 1 if any position could not be scored (each is reported on stderr).
    """
    from .errors import NnueError
    from .evaluator import Evaluator

    if jobs is not None:
        if threads is not None:
            raise click.UsageError("give --threads only (--jobs is its deprecated name)")
        if not quiet:
            click.echo("warning: --jobs is deprecated; use --threads", err=True)
        threads = jobs
    if (epd or pgn) and (positions or fen_opts):
        raise click.UsageError("give positions (arguments, --fen) or a file (--epd / --pgn), not both")
    if epd and pgn:
        raise click.UsageError("give one of --epd and --pgn")
    if pgn and trace:
        raise click.UsageError("--trace works with positions and --epd, not --pgn")
    if svg_path and not trace:
        raise click.UsageError("--svg draws a trace: add --trace")
    if not (positions or fen_opts or epd or pgn):
        raise click.UsageError("give a position: FEN arguments, startpos [moves ...], --fen FEN, --epd FILE or --pgn FILE")
    if scheduler or workers:
        sys.exit(_eval_distributed(epd, pgn, output, net, scheduler, workers, progress, quiet))
    for option, path in (("--epd", epd), ("--pgn", pgn)):
        if path and path != "-" and not os.path.exists(path):
            raise click.BadParameter(f"File {path!r} does not exist.", param_hint=f"'{option}'")
    _threads(threads, "--threads" if jobs is None else "--jobs")
    if output not in (None, "-") and (output.endswith(("/", os.sep)) or os.path.isdir(output)):
        raise click.BadParameter(f"{output} is a directory: give a file name (.csv, .jsonl, .parquet), or add "
                                 "--workers N / --scheduler ADDRESS to score --epd / --pgn files into a Parquet "
                                 "dataset directory", param_hint="--output")
    source = epd or pgn
    if output not in (None, "-") and source and source != "-" and os.path.exists(output) \
            and os.path.samefile(output, source):
        raise click.UsageError(f"--output {output} is the input file: it would be emptied before it is read")
    if output not in (None, "-") and source == "-" and os.path.exists(output):
        try:
            stdin, target = os.fstat(0), os.stat(output)
        except OSError:
            stdin = target = None
        if stdin is not None and (stdin.st_dev, stdin.st_ino) == (target.st_dev, target.st_ino):
            raise click.UsageError(f"--output {output} is the standard input file: it would be emptied before it "
                                   "is read")
    boards = []
    if positions or fen_opts:
        boards = _parse_position_args(positions, fen_opts, not lenient)
        if not boards:
            sys.exit(1)
    elif trace:
        boards = _epd_boards(epd, not lenient)
    if svg_path and len(boards) != 1:
        raise click.UsageError(f"--svg draws one position; {len(boards)} given")
    if svg_path:
        _check_output_dir(svg_path, "--svg")
    try:
        ev = Evaluator(_load_network(net))
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    as_json = as_json or (output or "").lower().endswith((".json", ".jsonl", ".ndjson"))  # the suffix says JSON
    fmt = "jsonl" if as_json else "csv"
    if output and output.endswith(".parquet") and (epd or pgn):
        if as_json:
            raise click.UsageError("--json and a .parquet --output exclude each other")
        fmt = "parquet"
    show = _show_progress(progress, quiet)
    out = _Output(output, parquet=fmt == "parquet")
    try:
        if boards:
            status = _eval_boards(ev, boards, trace, svg_path, as_json, empty_in_check, out)
        elif pgn:
            status = _score_pgn_file(ev, pgn, out, fmt, show, keep_errors, empty_in_check)
        else:
            status = _score_epd_file(ev, epd, out, fmt, show, not lenient, keep_errors, empty_in_check)
        out.close()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and not output:
            raise  # stdout's reader went away (| head): click ends quietly with status 1
        if exc.filename is None and not isinstance(exc, NnueError):  # the output failed, not an input
            raise click.ClickException(f"cannot write {out.path or 'to stdout'}: {exc.strerror or exc}") from exc
        raise click.ClickException(str(exc)) from exc
    finally:
        if out.path is not None and out.binary is not None and not out.binary.closed:
            try:
                out.binary.close()
            except OSError:
                pass  # already reported
    sys.exit(status)


def _parse_position_args(words, fen_opts, strict: bool) -> list:
    """Positions (text, board) of the arguments and --fen options; problems go to stderr and leave a ``None`` board."""
    from .errors import clip
    from .positions import Position, board_from_fen, parse_positions

    boards: list = []
    failed = False
    for fen in fen_opts:
        try:
            boards.append(Position(fen, board_from_fen(fen, strict)))
        except ValueError as exc:
            click.echo(f"error: --fen: {clip(str(exc))}", err=True)
            failed = True
    if words:
        try:
            boards += parse_positions(words, strict)
        except ValueError as exc:
            click.echo(f"error: {clip(str(exc))}", err=True)  # the message names the FEN or the move
            failed = True
    if failed:
        boards.append(None)  # exit status 1 after the others
    return boards


def _epd_boards(source: str, strict: bool) -> list:
    """Positions of an EPD file, one by one (for --trace); bad rows are reported and give status 1."""
    from .inputs import input_label, open_input
    from .positions import Position, board_from_fen

    label = input_label(source)
    boards: list = []
    try:
        with open_input(source, text=False) as inp:
            for rows in _epd_chunks(inp, label):
                for i in range(len(rows)):
                    fen = rows.fen[i] or ""
                    try:
                        board = board_from_fen(fen, strict)
                        problem = rows.problem(i)
                        if problem:
                            raise ValueError(problem)
                        boards.append(Position(fen, board))
                    except ValueError as exc:
                        _report(label, str(rows.line[i]), str(exc))
                        boards.append(None)
    except OSError as exc:
        raise click.ClickException(str(exc)) from exc
    return boards


def _eval_boards(ev, positions: list, trace: bool, svg_path: str | None, as_json: bool, empty_in_check: bool,
                 out: _Output) -> int:
    """One position at a time: text lines, JSON objects or Stockfish-style traces.

    The text line ends with White's value in pawns as Stockfish's ``NNUE evaluation`` line prints
    it (``value / units_per_pawn``, two decimals: +0.28), not the truncated centipawns / 100.
    """
    import chess
    import numpy as np

    from .errors import clip, quote
    from .output import encode
    from .score import outcome_code, value_columns

    status = 0
    for position in positions:
        if position is None:  # reported while parsing
            status = 1
            continue
        board = position.board
        fen = board.fen()
        try:
            if trace:
                t = ev.trace(board)
                if as_json:
                    out.write_text(json.dumps({"fen": fen, "bucket": t.bucket, "value": t.value, "psqt": t.psqt,
                                               "positional": t.positional,
                                               "piece_values": {chess.SQUARE_NAMES[s]: v
                                                                for s, v in t.piece_values.items()}}) + "\n")
                else:
                    out.write_text(t.format_stockfish() + "\n")
                if svg_path:
                    try:
                        Path(svg_path).write_text(t.svg(), encoding="utf-8")
                    except OSError as exc:
                        raise click.ClickException(f"cannot write --svg {svg_path}: {exc.strerror or exc}") from exc
                continue
            value = ev.evaluate(board)
        except ValueError as exc:
            click.echo(f"error: {quote(position.text)}: {clip(str(exc))}", err=True)
            status = 1
            continue
        check, outcome = board.is_check(), outcome_code(board)
        cols = value_columns(np.array([value]), np.array([board.turn == chess.BLACK]), np.array([check]),
                             np.array([outcome]), np.array([True]), ev.network.architecture.units_per_pawn,
                             empty_in_check)
        if as_json:
            from .output import TextColumn

            out.write_text(encode({"fen": TextColumn.from_strings([fen]), **cols}, "jsonl").decode())
            continue
        finished = {1: "\tcheckmate", 2: "\tstalemate"}.get(outcome, "")
        if check and empty_in_check:  # as Stockfish: "Final evaluation: none (in check)"
            out.write_text(f"{fen}\tvalue none (in check){finished}\n")
            continue
        flags = "\tin check" * (check and not finished) + finished
        cp = int(cols["cp"][0])
        pawns = (value if board.turn == chess.WHITE else -value) / ev.network.architecture.units_per_pawn
        out.write_text(f"{fen}\tvalue {value}\tcp {cp:+d} (side to move)\t{pawns:+.2f} (white side){flags}\n")
    return status


@cli.command(epilog=_example("nnue-infer info nn-ad9b42354671.nnue", "nnue-infer info --json sf.safetensors | jq .architecture"))
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@json_option("Print one JSON object (file, format, sha256, description, architecture, dimensions, hashes).")
def info(file, as_json):
    """Show a network file's format, architecture, dimensions, hashes and SHA-256.

    Dimensions are counts (features, neurons); the architecture's units_per_pawn is the
    number of internal units the network's value gives one pawn (361 for Stockfish 15.1).
    """
    import dataclasses
    import hashlib

    from . import load
    from .errors import NnueError
    from .formats import detect_format
    from .formats.stockfish import network_hashes

    try:
        fmt = detect_format(file)
        network = load(file)
    except NnueError as exc:
        raise click.ClickException(str(exc)) from exc
    arch = network.architecture
    sha = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    ft = {"features": int(network.ft_weights.shape[0]), "width": arch.ft_width, "dtype": str(network.ft_weights.dtype),
          "psqt_buckets": arch.psqt_buckets, "psqt_dtype": str(network.psqt_weights.dtype)}
    layers = [{"outputs": l.outputs, "activation": l.activation, "dtype": str(w.dtype)}
              for l, w in zip(arch.layers, network.layer_weights)]
    hashes = None
    if fmt == "stockfish":
        l1 = arch.ft_width
        net_h, ft_h, stack_h = network_hashes(arch)
        hashes = {"network": f"0x{net_h:08X}", "feature_transformer": f"0x{ft_h:08X}", "layer_stack": f"0x{stack_h:08X}"}
    if as_json:
        click.echo(json.dumps({"file": file, "format": fmt, "sha256": sha, "description": network.description,
                               "summary": repr(network), "architecture": json.loads(arch.to_json()),
                               "feature_transformer": ft, "layers": layers, "hashes": hashes}))
        return
    click.echo(f"file:          {file}")
    click.echo(f"format:        {fmt}")
    click.echo(f"sha256:        {sha}")
    click.echo(f"description:   {network.description.encode('utf-8', 'backslashreplace').decode()}")
    click.echo(f"architecture:  {network!r}")
    for key, value in dataclasses.asdict(arch).items():
        click.echo(f"  {key}: {value}")
    click.echo(f"feature transformer: {ft['features']} features -> {arch.ft_width} {ft['dtype']} "
               f"(+{arch.psqt_buckets} PSQT {ft['psqt_dtype']}) per perspective")
    click.echo("dense layers:  " + ", ".join(f"{l['outputs']} {l['activation']} ({l['dtype']})" for l in layers))
    if hashes:
        click.echo(f"hashes:        network {hashes['network']}, feature transformer {hashes['feature_transformer']}, "
                   f"layer stack {hashes['layer_stack']}")


@cli.command(epilog=_example("nnue-infer extract /usr/games/stockfish            (writes nn-ad9b42354671.nnue here)",
                             "nnue-infer extract /usr/games/stockfish -o sf15.nnue",
                             "nnue-infer extract --list ~/.cache/nnue-infer/npm/stockfish-17.1.0.tgz",
                             "nnue-infer extract stockfish-17.1.0.tgz -o nets/   (every net, under its own name)"))
@click.argument("source", type=click.Path(exists=True))
@click.option("-o", "--output", type=click.Path(), help="Where to write the network: a file (named nn-<12 hex>.nnue "
              "to pick one of several) or a directory (every network, under its name).  Default: the current directory.")
@click.option("--list", "list_only", is_flag=True, help="Only list the networks found (name, size, SHA-256, where, "
              "which known Stockfish net it is).")
@quiet_option
def extract(source, output, list_only, quiet):
    """Extract the Stockfish networks embedded in SOURCE: an engine binary (e.g. /usr/games/stockfish),
    a .wasm (the first part of a split one brings the others), an npm tarball (stockfish-17.1.0.tgz)
    or an unpacked package directory."""
    from .errors import NnueError
    from .extract import extract_network, find_networks, write_networks
    from .registry import known_by_sha256

    if output == "-":
        raise click.BadParameter("a network is binary: give a file name", param_hint="--output")
    try:
        if list_only:
            found = find_networks(source)
            if not found:
                raise click.ClickException(f"{source}: no embedded Stockfish network found")
            for f in found:
                known = ", ".join(f"{k.spec} (Stockfish {k.version} {k.role})" for k in known_by_sha256(f.sha256))
                click.echo(f"{f.name}\t{f.size} bytes\tsha256 {f.sha256}\t{f.source} @ {f.offset}"
                           + (f"\t{known}" if known else ""))
            return
        target = output or "."
        if target.endswith(("/", os.sep)) and not os.path.isdir(target):  # "nets/" names a directory: make it
            _check_output_dir(target.rstrip("/" + os.sep) or target, "-o")
            os.mkdir(target)
        if not os.path.isdir(target):
            _check_output_dir(target, "-o")
            digests = [extract_network(source, target)]
            names = [target]
        else:
            written = write_networks(find_networks(source), target)
            if not written:
                raise click.ClickException(f"{source}: no embedded Stockfish network found")
            digests = [f.sha256 for f in written]
            names = [os.path.join(target, f.name) for f in written]
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not quiet:
        for name, digest in zip(names, digests):
            canonical = f"nn-{digest[:12]}.nnue"  # Stockfish's name for it, when the file is called otherwise
            alias = f", {canonical}" if os.path.basename(name) != canonical else ""
            click.echo(f"wrote {name} (sha256 {digest}{alias})")


@cli.command(epilog=_example("nnue-infer fetch sf17.1-small"))
@click.argument("spec")
def fetch(spec):
    """Download (npm pack stockfish@V into the cache) and extract a known Stockfish network SPEC:
    sf16, sf17.1, sf17.1-small, sf17.1-lite, sf18, sf18-small, sf18-lite, sf19, sf19-lite."""
    from .errors import NnueError
    from .registry import known_by_spec
    from .resources import known_network_path

    known = known_by_spec(spec)
    try:
        path = known_network_path(spec, fetch=True)
    except NnueError as exc:
        raise click.ClickException(str(exc)) from exc
    assert known is not None
    click.echo(f"{path} (Stockfish {known.version} {known.role} net, {known.size} bytes, sha256 {known.sha256})")


@cli.command(epilog=_example("nnue-infer datagen -o positions.npz -n 100000 --seed 1 --games games.jsonl "
                             "--exclude corpus.jsonl"))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Positions file to write (.npz).")
@click.option("-n", "--count", "n", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Number of distinct positions to generate.")
@click.option("--positions", "n_deprecated", type=click.IntRange(min=1), hidden=True,
              help="Deprecated name of --count.")
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
@threads_option
@progress_option
@quiet_option
def datagen(output, n, n_deprecated, seed, games, exclude, teacher, holdout_fraction, perturbation_fraction, threads,
            progress, quiet):
    """Generate labelled training positions for distillation (see nnue_infer.datagen for the file format).

    Labels are the teacher's values in internal units, side to move's point of view (Stockfish
    15.1: 361 = one pawn).  Prints a JSON summary of the file on stdout.
    """
    from . import datagen as D

    if n_deprecated is not None:
        click.echo("warning: --positions is deprecated; use -n/--count", err=True)
        n = n_deprecated
    _threads(threads)
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
                                               perturbation_fraction=perturbation_fraction),
                          progress=_show_progress(progress, quiet))
        D.save(output, data)
    except (NnueError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps({"output": output, **D.summary(data), "meta": json.loads(str(data["meta"]))}, indent=1))


@cli.command(epilog=_example("nnue-infer train positions.npz -o run/ --epochs 10 --eval-positions corpus.jsonl",
                             "nnue-infer train a.npz b.npz -o run/ --arch stockfish-15.1 --threads 2"))
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
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Threads for PyTorch and the compiled kernels.")
@click.option("--eval-positions", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Corpus (JSONL with fen and raw.value) to measure the quantised network against the teacher.")
@click.option("--resume", is_flag=True, help="Continue from OUTPUT/checkpoint.pt.")
@progress_option
@quiet_option
def train(data, out_dir, arch, ft_width, epochs, batch_size, lr, lr_final, val_fraction, sigmoid_scale, seed, threads,
          eval_positions, resume, progress, quiet):
    """Distil: train a float network on positions files (nnue-infer datagen), quantise it, check it.

    Several DATA files are concatenated in order.  The loss compares win probabilities
    sigmoid(cp / S) of the network's and the teacher's values in centipawns (S: --sigmoid-scale);
    the summary's errors are in centipawns.

    Needs the 'train' extra (PyTorch, matplotlib): pip install 'nnue-infer[train]'.
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
        summary = T.run(list(data), out_dir, architecture, config, eval_positions, resume, progress=_show_progress(progress, quiet),
                        log=(lambda m: None) if quiet else (lambda m: click.echo(m, err=True)))
    except (NnueError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps({k: summary[k] for k in ("network", "network_bytes", "train_seconds", "final",
                                                   "crosscheck_float_vs_quantised", "quantisation")
                           } | ({"accuracy": summary["accuracy"]} if "accuracy" in summary else {}), indent=1))


@cli.command(epilog=_example("nnue-infer convert nn-ad9b42354671.nnue sf.safetensors", "nnue-infer convert sf.safetensors sf.nnue"))
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["stockfish", "safetensors"]),
              help="Output format (default: from DEST's extension, .nnue or .safetensors).")
@quiet_option
def convert(source, dest, fmt, quiet):
    """Convert a network between Stockfish 15.1's .nnue format and the native .safetensors format (lossless).

    Prints the source and destination formats, DEST's size in bytes and its SHA-256.
    """
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
    if not quiet:
        sha = hashlib.sha256(Path(dest).read_bytes()).hexdigest()
        click.echo(f"{source} ({detect_format(source)}) -> {dest} ({fmt}), {Path(dest).stat().st_size} bytes, sha256 {sha}")


@cli.command(epilog=_example("nnue-infer quantise float.safetensors net.safetensors",
                             "nnue-infer quantise float.safetensors net.nnue --scheme qa255-qb64 --strict"))
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--scheme", type=click.Choice(["stockfish", "qa255-qb64"]), default="stockfish", show_default=True,
              help="Integer scales: stockfish = QA 127 (shift 7 for pairwise), QB 64; qa255-qb64 = QA 255 (shift 9).")
@click.option("--qa", type=int, help="Override QA (the feature transformer's integer scale: QA = 1.0).")
@click.option("--shift", type=int, help="Override the feature-transformer shift in bits (default: smallest keeping "
              "outputs <= 127).")
@click.option("--strict", is_flag=True, help="Fail instead of saturating parameters that do not fit.")
@click.option("--format", "fmt", type=click.Choice(["stockfish", "safetensors"]), help="Output format (default: from DEST).")
@quiet_option
def quantise(source, dest, scheme, qa, shift, strict, fmt, quiet):
    """Quantise a float network (native .safetensors, kind float) and write it; prints what was clipped.

    Values keep the float network's units: output_units internal units per 1.0 of float output
    (units_per_pawn of them make a pawn).
    """
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
    if not quiet:
        click.echo(str(report))
        click.echo(f"wrote {dest}")


@cli.command(epilog=_example("nnue-infer crosscheck --float float.safetensors --quantised net.safetensors "
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
    from .crosscheck import crosscheck as run, plot_histogram, read_positions
    from .errors import NnueError
    from .float_network import FloatNetwork
    from .formats import load
    from .quantise import dequantise

    _threads(threads)
    if plot:
        _check_output_dir(plot, "--plot")  # before the work, not after it
        from .plotting import pyplot

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
        result = run(fnet, qnet, fens, progress=_show_progress(progress, quiet))
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


def _show_error(exc: click.ClickException) -> None:
    """Print ``exc`` as every message of this program starts: ``error: ...`` (usage errors after
    the usage line and the --help hint, as click prints them, whose own prefix is ``Error:``)."""
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        hint = ""
        if exc.ctx.command.get_help_option(exc.ctx) is not None:
            hint = f"Try '{exc.ctx.command_path} {exc.ctx.help_option_names[0]}' for help.\n"
        click.echo(f"{exc.ctx.get_usage()}\n{hint}", err=True)
    click.echo(f"error: {exc.format_message()}", err=True)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    try:
        cli.main(args=argv, prog_name="nnue-infer", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        _show_error(exc)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
