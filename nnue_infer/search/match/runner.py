"""The match runner: game pairs one after another, on threads (``concurrency``: one game per core; UCI
engines are processes of their own) or as tasks on a Dask cluster; results stream back as each pair ends, the
PGN is written in pair order (the same file for any concurrency when the games are deterministic, as
fixed-node games are), and an SPRT stops the match once decided.  The result: W/D/L, pentanomial counts,
Elo and nElo with their error bars (:mod:`nnue_infer.search.statistics`)."""

from __future__ import annotations

import datetime
import json
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from ...errors import MatchError
from ..statistics import SPRT, logistic_elo, normalized_elo
from .adjudication import Adjudication
from .games import TIME_TOLERANCE, PairResult, play_pair
from .openings import Opening
from .players import ABANDONED, RULES_INFRACTION, TIME_FORFEIT, PlayerSpec, check_players, close_players


@dataclass
class MatchResult:
    """A match's outcome, the first player's view.

    Attributes
    ----------
    players : list of str
        The two players' names, first first.
    games, wins, draws, losses : int
        Games played and the first player's wins, draws and losses.
    pentanomial : list of int
        Game pairs by the first player's points: LL, LD, WL+DD, WD, WW (5 counts, summing to ``games / 2``).
    elo, elo_error95, los : float
        Logistic Elo of the first player with half the 95 % interval (from the pentanomial), and the LOS.
    nelo, nelo_error95 : float
        Normalized Elo with half its 95 % interval.
    llr, lower, upper : float or None
        With an SPRT: its LLR and bounds.
    sprt_result : str or None
        With an SPRT: ``"H1"`` (accepted: elo1), ``"H0"`` (elo0) or ``"inconclusive"`` (the games ran out first).
    sprt : dict or None
        The SPRT's settings (elo0, elo1, alpha, beta, model).
    stopped : str
        ``"games"`` (all played), ``"sprt"`` (decided) or ``"interrupted"``.
    forfeits : list of dict
        Games lost by a crash, hang, illegal move or time (pair, white, result, termination, reason).
    """

    players: list[str]
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    pentanomial: list[int] = field(default_factory=lambda: [0] * 5)
    elo: float = 0.0
    elo_error95: float | None = None
    los: float = 0.5
    nelo: float = 0.0
    nelo_error95: float | None = None
    llr: float | None = None
    lower: float | None = None
    upper: float | None = None
    sprt_result: str | None = None
    sprt: dict | None = None
    stopped: str = "games"
    forfeits: list[dict] = field(default_factory=list)

    def add(self, pair: PairResult) -> None:
        """Count a finished pair."""
        for g in pair.games:
            self.games += 1
            p = g.first_points
            self.wins += p == 1.0
            self.draws += p == 0.5
            self.losses += p == 0.0
            if g.termination in (RULES_INFRACTION, ABANDONED, TIME_FORFEIT):
                self.forfeits.append({"pair": g.pair, "white": self.players[g.white], "result": g.result,
                                      "termination": g.termination, "reason": g.reason})
        self.pentanomial[pair.category] += 1
        self._estimate()

    def _estimate(self) -> None:
        est = logistic_elo(self.pentanomial)
        nest = normalized_elo(self.pentanomial)
        self.elo, self.elo_error95, self.los = est.elo, _finite(est.error95), est.los
        self.nelo, self.nelo_error95 = nest.elo, _finite(nest.error95)

    def to_dict(self) -> dict:
        """The result as JSON-ready data (what ``--json`` writes; no infinities: ``null`` instead)."""
        return {k: (_finite(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def summary(self) -> str:
        """The result in a few lines: W/D/L, pentanomial, Elo +- 95 %, nElo, and the SPRT."""
        f2 = _fixed
        err = f"{self.elo_error95:.1f}" if self.elo_error95 is not None else "inf"
        nerr = f"{self.nelo_error95:.1f}" if self.nelo_error95 is not None else "inf"
        lines = [f"{self.players[0]} vs {self.players[1]}: {self.games} games, W {self.wins} D {self.draws} "
                 f"L {self.losses} (score {self._score():.1%})",
                 "Ptnml(0-2): " + ", ".join(map(str, self.pentanomial)),
                 f"Elo: {f2(self.elo)} +- {err} (95%) LOS: {self.los:.1%}   nElo: {f2(self.nelo)} +- {nerr} (95%)"]
        if self.games and self.draws == 0 and 0 in (self.wins, self.losses):
            lines.append(f"every game {'won' if self.wins else 'lost'}: the Elo and nElo above come from the score "
                         "clamped to 0.001..0.999 (docs/playing-strength.md), a bound, not an estimate")
        if self.sprt is not None:
            s = self.sprt
            lines.append(f"LLR: {f2(self.llr)} ({f2(self.lower)},{f2(self.upper)}) [{f2(s['elo0'])},{f2(s['elo1'])}] "
                         f"{s['model']}: {self.sprt_result}")
        if self.forfeits:
            lines.append(f"{len(self.forfeits)} game(s) forfeited, e.g. pair {self.forfeits[0]['pair'] + 1}: "
                         f"{self.forfeits[0]['reason']}")
        if self.stopped != "games":
            lines.append(f"stopped: {self.stopped}")
        return "\n".join(lines)

    def _score(self) -> float:
        return (self.wins + self.draws / 2) / self.games if self.games else 0.5


def _fixed(v: float, spec: str = ".2f") -> str:
    """``format(v, spec)`` with a value that rounds to zero printed without a sign: ``0.00``, never ``-0.00``."""
    text = format(v, spec)
    return format(0.0, spec) if float(text) == 0 else text


def _finite(v: float) -> float | None:
    return v if v is None or math.isfinite(v) else None


# ------------------------------------------------------------------------------------------------- the runner

def play_match(players: Sequence[PlayerSpec], *, games: int, openings: Sequence[Opening] | None = None,
               concurrency: int = 1, scheduler: str | None = None, workers: int | None = None,
               pgn: str | os.PathLike | None = None, sprt: SPRT | None = None,
               adjudication: Adjudication = Adjudication(), seed: int | None = None, progress: bool = False,
               event: str = "nnue-infer match", time_tolerance: float = TIME_TOLERANCE,
               on_pair: Callable[[PairResult, MatchResult], None] | None = None
               ) -> MatchResult:
    """Play ``games`` games (``games / 2`` pairs) between two players and return the first player's result.

    Parameters
    ----------
    players : two PlayerSpec
        The first player's view is the result's.
    games : int
        Games to play, even (each opening twice).
    openings : sequence of Opening, optional
        The book, used in order (shuffled with ``seed`` when given) and cycled when it has fewer openings than pairs;
        default: the start position.
    concurrency : int
        Pairs played at once (one game per core for two single-threaded engines): on threads of this process for
        UCI engines, on worker processes when a network plays (its search holds the interpreter's lock).
    scheduler, workers : optional
        A Dask scheduler's address, or a local Dask cluster of ``workers`` processes: pairs run as tasks there.
    pgn : path, optional
        Written as pairs end, in pair order.
    sprt : SPRT, optional
        Stops the match once the LLR leaves its bounds.
    adjudication : Adjudication
    time_tolerance : float
        Seconds a side may overstep its clock before it loses on time (default :data:`TIME_TOLERANCE`).
    seed : int, optional
        Shuffles the book's order.
    progress : bool
        A tqdm progress line on standard error with the running W/D/L, Elo and LLR.
    on_pair : callable, optional
        Called with each finished pair (in pair order) and the running result.

    Returns
    -------
    MatchResult

    Raises
    ------
    MatchError
        Bad settings, or a UCI engine that does not start or refuses an option (checked before any game).
    """
    if len(players) != 2:
        raise MatchError(f"a match has two players (got {len(players)})")
    if isinstance(games, bool) or not isinstance(games, int) or games <= 0 or games % 2:
        raise MatchError(f"the number of games must be even and > 0: each opening is played twice (got {games})")
    if concurrency < 1:
        raise MatchError(f"concurrency must be >= 1 (got {concurrency})")
    if not (math.isfinite(time_tolerance) and time_tolerance >= 0):
        raise MatchError(f"time tolerance must be >= 0 seconds (got {time_tolerance!r})")
    # a network file named relative to this directory, made absolute for workers that run elsewhere
    specs = [PlayerSpec(s.limits, s.uci, os.path.abspath(s.network), s.options, s.name)
             if s.network is not None and os.path.exists(s.network) else s for s in players]
    names = [s.label for s in specs]
    if names[0] == names[1]:  # told apart by their limits, else by their order
        tags = [str(s.limits) for s in specs] if specs[0].limits != specs[1].limits else ["#1", "#2"]
        specs = [PlayerSpec(s.limits, s.uci, s.network, s.options, f"{s.label} {t}") for s, t in zip(specs, tags)]
        names = [s.label for s in specs]
    check_players(specs)
    book = list(openings) if openings else [Opening(source="start position")]
    if seed is not None and openings:
        random.Random(seed).shuffle(book)
    pairs = games // 2
    date = datetime.date.today().strftime("%Y.%m.%d")
    result = MatchResult(names)
    if sprt is not None:
        result.sprt = {"elo0": sprt.elo0, "elo1": sprt.elo1, "alpha": sprt.alpha, "beta": sprt.beta,
                       "model": sprt.model}
        result.lower, result.upper, result.llr = sprt.lower, sprt.upper, 0.0
    out = open(pgn, "w", encoding="utf-8") if pgn is not None else None
    pending: dict[int, PairResult] = {}
    next_out = 0

    def tasks():
        for i in range(pairs):
            yield i, book[i % len(book)]

    from tqdm import tqdm

    bar = tqdm(total=games, unit="game", disable=not progress, dynamic_ncols=True, leave=True)

    def finished(pr: PairResult) -> bool:
        """Take a pair (any order); write and count the pairs now in order; True when the SPRT decided."""
        nonlocal next_out
        pending[pr.index] = pr
        decided = False
        while next_out in pending:
            p = pending.pop(next_out)
            next_out += 1
            result.add(p)
            if out is not None:
                for g in p.games:
                    out.write(g.pgn + "\n\n")
                out.flush()
            if sprt is not None:
                result.llr = sprt.llr(result.pentanomial)
                d = "H1" if result.llr > result.upper else "H0" if result.llr < result.lower else None
                if d is not None and result.sprt_result is None:
                    result.sprt_result = d
                    decided = True
            if on_pair is not None:
                on_pair(p, result)
            post = f"W{result.wins} D{result.draws} L{result.losses} Elo {_fixed(result.elo, '+.1f')}"
            if result.elo_error95 is not None:
                post += f"+-{result.elo_error95:.1f}"
            if result.llr is not None:
                post += f" LLR {_fixed(result.llr)}"
            bar.set_postfix_str(post, refresh=False)
            bar.update(2)
        return decided

    try:
        if scheduler or workers:
            _run_dask(specs, tasks(), adjudication, event, date, time_tolerance, scheduler, workers, finished, result)
        elif concurrency == 1:
            for i, opening in tasks():
                if finished(play_pair(specs, opening, i, adjudication, event, date, time_tolerance)):
                    result.stopped = "sprt"
                    break
        else:
            _run_pool(specs, tasks(), adjudication, event, date, time_tolerance, concurrency, finished, result)
    except KeyboardInterrupt:
        result.stopped = "interrupted"
    finally:
        bar.close()
        if out is not None:
            out.close()
        if not (scheduler or workers):
            close_players()
    if sprt is not None and result.sprt_result is None:
        result.sprt_result = "inconclusive"
    return result


def _run_pool(specs, tasks, adjudication, event, date, tolerance, concurrency, finished, result) -> None:
    """Play the pairs on ``concurrency`` threads (UCI engines only: each game's engines are processes of their own)
    or, with a network player (its search holds the interpreter), on as many processes started afresh
    (``spawn``: no fork of a process that runs threads)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait

    in_process = any(s.network is not None for s in specs)
    pool = ProcessPoolExecutor(concurrency, mp_context=multiprocessing.get_context("spawn")) if in_process else \
        ThreadPoolExecutor(concurrency, thread_name_prefix="match")
    todo = iter(tasks)
    with pool:
        running = set()
        stop = False
        try:
            while True:
                while not stop and len(running) < concurrency:
                    item = next(todo, None)
                    if item is None:
                        break
                    running.add(pool.submit(_play_pair_in_worker if in_process else play_pair, specs, item[1], item[0], adjudication, event, date, tolerance))
                if not running:
                    break
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    if finished(f.result()) and not stop:
                        stop, result.stopped = True, "sprt"
        finally:
            for f in running:
                f.cancel()
    # (the threads' engines are closed by play_match's close_players; a worker process closes its own after each
    # pair: _play_pair_in_worker)


def _play_pair_in_worker(*args):
    """:func:`play_pair` in a worker process, then quit its UCI engines: python-chess drives each from a non-daemon
    thread, and a worker that keeps one never exits, so the pool's shutdown would wait for ever."""
    try:
        return play_pair(*args)
    finally:
        close_players(uci_only=True)


def _run_dask(specs, tasks, adjudication, event, date, tolerance, scheduler, workers, finished, result) -> None:
    import dask
    from distributed import Client, LocalCluster

    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        with dask.config.set({"distributed.worker.profile.enabled": False}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
        client = Client(cluster)
    try:
        run_on_client(client, specs, tasks, adjudication, event, date, tolerance, finished, result)
    finally:
        try:
            client.run(close_players)
        except Exception:  # workers gone: their engines went with them
            pass
        client.close()
        if cluster is not None:
            cluster.close()


def run_on_client(client, specs, tasks, adjudication, event, date, tolerance, finished, result) -> None:
    """Submit the pairs of ``tasks`` to a Dask ``client`` (a window of twice its threads at a time) and feed each
    finished pair to ``finished`` as it comes back (``as_completed``); an SPRT decision cancels the rest."""
    from distributed import as_completed

    import uuid

    threads = max(1, sum(client.nthreads().values()))
    run = uuid.uuid4().hex[:12]  # task keys of this match (a scheduler may serve several)
    todo = iter(tasks)
    window = 2 * threads
    futures = []
    for _ in range(window):
        item = next(todo, None)
        if item is None:
            break
        futures.append(client.submit(play_pair, specs, item[1], item[0], adjudication, event, date, tolerance,
                                     pure=False, key=f"match-{run}-pair-{item[0]}"))
    stream = as_completed(futures)
    stop = False
    for f in stream:
        if finished(f.result()) and not stop:
            stop, result.stopped = True, "sprt"
            for other in futures:
                if not other.done():
                    other.cancel()
            break
        item = next(todo, None)
        if item is not None:
            new = client.submit(play_pair, specs, item[1], item[0], adjudication, event, date, tolerance, pure=False,
                                key=f"match-{run}-pair-{item[0]}")
            futures.append(new)
            stream.add(new)


def write_json(result: MatchResult, path: str | os.PathLike) -> None:
    """Write ``result.to_dict()`` to ``path`` as JSON (via a temporary file, renamed: a reader never sees half)."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result.to_dict(), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
