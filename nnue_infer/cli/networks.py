"""Network files: ``info``, ``extract``, ``fetch``, ``convert`` and ``quantise``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from .common import (check_output_dir, example, json_option, quiet_option)


@click.command(epilog=example("nnue-infer info nn-ad9b42354671.nnue", "nnue-infer info --json sf.safetensors | jq .architecture",
                             "nnue-infer info default", "nnue-infer info --cache"))
@click.argument("file", metavar="NETWORK", required=False)
@click.option("--cache", "show_cache", is_flag=True,
              help="Show the compiled-kernel cache instead: where, its size, what is compiled for this CPU.")
@json_option("Print one JSON object (network: the name given or null, file, format, sha256, network_digest, description, architecture, dimensions, "
             "hashes).")
def info(file, show_cache, as_json):
    """Show a network's format, architecture, dimensions, hashes and SHA-256 (or, with
    --cache, Numba's cache of the compiled kernels: see ``nnue-infer warmup``).

    NETWORK is a file or a name that --net takes (default, stockfish, sf16, ...): then its
    file is shown (the bundled one, or the cache's).

    The digest is the SHA-256 of the network's parameters (nnue_infer.network.network_digest), not of
    the file: what a Parquet dataset's _nnue_infer.json records as network_sha256.

    Dimensions are counts (features, neurons); the architecture's units_per_pawn is the
    number of internal units the network's value gives one pawn (361 for Stockfish 15.1).
    """
    if show_cache:
        from .warmup import show_cache_report

        show_cache_report(as_json)
        return
    if file is None:
        raise click.UsageError("give a NETWORK (a file, or a name such as default; or --cache)")
    import dataclasses
    import hashlib

    from .. import load
    from ..errors import NnueError
    from ..formats import detect_format
    from ..formats.stockfish import network_hashes
    from ..network import network_digest
    from ..resources import is_network_name, network_file, network_from_spec

    name = file if is_network_name(file) else None
    try:
        if name is None and not os.path.exists(file):
            network_from_spec(file)  # raises: no such file (the message names the networks there are)
        path = network_file(file)
        fmt = detect_format(path)
        network = network_from_spec(file) if name else load(path)  # (a name: as jobs load it; a file may be float)
    except NnueError as exc:
        raise click.ClickException(str(exc)) from exc
    file = os.fspath(path)
    arch = network.architecture
    sha = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    digest = network_digest(network)
    ft = {"features": int(network.ft_weights.shape[0]), "width": arch.ft_width, "dtype": str(network.ft_weights.dtype),
          "psqt_buckets": arch.psqt_buckets, "psqt_dtype": str(network.psqt_weights.dtype)}
    layers = [{"outputs": l.outputs, "activation": l.activation, "dtype": str(w.dtype)}
              for l, w in zip(arch.layers, network.layer_weights)]
    hashes = None
    if fmt == "stockfish":
        net_h, ft_h, stack_h = network_hashes(arch)
        hashes = {"network": f"0x{net_h:08X}", "feature_transformer": f"0x{ft_h:08X}", "layer_stack": f"0x{stack_h:08X}"}
    if as_json:
        click.echo(json.dumps({"network": name, "file": file, "format": fmt, "sha256": sha, "network_digest": digest,
                               "description": network.description,
                               "summary": repr(network), "architecture": json.loads(arch.to_json()),
                               "feature_transformer": ft, "layers": layers, "hashes": hashes}))
        return
    if name:
        click.echo(f"network:       {name}")
    click.echo(f"file:          {file}")
    click.echo(f"format:        {fmt}")
    click.echo(f"sha256:        {sha}")
    click.echo(f"digest:        {digest} (parameters: a dataset manifest's network_sha256)")
    click.echo(f"description:   {network.description.encode('utf-8', 'backslashreplace').decode()}")
    click.echo(f"architecture:  {network!r}")
    for key, value in dataclasses.asdict(arch).items():
        click.echo(f"  {key}: {value}{FIELD_NOTES.get(key, '').format(value=value)}")
    click.echo(f"feature transformer: {ft['features']} features -> {arch.ft_width} {ft['dtype']} "
               f"(+{arch.psqt_buckets} PSQT {ft['psqt_dtype']}) per perspective")
    click.echo("dense layers:  " + ", ".join(f"{l['outputs']} {l['activation']} ({l['dtype']})" for l in layers))
    if hashes:
        click.echo(f"hashes:        network {hashes['network']}, feature transformer {hashes['feature_transformer']}, "
                   f"layer stack {hashes['layer_stack']}")


#: What the Architecture fields whose names read as facts about the file mean (a network of our own has
#: them too: nnue_infer.network.Architecture's docstring), appended to their lines in ``info``.
FIELD_NOTES = {
    "file_version": " (0x{value:08X}: the .nnue header version it is written with)",
    "stockfish_version": " (the Stockfish version whose eval text and pawn normalisation it follows)",
}


@click.command(epilog=example("nnue-infer extract /usr/games/stockfish            (writes nn-ad9b42354671.nnue here)",
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
    from ..errors import NnueError
    from ..formats.extract import extract_network, find_networks, write_networks
    from ..formats.registry import known_by_sha256

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
            check_output_dir(target.rstrip("/" + os.sep) or target, "-o")
            os.mkdir(target)
        if not os.path.isdir(target):
            check_output_dir(target, "-o")
            digests = [extract_network(source, target)]
            names = [target]
        else:
            written = write_networks(find_networks(source), target)
            if not written:
                raise click.ClickException(f"{source}: no embedded Stockfish network found")
            digests = [f.sha256 for f in written]
            names = [f.name if target in (".", "./") else os.path.join(target, f.name) for f in written]
    except (NnueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not quiet:
        for name, digest in zip(names, digests):
            canonical = f"nn-{digest[:12]}.nnue"  # Stockfish's name for it, when the file is called otherwise
            alias = f", {canonical}" if os.path.basename(name) != canonical else ""
            click.echo(f"wrote {name} (sha256 {digest}{alias})")


@click.command(epilog=example("nnue-infer fetch sf17.1-small"))
@click.argument("spec")
def fetch(spec):
    """Download (npm pack stockfish@V into the cache) and extract a known Stockfish network SPEC:
    sf16, sf17.1, sf17.1-small, sf17.1-lite, sf18, sf18-small, sf18-lite, sf19, sf19-lite."""
    from ..errors import NnueError
    from ..formats.registry import known_by_spec
    from ..resources import known_network_path

    known = known_by_spec(spec)
    try:
        path = known_network_path(spec, fetch=True)
    except NnueError as exc:
        raise click.ClickException(str(exc)) from exc
    assert known is not None
    click.echo(f"{path} (Stockfish {known.version} {known.role} net, {known.size} bytes, sha256 {known.sha256})")


@click.command(epilog=example("nnue-infer convert nn-ad9b42354671.nnue sf.safetensors", "nnue-infer convert sf.safetensors sf.nnue"))
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

    from ..errors import NnueError
    from ..formats import detect_format, format_for_path, load, save

    check_output_dir(dest, "DEST")
    try:
        fmt = fmt or format_for_path(dest)
        network = load(source)
        save(network, dest, fmt)
    except (NnueError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not quiet:
        sha = hashlib.sha256(Path(dest).read_bytes()).hexdigest()
        click.echo(f"{source} ({detect_format(source)}) -> {dest} ({fmt}), {Path(dest).stat().st_size} bytes, sha256 {sha}")


@click.command(epilog=example("nnue-infer quantise float.safetensors net.safetensors",
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

    from ..errors import NnueError
    from ..float_network import FloatNetwork
    from ..formats import load, save
    from ..quantisation import SCHEMES, quantise_with_report

    check_output_dir(dest, "DEST")
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
        declared, used = network.architecture, q.architecture
        if (declared.ft_clamp, declared.ft_shift) != (used.ft_clamp, used.ft_shift):
            by = " and ".join(o for o, v in (("--qa", qa), ("--shift", shift)) if v is not None) or f"the scheme {scheme!r}"
            click.echo(f"note: {source} declares QA={declared.ft_clamp}, shift {declared.ft_shift}; {by} replaced "
                       f"them (QA={used.ft_clamp}, shift {used.ft_shift}): --scheme / --qa / --shift choose them",
                       err=True)
        click.echo(f"wrote {dest}")
