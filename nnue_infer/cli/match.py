"""``nnue-infer match``: games between networks (in process) and UCI engines, with pentanomial Elo and an SPRT."""

from __future__ import annotations

import sys

import click

from .common import example, progress_option, quiet_option, show_progress


def _per_player(values, option: str, convert, players: int) -> list:
    """``VALUE`` (every player) or ``N:VALUE`` (player N, from 1) -> one value or None per player."""
    out = [None] * players
    for raw in values:
        head, sep, rest = str(raw).partition(":")
        targets, text = (range(players), raw)
        if sep and head.isdigit():
            n = int(head)
            if not 1 <= n <= players:
                raise click.BadParameter(f"{raw!r}: player {n} does not exist (1 to {players})", param_hint=option)
            targets, text = [n - 1], rest
        try:
            value = convert(text)
        except (ValueError, TypeError) as exc:
            raise click.BadParameter(f"{raw!r}: {exc}", param_hint=option) from None
        for t in targets:
            out[t] = value
    return out


def _positive_int(text: str) -> int:
    v = int(text)
    if v <= 0:
        raise ValueError("must be > 0")
    return v


def _positive_float(text: str) -> float:
    v = float(text)
    if not v > 0 or v == float("inf"):
        raise ValueError("must be > 0")
    return v


@click.command("match", epilog=example(
    "nnue-infer match --net default --net stockfish --nodes 5000 --games 200 --openings book.epd --pgn out.pgn",
    "nnue-infer match --uci stockfish --uci stockfish --uci-option 1:UCI_LimitStrength=true "
    "--uci-option 1:UCI_Elo=1800 --uci-option 2:UCI_LimitStrength=true --uci-option 2:UCI_Elo=1350 "
    "--movetime 50 --games 40",
    "nnue-infer match --net my.nnue --net default --tc 10+0.1 --games 2000 --openings book.pgn "
    "--sprt 0 2 0.05 0.05 --concurrency 2 --json result.json",
    "nnue-infer match --net a.nnue --net b.nnue --nodes 20000 --games 1000 --openings random --workers 4"))
@click.option("--net", "nets", multiple=True, metavar="NET",
              help="A network searched in process (a file or name as for eval; repeatable).")
@click.option("--uci", "ucis", multiple=True, metavar="CMD",
              help="A UCI engine's command line, run as a subprocess (repeatable). Players: the --net ones in "
                   "order, then the --uci ones; the first is the one whose Elo is reported.")
@click.option("--nodes", multiple=True, metavar="[N:]NODES", help="Fixed nodes per move (N: for player N only).")
@click.option("--depth", multiple=True, metavar="[N:]DEPTH", help="Fixed depth per move.")
@click.option("--movetime", multiple=True, metavar="[N:]MS", help="Milliseconds per move.")
@click.option("--tc", multiple=True, metavar="[N:]BASE+INC",
              help="A clock in seconds, e.g. 10+0.1: the runner keeps both clocks and passes wtime/btime/winc/binc; "
                   "a side more than --time-margin over its time loses on time.")
@click.option("--games", type=click.IntRange(min=2), required=True, help="Games to play (even: game pairs).")
@click.option("--openings", metavar="FILE|random",
              help="Opening book: EPD/FEN lines or PGN games (each opening played twice, colours swapped), or "
                   "'random': generated openings balanced by a network. Default: the start position.")
@click.option("--book-plies", type=click.IntRange(min=0), help="Plies of each PGN book game to play (default: all).")
@click.option("--random-plies", type=click.IntRange(min=0), default=8, show_default=True,
              help="Random plies of a generated opening.")
@click.option("--random-cp", type=click.IntRange(min=0), default=100, show_default=True,
              help="A generated opening is kept when the network's evaluation is within this many centipawns.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="Game pairs played at once (one game per core).")
@click.option("--scheduler", metavar="ADDRESS", help="Run the game pairs on this Dask scheduler (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1), help="Run the game pairs on a local Dask cluster of N workers.")
@click.option("--pgn", "pgn_out", type=click.Path(dir_okay=False, writable=True), help="Write the games here.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, writable=True),
              help="Write the result here as JSON (games, wins, draws, losses, pentanomial, elo, elo_error95, ...).")
@click.option("--sprt", nargs=4, type=float, metavar="ELO0 ELO1 ALPHA BETA",
              help="Stop once the SPRT of H0: elo0 against H1: elo1 is decided.")
@click.option("--elo-model", type=click.Choice(["normalized", "logistic"]), default="normalized", show_default=True,
              help="The Elo of --sprt's bounds (fishtest's models).")
@click.option("--seed", type=int, help="Shuffles the book's order; seeds generated openings (default 0).")
@click.option("--uci-option", "uci_options", multiple=True, metavar="[N:]NAME=VALUE",
              help="A UCI option for every UCI engine, or for player N (e.g. 2:UCI_Elo=1800); 'Hash' also sets a "
                   "network player's transposition table (MiB).")
@click.option("--resign", nargs=2, type=click.IntRange(min=1), metavar="MOVES CP",
              help="Adjudicate a loss after MOVES moves of each engine with the loser's score <= -CP and the winner's "
                   ">= CP.")
@click.option("--draw", nargs=3, type=click.IntRange(min=0), metavar="MOVENUMBER MOVES CP",
              help="Adjudicate a draw from MOVENUMBER on after MOVES moves of each engine within +-CP.")
@click.option("--max-moves", type=click.IntRange(min=1), help="Adjudicate a draw after this many moves.")
@click.option("--time-margin", type=click.FloatRange(min=0, max=60000), default=100, show_default=True, metavar="MS",
              help="Milliseconds a side may overstep its clock (--tc) before it loses on time.")
@progress_option
@quiet_option
def match_cmd(nets, ucis, nodes, depth, movetime, tc, games, openings, book_plies, random_plies, random_cp,
              concurrency, scheduler, workers, pgn_out, json_out, sprt, elo_model, seed, uci_options, resign, draw,
              max_moves, time_margin, progress, quiet):
    """Play a match of game pairs between two engines and report W/D/L, pentanomial Elo and an SPRT.

    The statistics are fishtest's: Elo with a 95 % interval from the pentanomial counts of the game pairs,
    normalized Elo, and the GSPRT's log-likelihood ratio.  An engine that crashes, hangs or plays an
    illegal move loses that game (the reason is in the PGN and the JSON); Ctrl-C stops the match with
    the games played so far written.
    """
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise click.ClickException("nnue-infer match needs scipy for its statistics: "
                                   "pip install 'nnue-infer[match]'") from None
    if scheduler or workers:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise click.ClickException("--scheduler and --workers need Dask: pip install 'nnue-infer[dask]'") from None
    from ..search.match import (Adjudication, Limits, MatchError, PlayerSpec, TimeControl, generate_openings,
                                parse_uci_options, play_match, read_openings, write_json)
    from ..search.statistics import SPRT

    count = len(nets) + len(ucis)
    if count != 2:
        raise click.UsageError(f"a match has two players: give two of --net / --uci (got {count})")
    if scheduler and workers:
        raise click.UsageError("give --scheduler or --workers, not both")
    per = {"nodes": _per_player(nodes, "--nodes", _positive_int, 2),
           "depth": _per_player(depth, "--depth", _positive_int, 2),
           "movetime": _per_player(movetime, "--movetime", lambda t: _positive_float(t) / 1000, 2),
           "tc": _per_player(tc, "--tc", TimeControl.parse, 2)}
    limits = []
    for i in range(2):
        given = {k: v[i] for k, v in per.items() if v[i] is not None}
        if len(given) != 1:
            raise click.UsageError(f"player {i + 1} needs exactly one of --nodes, --depth, --movetime, --tc "
                                   f"(got {', '.join('--' + k for k in given) or 'none'})")
        limits.append(Limits(**given))
    try:
        options = parse_uci_options(uci_options)
    except MatchError as exc:
        raise click.BadParameter(str(exc), param_hint="--uci-option") from None
    commands = [(None, n) for n in nets] + [(u, None) for u in ucis]
    specs = []
    for i, (cmd, net) in enumerate(commands):
        mine = [(k, v) for target, k, v in options if target in (None, i + 1) and (cmd is not None or
                                                                                    k.lower() == "hash")]
        for target, k, _ in options:
            if target == i + 1 and cmd is None and k.lower() != "hash":
                raise click.BadParameter(f"player {i + 1} is a network: only Hash applies, not {k!r}",
                                         param_hint="--uci-option")
        specs.append(PlayerSpec(limits[i], uci=cmd, network=net, options=tuple(mine)))
    if games % 2:
        raise click.BadParameter(f"{games} is odd: each opening is played twice (game pairs)", param_hint="--games")
    test = None
    if sprt:
        elo0, elo1, alpha, beta = sprt
        try:
            test = SPRT(elo0, elo1, alpha, beta, elo_model)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--sprt") from None
    adjudication = Adjudication(resign_moves=resign[0] if resign else 0, resign_score=resign[1] if resign else 1000,
                                draw_after=draw[0] if draw else 40, draw_moves=draw[1] if draw else 0,
                                draw_score=draw[2] if draw else 10, max_moves=max_moves)
    book = None
    if openings == "random":
        book = generate_openings(games // 2, plies=random_plies, seed=seed or 0,
                                 network=nets[0] if nets else None, max_cp=random_cp)
    elif openings is not None:
        book = read_openings(openings, plies=book_plies)
    result = play_match(specs, games=games, openings=book, concurrency=concurrency, scheduler=scheduler,
                        workers=workers, pgn=pgn_out, sprt=test, adjudication=adjudication,
                        seed=seed if openings not in (None, "random") else None,
                        progress=show_progress(progress, quiet), time_tolerance=time_margin / 1000)
    if json_out:
        write_json(result, json_out)
    click.echo(result.summary())
    if result.stopped == "interrupted":
        sys.exit(130)
