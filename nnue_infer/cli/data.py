"""``nnue-infer data``: Stockfish training data (.binpack, .bin, .plain, .parquet) converted,
rescored with any network, summarised and filtered (:mod:`nnue_infer.io.training_data`)."""

from __future__ import annotations

import collections
import contextlib
import errno
import json
import sys
from collections.abc import Callable, Iterator

import click

from .common import (
    example,
    json_option,
    load_network,
    progress_bar,
    progress_option,
    quiet_option,
    set_threads,
    show_progress,
    threads_option,
)

KIND = click.Choice(("binpack", "bin", "plain", "parquet"))


def _source(f):
    f = click.option("--from", "src_kind", type=KIND,
                     help="Input kind when the extension does not tell it (needed for '-').")(f)
    return click.argument("src", type=click.Path(dir_okay=False, allow_dash=True))(f)


def _destination(f):
    f = click.option("--to", "dst_kind", type=KIND, help="Output kind when the extension does not tell it (needed "
                     "for '-'); a .gz / .zst suffix compresses.")(f)
    return click.argument("dst", type=click.Path(dir_okay=False, allow_dash=True))(f)


@contextlib.contextmanager
def _reported(src: str) -> Iterator[None]:
    """Training-data, input and file errors as ``error: ...`` messages (status 1); an unknown kind
    as a usage error (status 2)."""
    from ..errors import InputError, TrainingDataError
    from ..io.training_data import KindError

    try:
        yield
    except (TrainingDataError, InputError) as exc:
        raise click.ClickException(str(exc)) from exc
    except KindError as exc:  # a kind that the extension does not tell
        raise click.UsageError(str(exc)) from exc
    except ImportError as exc:  # an optional dependency (pyarrow for .parquet)
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        if exc.errno == errno.EPIPE and exc.filename == "<stdout>":
            raise  # standard output's reader went away (| head): the command group ends quietly (cli.main._Group)
        raise click.ClickException(f"{exc.filename or src}: {exc.strerror or exc}") from exc


def _pipe(src: str, dst: str, src_kind: str | None, dst_kind: str | None, show: bool,
          transform: Callable | None = None) -> tuple[int, int]:
    """Stream ``src`` to ``dst`` chunk by chunk through ``transform`` (rows, index of the chunk's
    first row -> rows, or (rows, each one's index in the chunk)); returns (rows read, rows written).
    A row the output cannot hold is reported where it is in ``src`` (line, record or row), the
    problem being the row's, not the output file's.  On an error ``dst`` is left as it was."""
    from ..errors import TrainingDataError
    from ..io import training_data as td

    read = written = 0
    recent: collections.deque = collections.deque(maxlen=3)  # (first row written, rows, index, origins)
    with _reported(src):
        try:
            with td.TrainingDataWriter(dst, dst_kind) as writer, progress_bar(None, "pos", show) as bar:
                for chunk, origins in td.iter_chunks(src, src_kind, with_origins=True):
                    out = transform(chunk, read) if transform is not None else chunk
                    out, index = out if isinstance(out, tuple) else (out, None)
                    recent.append((written, len(out), index, origins))
                    writer.write(out)
                    read += len(chunk)
                    written += len(out)
                    bar.update(len(chunk))
        except TrainingDataError as exc:
            where = _origin(recent, getattr(exc, "row", None))
            if where is None:
                raise
            raise TrainingDataError(f"{where}: {exc.problem}") from exc
    return read, written


def _origin(recent, row: int | None) -> str | None:
    """``FILE: where`` of the row written as number ``row``, from the chunks ``recent`` (a .binpack writer
    holds a game's rows back until its chain ends: at most the last two chunks), or None."""
    if row is None:
        return None
    for first, n, index, origins in recent:
        if first <= row < first + n:
            i = row - first
            return f"{origins.label}: {origins.describe(int(index[i]) if index is not None else i)}"
    return None


@click.group(epilog=example("nnue-infer data convert games.plain games.binpack",
                            "nnue-infer data rescore games.binpack rescored.binpack --net stockfish",
                            "nnue-infer data info games.binpack",
                            "nnue-infer data filter games.binpack quiet.binpack --skip-in-check --skip-captures"))
def data() -> None:
    """Stockfish training data: .binpack, .bin, .plain (Stockfish's tools) and .parquet.

    Files are read and written byte for byte as Stockfish's tools branch does. Inputs may be
    '-' and gzip- or zstd-compressed; a damaged file is reported with its byte offset.
    """


@data.command(epilog=example("nnue-infer data convert games.binpack games.plain",
                             "nnue-infer data convert games.plain.zst - --to binpack > games.binpack",
                             "nnue-infer data convert games.binpack games.parquet"))
@_source
@_destination
@threads_option
@progress_option
@quiet_option
def convert(src, dst, src_kind, dst_kind, threads, progress, quiet):
    """Convert SRC to DST (kinds from the extensions: .binpack, .bin, .plain, .parquet).

    .parquet holds the columns fen, move (UCI), score, ply, result and chain; it converts back exactly.
    """
    set_threads(threads)
    n, _ = _pipe(src, dst, src_kind, dst_kind, show_progress(progress, quiet))
    if not quiet:
        click.echo(f"{n} positions", err=True)


@data.command(epilog=example("nnue-infer data rescore games.binpack rescored.binpack --net nn-ad9b42354671.nnue",
                             "nnue-infer data rescore games.binpack blended.binpack --net stockfish --blend 0.5"))
@_source
@_destination
@click.option("--net", required=True, help="Network: a file (.nnue or .safetensors) or a name: 'default', "
              "'stockfish' (Stockfish 15.1's, Debian's package) or a known Stockfish net, sf16 ... sf19-lite (the "
              "list: nnue-infer fetch --help).")
@click.option("--blend", type=click.FloatRange(0.0, 1.0), default=1.0, show_default=True,
              help="Weight of the new evaluation: score = rint(blend * eval + (1 - blend) * old score).")
@threads_option
@progress_option
@quiet_option
def rescore(src, dst, src_kind, dst_kind, net, blend, threads, progress, quiet):
    """Replace every score of SRC by NET's evaluation (internal units, side to move; exactly
    evaluate_batch's values, on all cores) and write DST."""
    from ..evaluator import Evaluator
    from ..io import training_data as td

    set_threads(threads)
    ev = Evaluator(load_network(net))
    n, _ = _pipe(src, dst, src_kind, dst_kind, show_progress(progress, quiet),
                 lambda chunk, first: td.rescore(chunk, ev, blend=blend, label=src, first_row=first))
    if not quiet:
        click.echo(f"{n} positions rescored", err=True)


@data.command(epilog=example("nnue-infer data info games.binpack", "nnue-infer data info --json games.plain.zst"))
@_source
@json_option("Print one JSON object (positions, chains, results, in_check, captures, ply, score histogram).")
@threads_option
@progress_option
@quiet_option
def info(src, src_kind, as_json, threads, progress, quiet):
    """Count SRC's positions, chains, results, checks and captures; plies and a score histogram."""
    from ..io import training_data as td

    set_threads(threads)
    summary = td.Summary()
    with _reported(src), progress_bar(None, "pos", show_progress(progress, quiet)) as bar:
        for chunk in td.iter_chunks(src, src_kind):
            summary.add(chunk)
            bar.update(len(chunk))
    d = summary.as_dict()
    _print(json.dumps({"file": src, **d}) if as_json else _info_text(src, d))


def _print(text: str) -> None:
    """``text`` on standard output; a closed or failing stdout is an error (status 1), not silence
    or a traceback (a reader gone away, as ``| head``, ends quietly)."""
    from ..inputs import standard_stream

    try:
        out = standard_stream("stdout")
        sys.stdout.flush()
        out.write(f"{text}\n".encode())
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise click.ClickException(f"cannot write to stdout: {exc.strerror or exc}") from exc


def _info_text(src: str, d: dict) -> str:
    r = d["results"]
    lines = [f"file        {src}", f"positions   {d['positions']}", f"chains      {d['chains']}",
             f"results     win {r['win']}, draw {r['draw']}, loss {r['loss']} (side to move)",
             f"in check    {d['in_check']}", f"captures    {d['captures']}"]
    if d["positions"]:
        lines.append(f"ply         {d['ply']['min']} .. {d['ply']['max']}")
        lines.append(f"score mean  {d['score']['mean']:.1f} (internal units)")
        lines.append("score histogram:")
        width = max(len(k) for k in d["score"]["histogram"])
        lines += [f"  {k:>{width}}  {v}" for k, v in d["score"]["histogram"].items()]
    return "\n".join(lines)


@data.command("filter", epilog=example(
    "nnue-infer data filter games.binpack quiet.binpack --skip-in-check --skip-captures --min-ply 16",
    "nnue-infer data filter games.binpack small.plain --max-score 3000"))
@_source
@_destination
@click.option("--skip-in-check", is_flag=True, help="Drop positions whose side to move is in check.")
@click.option("--skip-captures", is_flag=True, help="Drop positions whose move captures (as the tools count: "
              "castling and en passant are not captures).")
@click.option("--min-ply", type=click.IntRange(min=0), default=0, help="Drop positions with a ply below N.")
@click.option("--max-score", type=click.IntRange(min=0), help="Drop positions with |score| above N (internal units).")
@threads_option
@progress_option
@quiet_option
def filter_cmd(src, dst, src_kind, dst_kind, skip_in_check, skip_captures, min_ply, max_score, threads, progress,
               quiet):
    """Write SRC's positions that pass the filters to DST (chains, of .binpack and of .parquet's chain
    column, are rebuilt where rows drop out)."""
    import numpy as np

    from ..io import training_data as td

    set_threads(threads)
    chains = {"next": 0, "previous": None}  # rows that no longer continue the previous one start a chain

    def keep(chunk, first):
        index = np.flatnonzero(td.select(chunk, skip_in_check=skip_in_check, skip_captures=skip_captures,
                                         min_ply=min_ply, max_abs_score=max_score))
        kept, chains["next"], chains["previous"] = td.number_chains(chunk[index], chains["next"], chains["previous"])
        return kept, index

    n, kept = _pipe(src, dst, src_kind, dst_kind, show_progress(progress, quiet), keep)
    if not quiet:
        click.echo(f"kept {kept} of {n} positions", err=True)
