"""Compiling ahead: ``warmup``, and the cache report of ``info --cache``."""

from __future__ import annotations

import json

import click

from ..warmup import PATHS
from .common import example, load_network, progress_bar, progress_option, quiet_option, show_progress

#: The paths ``warmup`` compiles: the inference core's (``nnue_infer.warmup.PATHS``) and ``files`` (EPD files and
#: datasets: ``nnue_infer.io.score.warm_up_files``, imported when the command runs, not for ``--help``).
NAMES = (*PATHS, "files")


@click.command(epilog=example("nnue-infer warmup", "nnue-infer warmup --net stockfish --net sf19 --paths board,batch",
                              "NUMBA_CACHE_DIR=/opt/nnue-cache nnue-infer warmup --net default --net stockfish"))
@click.option("--net", "nets", multiple=True,
              help="A network file or name, as for eval (repeatable; default: 'default').")
@click.option("--paths", default=",".join(NAMES), show_default=True,
              help=f"Comma-separated paths to compile: {', '.join(NAMES)}.")
@progress_option
@quiet_option
def warmup(nets, paths, progress, quiet):
    """Compile the kernels of the given networks and paths into Numba's cache ahead of use.

    For Docker images, CI and cluster nodes: the first use of a path compiles its kernels for this
    CPU and network configuration (seconds of CPU); afterwards every process loads them.  Prints one
    line per network and path with the CPU seconds it took (about 0 when already cached);
    "nnue-infer info --cache" shows what the cache holds.
    """
    from ..io.score import warm_up_files
    from ..warmup import warmup as run

    names = list(dict.fromkeys(p.strip() for p in paths.split(",") if p.strip()))  # each once, in order
    unknown = [p for p in names if p not in NAMES]
    if not names:
        raise click.BadParameter(f"no path given; known: {', '.join(NAMES)}", param_hint="--paths")
    if unknown:
        raise click.BadParameter(f"unknown path(s) {', '.join(unknown)}; known: {', '.join(NAMES)}",
                                 param_hint="--paths")
    from tqdm import tqdm

    specs = list(nets) or ["default"]
    networks = [load_network(s) for s in specs]
    registry = {**PATHS, "files": warm_up_files}
    with progress_bar(len(specs) * len(names), "step", show_progress(progress, quiet)) as bar:
        for spec, network in zip(specs, networks):
            for name in names:  # each step's line as it finishes (a CI log showed nothing for 86 s)
                [(_, path, seconds)] = run([network], [name], registry=registry)
                with tqdm.external_write_mode():  # the bar (stderr) cleared while the line is written
                    click.echo(f"{spec}\t{path}\t{seconds:.1f} s CPU")  # click.echo flushes
                bar.update(1)


def show_cache_report(as_json: bool) -> None:
    """Print :func:`nnue_infer.warmup.cache_report` (one JSON object with ``as_json``)."""
    from ..warmup import cache_report

    report = cache_report()
    if as_json:
        click.echo(json.dumps(report))
        return
    if report["directory"] is None:
        click.echo(f"cache:   none: no writable directory among {', '.join(report['candidates'])}, nor one to read "
                   "(every process compiles the kernels again; set NUMBA_CACHE_DIR to a writable directory)")
        return
    click.echo(f"cache:   {report['directory']}" + ("" if report["writable"] else
               " (read-only: its kernels are loaded; those it lacks compile in every process)"))
    for also in report["also_read"]:
        click.echo(f"also:    {also} (holds kernels: one the cache lacks is loaded from it)")
    click.echo(f"size:    {report['bytes'] / 1e6:.1f} MB")
    click.echo("compiled for this CPU and these kernel sources (kernel: configurations x signatures):")
    for name, n in sorted(report["kernels"].items()):
        click.echo(f"  {name}: {n}")
