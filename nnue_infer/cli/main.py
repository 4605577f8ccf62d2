"""The ``nnue-infer`` command group and ``main(argv) -> int``; the commands live one group per module."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator

import click

from ..errors import NnueError
from .common import compile_notice, example
from .data import data
from .eval import eval_cmd
from .match import match_cmd
from .network_tools import check, permute
from .networks import convert, extract, fetch, info, quantise
from .play import perft, uci
from .training import crosscheck, datagen, train
from .warmup import warmup


def _readers_gone() -> set[int]:
    """After a write failed with ``EPIPE``: the standard streams (1: output, 2: error) whose reader went away
    (``| head``), each then pointed at ``os.devnull``, so that nothing written later fails (Python's own flush of
    ``sys.stdout`` at exit printed "Exception ignored ... BrokenPipeError" and exited with status 120).  Only the
    process's own standard streams count (not when a caller replaced ``sys.stdout``, as pytest's capture does):
    the write end of a pipe whose reader has gone polls as an error."""
    import select

    gone: set[int] = set()
    if not hasattr(select, "poll"):  # (Windows: no EPIPE from a closed pipe's reader either)
        return gone
    for fd, stream, own in ((1, sys.stdout, sys.__stdout__), (2, sys.stderr, sys.__stderr__)):
        try:
            if stream is None or stream is not own or stream.fileno() != fd:
                continue
            poll = select.poll()
            poll.register(fd, select.POLLOUT)
            if not any(event & select.POLLERR for _, event in poll.poll(0)):
                continue
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
            gone.add(fd)
        except (OSError, ValueError):
            continue
    return gone


@contextlib.contextmanager
def _quiet_when_reader_gone() -> Iterator[None]:
    """End with status 0 and no message when standard output's reader went away (``| head``), as a filter does:
    output that fit in the pipe before the reader left ends with 0 too, so 141 (a shell's status for a process
    killed by SIGPIPE) would still depend on the timing.  Standard error's reader alone going away (``2>&1
    >scores.csv | grep -m1 error``) ends with 1 and no message (none can be read): the command stopped before its
    end, its output is not whole (it ended with 0, the output file cut short)."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        gone = _readers_gone()
        if not gone:
            raise
        sys.exit(0 if 1 in gone else 1)  # (not click's Exit: click.main without standalone_mode returns its status)


class _Group(click.Group):
    """The command group: a command (or --help, --version) whose reader went away ends quietly (click's own
    handler ended with status 1)."""

    def make_context(self, *args, **kwargs) -> click.Context:
        with _quiet_when_reader_gone():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context):
        with _quiet_when_reader_gone():
            return super().invoke(ctx)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=example("nnue-infer eval startpos moves e2e4", "nnue-infer eval --net stockfish --epd positions.epd -o scores.csv",
                             "nnue-infer COMMAND --help"))
@click.version_option(package_name="nnue-infer")
def cli() -> None:
    """Exact, fast evaluation of chess positions with NNUE networks.

    Every file input may be '-' (standard input) and gzip- or zstd-compressed.
    """


for _command in (eval_cmd, info, extract, fetch, datagen, train, convert, quantise, crosscheck, permute, check, data,
                 warmup, uci, perft, match_cmd):
    cli.add_command(_command)


def _show_error(exc: click.ClickException) -> None:
    """Print ``exc`` as every message of this program starts: ``error: ...`` (usage errors after
    the usage line and the --help hint, as click prints them, whose own prefix is ``Error:``)."""
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        hint = ""
        if exc.ctx.command.get_help_option(exc.ctx) is not None:
            hint = f"Try '{exc.ctx.command_path} {exc.ctx.help_option_names[0]}' for help.\n"
        click.echo(f"{exc.ctx.get_usage()}\n{hint}", err=True)
    click.echo(f"error: {exc.format_message()}", err=True)


class _Stopped(SystemExit):
    """SIGTERM or SIGHUP arrived: raised where the main thread runs, so that every ``finally`` and ``with`` on the
    way out runs (temporary output files removed: :func:`nnue_infer.inputs.replacing` and the writers built on it),
    as SIGINT's KeyboardInterrupt does; the exit status is a shell's for a process killed by the signal,
    128 + its number."""


#: Signals that end a command cleanly (SIGINT raises KeyboardInterrupt already).
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _stop(signum: int, frame) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one while the files are cleaned up ends the process at once
    raise _Stopped(128 + signum)


@contextlib.contextmanager
def _stopping_cleanly() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`_Stopped` while the command runs: their default action ended the
    process where it stood and left a temporary output file behind (a 242 MB ``.DST.tmp-PID-0`` of ``data
    convert``).  Only from the main thread, and only a signal whose handler is the default (one ignored, as under
    ``nohup``, or handled by an embedding program stays so); the handlers before are put back at the end."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _STOP_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status (128 + the signal's number
    after SIGTERM or SIGHUP, once the output files are cleaned up)."""
    log = logging.getLogger("nnue_infer")
    level = log.level
    compile_notice.setLevel(logging.DEBUG)  # a cold compile says so on stderr (not with --quiet)
    log.addHandler(compile_notice)
    log.setLevel(logging.DEBUG)
    try:
        with _stopping_cleanly():
            return _run(argv)
    except _Stopped as exc:  # raised outside _run (between its return and the handlers' restoration)
        return int(exc.code)
    finally:
        compile_notice.close_bar()
        log.removeHandler(compile_notice)
        log.setLevel(level)


def _run(argv: list[str] | None) -> int:
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
    except NnueError as exc:  # one a command does not handle itself (NNUE_INFER_SIMD: simd.SimdPathError)
        click.echo(f"error: {exc}", err=True)
        return 1
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
