"""``nnue-infer eval``: positions from arguments, EPD files or PGN games, one process or a Dask cluster."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .common import (Output, check_output_dir, example, json_option, load_network, output_option, progress_bar,
                     progress_option, quiet_option, report, set_threads, show_progress, threads_option)


#: Most local worker processes ``eval --workers`` starts per core this process may use (``io.distributed.usable_cpus``; at
#: least 8 in all): every worker is a process holding the network (Stockfish 15.1's: 46 MB of parameters), and a
#: larger count is more likely a slip of the finger (``--workers 100000`` started as many processes) than a cluster one machine holds.
MAX_LOCAL_WORKERS_PER_CORE = 4


def _eval_distributed(epd_files, pgn_files, output, net, scheduler, workers, progress, quiet) -> int:
    """``eval --epd/--pgn PATTERN ... --output DIR --scheduler ADDRESS | --workers N``: a Dask job over every
    ``--epd`` / ``--pgn`` file or glob pattern given (lists of str).  The job reads each file by its name's
    kind (:func:`nnue_infer.io.distributed.input_kind`): a file given to the option of another kind is a
    usage error (it was read as its name's kind, silently)."""
    inputs = [*epd_files, *pgn_files]
    if not inputs or output in (None, "-"):
        raise click.UsageError("--scheduler / --workers score --epd / --pgn files into a Parquet dataset "
                               "directory: give --epd or --pgn and --output DIR")
    if scheduler and workers:
        raise click.UsageError("give one of --scheduler and --workers")
    from ..io.distributed import usable_cpus

    most = max(MAX_LOCAL_WORKERS_PER_CORE * usable_cpus(), 8)
    if workers and workers > most:
        raise click.BadParameter(f"{workers} local worker processes is more than {most} ({MAX_LOCAL_WORKERS_PER_CORE} "
                                 f"per core this process may use, each with its own copy of the network): for a larger "
                                 "cluster start one with Dask (dask scheduler, dask worker) and give --scheduler",
                                 param_hint="'--workers'")
    try:
        import distributed  # noqa: F401  (the dask extra; imported lazily by run_job otherwise)

        from ..io.distributed import expand_inputs, input_kind, run_job
    except ImportError as exc:
        raise click.ClickException(f"{exc}; --scheduler / --workers need the dask extra: "
                                   "pip install 'nnue-infer[dask]'") from exc
    for option, patterns in (("--epd", epd_files), ("--pgn", pgn_files)):
        if "-" in patterns and not os.path.exists("-"):
            raise click.UsageError(f"{option} -: a Dask job's workers read files by name, not the standard input: "
                                   "write it to a file, or score it in process, without --workers / --scheduler")
        try:
            files = expand_inputs(patterns, output) if patterns else []  # (not the dataset's own files)
            kinds = {f: input_kind(f) for f in files}
        except (OSError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
        for f, kind in kinds.items():
            if (kind == "pgn") != (option == "--pgn"):
                raise click.UsageError(
                    f"{option} {f}: a Dask job reads each file by its name's kind, and this one's is {kind} "
                    f"({'give it with --pgn' if kind == 'pgn' else 'a PGN file needs a .pgn name, .gz / .zst allowed'}"
                    "; or score it in process, without --workers / --scheduler)")
    try:
        return run_job(inputs, output, net or "default", scheduler=scheduler,
                       workers=workers, progress=show_progress(progress, quiet),
                       log=lambda m: None if quiet else click.echo(m, err=True))
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _score_file(ev, kind: str, source: str, out: Output, fmt: str, show: bool, **options) -> int:
    """Score an EPD or PGN file (:mod:`nnue_infer.io.score`) with a progress bar; 1 if any row failed."""
    from ..io import score as scoring

    try:
        writer = scoring.table_writer(fmt, out.binary, out.path)
    except ImportError as exc:
        raise click.ClickException(str(exc)) from exc
    with progress_bar(None, "pos" if kind == "epd" else "game", show) as bar:
        positions = 0

        def on_error(where: str, message: str) -> None:
            if sys.stderr is not None:  # closed (2>&-): the status still says so
                bar.write(f"error: {where}: {message}", file=sys.stderr)

        def on_progress(rows: int, games: int) -> None:
            nonlocal positions
            if kind == "epd":
                bar.update(rows)
                return
            positions += rows
            bar.set_postfix_str(f"{positions} positions", refresh=False)
            bar.update(games)

        score = scoring.score_epd_file if kind == "epd" else scoring.score_pgn_file
        failed = score(ev, source, writer, on_error=on_error, on_progress=on_progress, **options)
    return int(failed > 0)


@click.command("eval", epilog=example(
    'nnue-infer eval "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"',
    "nnue-infer eval startpos moves e4 e5 Nf3          (UCI or SAN moves)",
    "nnue-infer eval --net stockfish --trace --svg trace.svg startpos",
    "nnue-infer eval --moves startpos moves e4 e5         (every legal move, best first)",
    "nnue-infer eval --epd positions.epd.gz -o scores.csv --keep-errors",
    "zcat games.pgn.gz | nnue-infer eval --pgn - --json > plies.jsonl"))
@click.argument("positions", nargs=-1)
@click.option("--net", help="Network: a file (.nnue or .safetensors) or a name: 'default' (the bundled network, "
              "used when --net is not given), 'stockfish' (Stockfish 15.1's net from Debian's stockfish package), "
              "or a known Stockfish net, sf16 ... sf19-lite (the list: nnue-infer fetch --help).")
@click.option("--fen", "fen_opts", multiple=True, help="A position in FEN (may be repeated).")
@click.option("--epd", type=click.Path(dir_okay=False, allow_dash=True), multiple=True,
              help="File with one FEN/EPD per line ('-': stdin; gzip/zstd read directly): batch evaluation on all "
              "cores; rows: line,fen,value,cp,cp_white,in_check,outcome, then one column per EPD operation (id, bm, ...).")
@click.option("--pgn", type=click.Path(dir_okay=False, allow_dash=True), multiple=True,
              help="PGN file ('-': stdin; gzip/zstd read directly): every position of every game's mainline; rows: "
              "game,event,site,date,round,white,black,result,ply,san,uci,fen,value,cp,cp_white,in_check,outcome.")
@click.option("--scheduler", metavar="ADDRESS", help="Score --epd/--pgn files (glob patterns allowed) on the Dask "
              "cluster whose scheduler is ADDRESS (tcp://host:8786) into the Parquet dataset directory --output "
              "(needs the dask extra; see nnue_infer.io.distributed).")
@click.option("--workers", type=click.IntRange(min=1), help="As --scheduler, on a local cluster of N worker processes.")
@click.option("--lenient", is_flag=True, help="Read FENs as python-chess does (missing side to move = White, missing "
              "castling = none); by default a FEN lacking a field is an error naming it.")
@click.option("--keep-errors", is_flag=True, help="Write rows that cannot be scored too, with null values and an "
              "'error' column (default: report them on stderr only).")
@click.option("--empty-in-check", is_flag=True, help="Leave value, cp and cp_white empty when the side to move is in "
              "check, as Stockfish prints no NNUE evaluation there.")
@click.option("--trace", is_flag=True, help="Print the network's Stockfish version's eval text for the NNUE (piece "
              "values, bucket table, NNUE line; 17.1-19: the Final evaluation line); with --json also 'final' "
              "(Stockfish's static evaluation, internal units, side to move; null for 15.1/16) and 'wdl' (win, draw, "
              "loss per mille of it, or of the value for 15.1/16, as that version's UCI_ShowWDL prints them).")
@click.option("--moves", "each_move", is_flag=True, help="For each position, every legal move and the value of the "
              "position after it (Evaluator.evaluate_moves), best first for the side to move: SAN, UCI, value (the "
              "child's side to move, as eval prints the child), cp of the side that moves, White's view in pawns; with "
              "--json: value, cp (the child's side to move, as eval's rows), cp_mover, cp_white.")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False),
              help="With --trace and one position: also draw the board with each piece's value and the bucket "
              "table into this SVG file.")
@click.option("--activations", is_flag=True,
              help="Write every intermediate array of the positions (arguments, --fen or --epd) to --output FILE.npz or "
              "FILE.parquet, one row per position with its FEN: accumulator, psqt, ft_output, bucket, fc_0, "
              "fc_0_activated, ..., output, positional, value (Evaluator.activations_batch).")
@click.option("--all-buckets", is_flag=True, help="With --activations: the layers of every layer stack, not only "
              "the position's own.")
@json_option("JSON lines instead of text (positions) or CSV (files); numbers are JSON numbers.")
@output_option("Write the results to this file ('-': stdout, the default): CSV, JSON lines for a .json / .jsonl "
               "name (as --json), Parquet for .parquet; with --workers / --scheduler, the Parquet dataset "
               "directory.", dir_okay=True)  # a directory otherwise: eval names the mistake
@threads_option
@click.option("-j", "--jobs", type=click.IntRange(min=1), hidden=True, help="Deprecated name of --threads.")
@progress_option
@quiet_option
def eval_cmd(positions, net, fen_opts, epd, pgn, scheduler, workers, lenient, keep_errors, empty_in_check, trace, each_move,
             svg_path, activations, all_buckets, as_json, output, threads, jobs, progress, quiet):
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
    from ..errors import InputKindError, NnueError
    from ..evaluator import Evaluator

    if jobs is not None:
        if threads is not None:
            raise click.UsageError("give --threads only (--jobs is its deprecated name)")
        if not quiet:
            click.echo("warning: --jobs is deprecated; use --threads", err=True)
        threads = jobs
    if not (scheduler or workers):  # one file in process; a Dask job takes several (and glob patterns)
        for option, paths in (("--epd", epd), ("--pgn", pgn)):
            if len(paths) > 1:
                raise click.UsageError(f"{option} given {len(paths)} times ({', '.join(paths)}): one file at a time "
                                       f"here; --workers N / --scheduler ADDRESS score several into one dataset")
    if scheduler or workers:
        epd_files, pgn_files = list(epd), list(pgn)
    epd, pgn = (epd[0] if epd else None), (pgn[0] if pgn else None)
    if (epd or pgn) and (positions or fen_opts):
        raise click.UsageError("give positions (arguments, --fen) or a file (--epd / --pgn), not both")
    if epd and pgn and not (scheduler or workers):  # a Dask job takes both (each file by its name's kind)
        raise click.UsageError("give one of --epd and --pgn (a Dask job, --workers / --scheduler, takes both)")
    if pgn and trace:
        raise click.UsageError("--trace works with positions and --epd, not --pgn")
    if svg_path and not trace:
        raise click.UsageError("--svg draws a trace: add --trace")
    if each_move and (epd or pgn or trace):
        raise click.UsageError("--moves works with positions (arguments, --fen), not with --epd, --pgn or --trace")
    if all_buckets and not activations:
        raise click.UsageError("--all-buckets goes with --activations")
    if activations and (trace or each_move or pgn or scheduler or workers or as_json):
        raise click.UsageError("--activations works with positions and --epd, without --trace, --moves, --pgn, --json, "
                               "--scheduler or --workers")
    if activations and keep_errors:
        raise click.UsageError("--keep-errors does not go with --activations: its arrays have no row for a refused "
                               "position (the refused ones are reported on stderr, the others written)")
    if activations and not (output or "").lower().endswith((".npz", ".parquet")):
        raise click.UsageError("--activations writes a file: give --output FILE.npz or FILE.parquet")
    if activations and output.lower().endswith(".parquet"):
        from ..io.parquet import _pa

        try:
            _pa()  # before the network is loaded and the kernels compiled
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
    if not (positions or fen_opts or epd or pgn):
        raise click.UsageError("give a position: FEN arguments, startpos [moves ...], --fen FEN, --epd FILE or --pgn FILE")
    if scheduler or workers:
        dropped = [name for name, given in (("--lenient", lenient), ("--keep-errors", keep_errors),
                                            ("--empty-in-check", empty_in_check), ("--json", as_json),
                                            ("--threads", threads), ("--trace", trace)) if given]
        if dropped:  # the Dask job reads FENs strictly, writes every row's value and bad rows to its errors
            # table, as Parquet, one thread per worker: these options would be silently ignored
            raise click.UsageError(f"{', '.join(dropped)}: not with --scheduler / --workers (a Dask job reads FENs "
                                   "strictly, writes a Parquet dataset with the bad rows in its errors table and "
                                   "runs one thread per worker)")
        sys.exit(_eval_distributed(epd_files, pgn_files, output, net, scheduler, workers, progress, quiet))
    for option, path in (("--epd", epd), ("--pgn", pgn)):
        if path and path != "-" and not os.path.exists(path):
            pattern = _pattern_hint(path)
            raise click.BadParameter(f"File {path!r} does not exist" + (f": {pattern}." if pattern else "."),
                                     param_hint=f"'{option}'")
    set_threads(threads, "--threads" if jobs is None else "--jobs")
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
    from_file = not (positions or fen_opts)  # positions of an EPD file: their FENs as the lines write them
    if positions or fen_opts:
        boards = _parse_position_args(positions, fen_opts, not lenient)
        if not boards:
            sys.exit(1)
    elif trace or activations:
        boards = _epd_boards(epd, not lenient)
    if boards and all(b is None for b in boards):  # every position refused (reported): nothing is written, an
        sys.exit(1)  # existing -o FILE is left as it was (it was emptied)
    if svg_path and len(boards) != 1:
        raise click.UsageError(f"--svg draws one position; {len(boards)} given")
    if svg_path:
        check_output_dir(svg_path, "--svg")
    try:
        ev = Evaluator(load_network(net))
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if activations:
        check_output_dir(output, "--output")
        sys.exit(_write_activations(ev, boards, output, all_buckets, as_written=from_file))
    as_json = as_json or (output or "").lower().endswith((".json", ".jsonl", ".ndjson"))  # the suffix says JSON
    fmt = "jsonl" if as_json else "csv"
    if output and output.endswith(".parquet") and (epd or pgn):
        if as_json:
            raise click.UsageError("--json and a .parquet --output exclude each other")
        fmt = "parquet"
    show = show_progress(progress, quiet)
    out = Output(output, parquet=fmt == "parquet")
    try:
        if boards and each_move:
            status = _eval_moves(ev, boards, as_json, out)
        elif boards:
            status = _eval_boards(ev, boards, trace, svg_path, as_json, empty_in_check, out, as_written=from_file)
        elif pgn:
            status = _score_file(ev, "pgn", pgn, out, fmt, show, keep_errors=keep_errors,
                                 empty_in_check=empty_in_check)
        else:
            status = _score_file(ev, "epd", epd, out, fmt, show, strict=not lenient, keep_errors=keep_errors,
                                 empty_in_check=empty_in_check)
        out.close()
    except InputKindError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and out.path is None:
            raise  # stdout's reader went away (| head): the command group ends quietly (cli.main._Group)
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


def _pattern_hint(path: str) -> str:
    """For a file name that does not exist: what to do when it is a glob pattern (expanded only by a Dask job,
    :func:`nnue_infer.io.distributed.expand_inputs`), else ``""``."""
    import glob

    if not glob.has_magic(path):
        return ""
    return ("a glob pattern is expanded only by a Dask job (--epd / --pgn PATTERN with --workers N or --scheduler "
            "ADDRESS, and --output DIR), or by the shell when unquoted (here --epd / --pgn take one file)")


def _file_hint(words) -> str:
    """For position arguments that do not parse: the end of the message when one of them names a file, or looks
    like a file name or a glob pattern (an input given without --epd / --pgn), else ``""``."""
    from ..io.distributed import input_kind

    for word in words:
        if os.path.isfile(word):
            return f"; {word!r} is a file: give it with --epd FILE (positions) or --pgn FILE (games)"
        try:
            input_kind(word)
        except ValueError:  # (a FEN has '/' too: a word is a path when the directory before its last '/' exists)
            if not (os.sep in word and " " not in word and os.path.isdir(os.path.dirname(word))):
                continue
        pattern = _pattern_hint(word)
        return (f"; no file {word!r} exists" + (f": {pattern}" if pattern else "")
                + "; a file goes with --epd FILE (positions) or --pgn FILE (games)")
    return ""


def _parse_position_args(words, fen_opts, strict: bool) -> list:
    """Positions (text, board) of the arguments and --fen options; problems go to stderr and leave a ``None`` board."""
    from ..errors import clip
    from ..positions import Position, board_from_fen, parse_positions

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
        except ValueError as exc:  # the message names the FEN or the move (and the file a word may name)
            click.echo(f"error: {clip(str(exc))}{_file_hint(words)}", err=True)
            failed = True
    if failed:
        boards.append(None)  # exit status 1 after the others
    return boards


def _epd_boards(source: str, strict: bool) -> list:
    """Positions of an EPD file, one by one (for --trace and --activations); bad rows, and positions the
    networks cannot represent (``features.check_position``), are reported as ``FILE:LINE: message``
    and give status 1 after the others."""
    from ..errors import InputKindError
    from ..features import check_position
    from ..inputs import input_label, open_input
    from ..io.score import epd_chunks
    from ..positions import Position, board_from_fen

    label = input_label(source)
    boards: list = []
    try:
        with open_input(source, text=False) as inp:
            for rows in epd_chunks(inp.binary, label):
                for i in range(len(rows)):
                    fen = rows.fen[i] or ""
                    try:
                        board = board_from_fen(fen, strict)
                        problem = rows.problem(i)
                        if problem:
                            raise ValueError(problem)
                        check_position(board)
                        boards.append(Position(fen, board))
                    except ValueError as exc:
                        report(label, str(rows.line[i]), str(exc))
                        boards.append(None)
    except (OSError, InputKindError) as exc:
        raise click.ClickException(str(exc)) from exc
    return boards


def _write_activations(ev, positions: list, output: str, all_buckets: bool, as_written: bool = False) -> int:
    """``--activations``: the positions' arrays (:meth:`Evaluator.activations_batch`) with a ``fen``
    column, as NumPy's .npz or Parquet; status 1 if a position was refused while parsing.

    The ``fen`` column is python-chess's FEN of each position, or with ``as_written`` (an EPD file) the
    FEN as its line gives it, as ``eval --epd`` writes it (python-chess's added `` 0 1`` to a FEN without
    the move counters)."""
    import numpy as np

    from ..errors import clip

    kept = [p for p in positions if p is not None]
    boards = [p.board for p in kept]
    try:
        acts = ev.activations_batch(boards, "all" if all_buckets else "used")
    except ValueError as exc:
        raise click.ClickException(clip(str(exc))) from exc
    from ..inputs import replacing

    fens = [p.text if as_written else p.board.fen() for p in kept]
    try:
        if output.lower().endswith(".npz"):
            with replacing(output) as path, open(path, "wb") as f:  # np.savez would append .npz to another name
                np.savez(f, fen=np.array(fens), **acts.to_dict())
        else:
            import pyarrow as pa

            from ..io.parquet import write_table

            write_table(acts.to_arrow().add_column(0, "fen", pa.array(fens)), output)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from exc
    return 0 if len(boards) == len(positions) else 1


def _eval_boards(ev, positions: list, trace: bool, svg_path: str | None, as_json: bool, empty_in_check: bool,
                 out: Output, as_written: bool = False) -> int:
    """One position at a time: text lines, JSON objects or Stockfish-style traces.

    The FEN shown is python-chess's, or with ``as_written`` (an EPD file's positions) the line's own, as
    ``eval --epd`` writes it.

    The text line ends with White's value in pawns as the network's Stockfish version's ``NNUE
    evaluation`` line prints it (``normalisation.white_side_pawns``: ``value / units_per_pawn``
    for 15.1 and 16, the material-dependent centipawns / 100 for 17.1-19), never ``-0.00``.
    """
    import chess
    import numpy as np

    from ..errors import clip, quote
    from ..io.output import encode
    from ..io.score import outcome_code, value_columns

    status = 0
    for position in positions:
        if position is None:  # reported while parsing
            status = 1
            continue
        board = position.board
        fen = position.text if as_written else board.fen()
        try:
            if trace:
                t = ev.trace(board)
                if as_json:
                    out.write_text(json.dumps({"fen": fen, "bucket": t.bucket, "value": t.value, "psqt": t.psqt,
                                               "positional": t.positional, "final": t.final, "wdl": list(t.wdl),
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
            from ..io.output import TextColumn

            out.write_text(encode({"fen": TextColumn.from_strings([fen]), **cols}, "jsonl").decode())
            continue
        finished = {1: "\tcheckmate", 2: "\tstalemate"}.get(outcome, "")
        if check and empty_in_check:  # as Stockfish: "Final evaluation: none (in check)"
            out.write_text(f"{fen}\tvalue none (in check){finished}\n")
            continue
        flags = "\tin check" * (check and not finished) + finished
        cp = int(cols["cp"][0])
        pawns = _white_side(value if board.turn == chess.WHITE else -value, ev.network.architecture, board)
        out.write_text(f"{fen}\tvalue {value}\tcp {cp:+d} (side to move)\t{pawns} (white side){flags}\n")
    return status


def _white_side(value_white: int, arch, board) -> str:
    """The last figure of a text line: White's view in pawns as the ``NNUE evaluation ... (white
    side)`` line of ``arch.stockfish_version``'s ``eval`` prints it for ``board``
    (``normalisation.white_side_pawns``), ``%+.2f``, never ``-0.00`` (15.1 and 16 print one)."""
    from ..normalisation import material, white_side_pawns

    text = f"{white_side_pawns(value_white, arch.stockfish_version, material(board), arch.units_per_pawn):+.2f}"
    return "+0.00" if text == "-0.00" else text


def _eval_moves(ev, positions: list, as_json: bool, out: Output) -> int:
    """``eval --moves``: per position a header line, then each legal move and its child's value, best first.

    Text: ``SAN  UCI  value V  cp +C (mover)  +P.PP (white side)``, where ``V`` is the child's value
    (side to move there: the opponent), ``C`` the centipawns of the side that moves and ``P`` White's
    view in pawns as the net's Stockfish version prints it (:func:`_white_side`).  JSON: one object per move with ``fen`` (the parent), ``move``, ``san``, ``value``,
    ``cp`` (the child's side to move, as eval's rows), ``cp_mover`` (the side that moves: the text's ``cp``)
    and ``cp_white``.
    """
    import chess

    from ..errors import clip, quote
    from ..normalisation import tdiv

    per_pawn = ev.network.architecture.units_per_pawn
    status = int(None in positions)  # a position that did not parse was reported then
    for position in filter(None, positions):
        board, fen = position.board, position.board.fen()
        try:
            values = ev.evaluate_moves(board).tolist()
        except ValueError as exc:
            click.echo(f"error: {quote(position.text)}: {clip(str(exc))}", err=True)
            status = 1
            continue
        moves = list(board.legal_moves)
        order = sorted(range(len(moves)), key=lambda i: values[i])  # lowest child value: best for the mover
        white_sign = -1 if board.turn == chess.WHITE else 1  # the children's side to move is the opponent
        if not as_json:
            side = "White" if board.turn == chess.WHITE else "Black"
            ending = " (checkmate)" if board.is_checkmate() else " (stalemate)" if not moves else ""
            best = f", best first for {side}" if moves else ""
            out.write_text(f"{fen}\t{len(moves)} legal moves{ending}{best}\n")
        for i in order:
            move, value = moves[i], values[i]
            cp = tdiv(100 * value, per_pawn)
            if as_json:
                out.write_text(json.dumps({"fen": fen, "move": move.uci(), "san": board.san(move), "value": value,
                                           "cp": cp, "cp_mover": -cp, "cp_white": white_sign * cp}) + "\n")
            else:
                child = board.copy(stack=False)
                child.push(move)
                out.write_text(f"{board.san(move)}\t{move.uci()}\tvalue {value}\tcp {-cp:+d} (mover)\t"
                               f"{_white_side(white_sign * value, ev.network.architecture, child)} (white side)\n")
    return status
