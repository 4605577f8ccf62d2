"""Matches between chess engines: game pairs from an opening book, adjudication, PGN, pentanomial Elo and SPRT.

A match plays game pairs: each opening twice, the engines swapping colours, so that an opening's bias cancels
and the pair's two results give the pentanomial counts fishtest's statistics use
(:mod:`nnue_infer.search.statistics`).  The concepts, one module each:

* :mod:`.players`: a UCI engine run as a subprocess, or a network searched in process, with its limits;
* :mod:`.openings`: the opening book (EPD/FEN or PGN files) or generated openings;
* :mod:`.adjudication`: the end of a game by the rules or by the engines' scores;
* :mod:`.games`: one game and one game pair, written as PGN;
* :mod:`.runner`: the match (pairs in turn, on threads or on a Dask cluster), its result and the SPRT.

An engine that crashes, hangs or sends an illegal move loses that game, with the reason recorded in the PGN and
the result; the match goes on (a crashed engine is started again for the next game).  Entry point:
:func:`play_match` (``nnue-infer match`` on the command line).
"""

from ...errors import MatchError
from .adjudication import MATE_CP, Adjudication, adjudicate, game_end
from .games import TIME_TOLERANCE, GameRecord, PairResult, play_game, play_pair
from .openings import Opening, generate_openings, read_openings
from .players import (ABANDONED, ADJUDICATION, HANG_GRACE, HANG_TIMEOUT, NORMAL, RULES_INFRACTION, START_TIMEOUT,
                      TIME_FORFEIT, Limits, MoveReport, NetworkPlayer, PlayerSpec, TimeControl, UciPlayer,
                      check_players, close_players, parse_uci_options)
from .runner import MatchResult, play_match, run_on_client, write_json

__all__ = [
    "ABANDONED", "ADJUDICATION", "HANG_GRACE", "HANG_TIMEOUT", "MATE_CP", "NORMAL", "RULES_INFRACTION",
    "START_TIMEOUT", "TIME_FORFEIT", "TIME_TOLERANCE", "Adjudication", "GameRecord", "Limits", "MatchError",
    "MatchResult", "MoveReport", "NetworkPlayer", "Opening", "PairResult", "PlayerSpec", "TimeControl", "UciPlayer",
    "adjudicate", "check_players", "close_players", "game_end", "generate_openings", "parse_uci_options",
    "play_game", "play_match", "play_pair", "read_openings", "run_on_client", "write_json",
]
