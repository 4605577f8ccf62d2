"""What every command shares: the ``--net``, ``--threads``, ``--quiet``, ``--progress``, ``--json`` and
``-o/--output`` options, the output stream, progress bars and messages on stderr."""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
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
    the elapsed time of a compile that lasts over a second (a tqdm counter, erased when it ends).
    ``--quiet`` raises its level above INFO (nothing shown); ``main`` attaches it for one command."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._bar = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if sys.stderr is None:  # closed (2>&-): say nothing (print(file=None) would write to stdout)
            return
        phase = getattr(record, "compile", None)
        if phase == "start" and self._bar is None and sys.stderr.isatty():
            from tqdm import tqdm

            # ncols, nrows: the line's own size (tqdm takes the terminal's reported size, and draws nothing
            # on a pty that reports none, 0 x 0, e.g. under `script` or an editor's shell)
            self._bar = tqdm(desc="nnue-infer: compiling", bar_format="{desc} {elapsed}", file=sys.stderr,
                             leave=False, delay=1.0, ncols=40, nrows=2)
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, args=(self._bar,), daemon=True)
            self._ticker.start()
        elif phase == "end":
            self.close_bar()
        elif phase is None and record.levelno >= logging.INFO:
            print(f"nnue-infer: {record.getMessage()}", file=sys.stderr, flush=True)

    def _tick(self, bar) -> None:
        while not self._stop.wait(0.5):
            bar.update(0)  # redraws the elapsed time once the delay has passed

    def close_bar(self) -> None:
        """Erase the elapsed-time counter, if one is shown."""
        if self._bar is not None:
            self._stop.set()
            self._ticker.join()
            self._bar.close()
            self._bar = self._ticker = None


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
