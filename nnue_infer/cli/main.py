"""The ``nnue-infer`` command group and ``main(argv) -> int``; the commands live one group per module."""

from __future__ import annotations

import logging

import click

from ..errors import NnueError
from .common import compile_notice, example
from .data import data
from .eval import eval_cmd
from .networks import convert, extract, fetch, info, quantise
from .training import crosscheck, datagen, train
from .warmup import warmup


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=example("nnue-infer eval startpos moves e2e4", "nnue-infer eval --net stockfish --epd positions.epd -o scores.csv",
                             "nnue-infer COMMAND --help"))
@click.version_option(package_name="nnue-infer")
def cli() -> None:
    """Exact, fast evaluation of chess positions with NNUE networks.

    Every file input may be '-' (standard input) and gzip- or zstd-compressed.
    """


for _command in (eval_cmd, info, extract, fetch, datagen, train, convert, quantise, crosscheck, data, warmup):
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


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    log = logging.getLogger("nnue_infer")
    level = log.level
    compile_notice.setLevel(logging.DEBUG)  # a cold compile says so on stderr (not with --quiet)
    log.addHandler(compile_notice)
    log.setLevel(logging.DEBUG)
    try:
        return _run(argv)
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
