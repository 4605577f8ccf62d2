"""What every command shares: the ``--net``, ``--threads``, ``--quiet``, ``--progress``, ``--json`` and
``-o/--output`` options, the output stream, progress bars and messages on stderr."""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from pathlib import Path

import click

from ..inputs import standard_stream


def example(*lines: str) -> str:
    """An ``Examples:`` epilog that click prints verbatim."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange that also refuses ``nan`` and ``inf`` (FloatRange lets NaN through: every
    comparison with it is false)."""

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


def load_network(net: str | None):
    """The network of a ``--net`` value: a file or a name (``default``, ``stockfish``, ...; :func:`network_from_spec`)."""
    from ..errors import NetworkNotFoundError
    from ..resources import network_from_spec

    try:
        return network_from_spec(net)
    except NetworkNotFoundError as exc:
        if net and net.count("/") == 7 and not Path(net).exists():
            raise NetworkNotFoundError(f"--net got {net!r}, which looks like a FEN: --net takes a network file or "
                                       "name; give the position after the options (nnue-infer eval --net NET FEN)") from exc
        raise


def set_threads(threads: int | None, option: str = "--threads") -> None:
    """Limit Numba's threads (``None``: all cores); a usage error beyond this machine's threads."""
    if threads is None:
        return
    import numba

    if threads > numba.config.NUMBA_NUM_THREADS:
        raise click.BadParameter(f"at most {numba.config.NUMBA_NUM_THREADS} (this machine's threads)",
                                 param_hint=option)
    numba.set_num_threads(threads)


def show_progress(progress: bool | None, quiet: bool) -> bool:
    """Draw a bar: never with ``--quiet`` or a closed stderr, always with ``--progress``, else when
    stderr is a terminal."""
    if quiet or sys.stderr is None:
        return False
    return bool(progress) or sys.stderr.isatty()


def progress_bar(total: int | None, unit: str, show: bool):
    """A tqdm bar on stderr counting ``unit`` (positions or games), shown when ``show``."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, disable=not show, dynamic_ncols=True)


def threads_option(f):
    return click.option("--threads", type=click.IntRange(min=1),
                        help="Threads for the compiled kernels (default: all cores).")(f)


class CompileNotice(logging.Handler):
    """Shows the kernels' compile records (``nnue_infer.kernels.cache``, logger ``nnue_infer``) on
    stderr while a command runs: the first compile's notice as ``nnue-infer: ...``, and on a terminal
    the elapsed time of a compile that lasts over a second (``nnue-infer: compiling 00:01``, redrawn
    every half second, erased when it ends).  ``--quiet`` raises its level above INFO (nothing shown);
    ``main`` attaches it for one command.

    Parameters
    ----------
    clock : callable
        Seconds (``time.monotonic`` by default): the elapsed time shown is this clock's; tests give
        their own, so that what is drawn does not depend on how busy the machine is.
    interval : float
        Seconds between redraws by the drawing thread (:meth:`redraw` draws at once).
    """

    #: Seconds a compile lasts before its counter is drawn.
    DELAY = 1.0

    def __init__(self, clock=time.monotonic, interval: float = 0.5) -> None:
        super().__init__(logging.DEBUG)
        self._clock, self._interval = clock, interval
        self._start: float | None = None  # the shown compile's start (None: no counter)
        self._drawn = 0  # characters of the counter on the line
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._draw_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if sys.stderr is None:  # closed (2>&-): say nothing (print(file=None) would write to stdout)
            return
        phase = getattr(record, "compile", None)
        if phase == "start" and self._start is None and sys.stderr.isatty():
            self._start = self._clock()
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        elif phase == "end":
            self.close_bar()
        elif phase is None and record.levelno >= logging.INFO:
            print(f"nnue-infer: {record.getMessage()}", file=sys.stderr, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            self.redraw()

    def redraw(self) -> None:
        """Draw the elapsed time of the compile under way, once it has lasted :data:`DELAY` seconds."""
        with self._draw_lock:
            if self._start is None:
                return
            elapsed = self._clock() - self._start
            if elapsed < self.DELAY:
                return
            minutes, seconds = divmod(int(elapsed), 60)
            hours, minutes = divmod(minutes, 60)
            text = f"nnue-infer: compiling {f'{hours}:' if hours else ''}{minutes:02d}:{seconds:02d}"
            self._write(f"\r{text}")
            self._drawn = len(text)

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr gone or closed: the counter is only a courtesy
            pass

    def close_bar(self) -> None:
        """Erase the elapsed-time counter, if one is shown, and stop drawing it."""
        if self._start is None:
            return
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        with self._draw_lock:
            if self._drawn:
                self._write(f"\r{' ' * self._drawn}\r")
            self._start, self._drawn, self._ticker = None, 0, None


#: The command line's compile notice (attached by ``main``).
compile_notice = CompileNotice()


def _quiet(ctx, param, quiet: bool) -> bool:
    """``--quiet`` also silences the compile notice (:data:`compile_notice`)."""
    if quiet:
        compile_notice.setLevel(logging.WARNING)
    return quiet


def quiet_option(f):
    return click.option("-q", "--quiet", is_flag=True, callback=_quiet,
                        help="No progress bar and no messages on stderr but errors.")(f)


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


class _FileOnFirstWrite:
    """The binary file ``path``, opened (created or emptied) by the first :meth:`write`: a run refused before it
    wrote anything (an input refused at its first line) leaves no file, or the file that was there as it was
    (it left an empty file, or emptied the user's earlier results)."""

    def __init__(self, path: str) -> None:
        self.path, self.file, self.closed = path, None, False

    def open(self):
        """The file, opened now if it was not (a run that succeeded with nothing to write: an empty file)."""
        if self.file is None:
            try:
                self.file = open(self.path, "wb")  # noqa: SIM115 (closed by close())
            except OSError as exc:
                raise click.ClickException(f"cannot write --output {self.path}: {exc.strerror or exc}") from exc
        return self.file

    def write(self, data: bytes) -> int:
        return self.open().write(data)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        self.closed = True
        if self.file is not None:
            self.file.close()


class Output:
    """Where results go: ``-o FILE`` (opened by the first write: :class:`_FileOnFirstWrite`), or standard output
    (``None`` or ``-``); binary and text views."""

    def __init__(self, path: str | None, parquet: bool = False) -> None:
        self.path = None if path in (None, "-") else path
        self.binary = None
        if parquet:  # ParquetTableWriter writes a temporary file and renames it: the target is not touched here
            return
        if self.path is None:
            self.binary = standard_stream("stdout")
            sys.stdout.flush()
        else:
            directory = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(directory):  # (said before the work, as when the file was opened here)
                why = f"{directory} is not a directory" if os.path.exists(directory) else \
                    f"directory {directory} does not exist"
                raise click.ClickException(f"cannot write --output {self.path}: {why}")
            self.binary = _FileOnFirstWrite(self.path)

    def write_text(self, text: str) -> None:
        self.binary.write(text.encode("utf-8", "surrogateescape"))

    def close(self) -> None:
        """Finish the output of a run that succeeded (``-o FILE`` exists then, if empty)."""
        if self.binary is None:
            return
        try:
            if isinstance(self.binary, _FileOnFirstWrite):
                self.binary.open()
            self.binary.flush()
        finally:
            if self.path is not None:
                self.binary.close()


def report(label: str, where: str, message: str) -> None:
    click.echo(f"error: {label}:{where}: {message}", err=True)


def check_output_dir(path: str, option: str) -> None:
    """Usage error (status 2) naming ``option`` when ``path``'s directory does not exist or is not writable."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise click.BadParameter(f"directory {directory} does not exist", param_hint=option)
    if not os.access(directory, os.W_OK):
        raise click.BadParameter(f"directory {directory} is not writable", param_hint=option)
