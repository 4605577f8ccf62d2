"""The match runner against real engines: Debian's Stockfish 15.1 and python-chess as the referee."""

from __future__ import annotations

import json
import os
import sys

import chess
import chess.pgn
import pytest

pytest.importorskip("scipy")
from nnue_infer.search.match import players as players_module  # noqa: E402
from nnue_infer.search.match import (  # noqa: E402
    Adjudication,
    Limits,
    MatchError,
    Opening,
    PlayerSpec,
    TimeControl,
    adjudicate,
    game_end,
    play_match,
    read_openings,
)
from nnue_infer.search.statistics import SPRT  # noqa: E402

STOCKFISH = "/usr/games/stockfish"
FAKE = [sys.executable, os.path.join(os.path.dirname(__file__), "fake_uci_engine.py")]
needs_stockfish = pytest.mark.skipif(not os.path.exists(STOCKFISH), reason="Debian's stockfish is not installed")

BOOK = ["rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
        "rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - 0 1",
        "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"]


def _stockfish(nodes: int, name: str) -> PlayerSpec:
    return PlayerSpec(Limits(nodes=nodes), uci=STOCKFISH, name=name)


def _games(path) -> list[chess.pgn.Game]:
    games = []
    with open(path, encoding="utf-8") as f:
        while (g := chess.pgn.read_game(f)) is not None:
            games.append(g)
    return games


@pytest.fixture(scope="module")
def book_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("book") / "book.epd"
    path.write_text("# three openings\n" + "\n".join(BOOK) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def local_run(book_file, tmp_path_factory):
    """Stockfish at 400 nodes against itself at 200 nodes: 3 pairs from the book, one thread."""
    out = tmp_path_factory.mktemp("local") / "games.pgn"
    specs = [_stockfish(400, "sf400"), _stockfish(200, "sf200")]
    result = play_match(specs, games=6, openings=read_openings(book_file), pgn=out)
    return result, out


@needs_stockfish
def test_a_short_match_counts_every_game_and_pair(local_run):
    result, _ = local_run
    assert result.games == 6
    assert result.wins + result.draws + result.losses == 6
    assert sum(result.pentanomial) == 3
    # each pair's points for the first engine, from its W/D/L: the pentanomial holds them all
    assert sum(i * c for i, c in enumerate(result.pentanomial)) == 2 * result.wins + result.draws
    assert result.players == ["sf400", "sf200"]


@needs_stockfish
def test_the_pgn_replays_legally_with_colours_swapped_in_each_pair(local_run):
    result, path = local_run
    games = _games(path)
    assert len(games) == 6
    points = 0.0
    for i, g in enumerate(games):
        assert not g.errors, g.errors  # python-chess replays every move; an illegal one would be an error
        pair, second = divmod(i, 2)
        assert g.headers["Round"] == f"{pair + 1}.{second + 1}"
        assert g.headers["FEN"] == BOOK[pair] and g.headers["SetUp"] == "1"
        assert (g.headers["White"], g.headers["Black"]) == (("sf400", "sf200") if second == 0 else ("sf200", "sf400"))
        board = g.end().board()
        if g.headers["Termination"] == "normal":
            assert game_end(board) == (g.headers["Result"], g.end().comment.split(" ", 1)[-1].strip()) or \
                game_end(board)[0] == g.headers["Result"]
        white_points = {"1-0": 1, "0-1": 0, "1/2-1/2": 0.5}[g.headers["Result"]]
        points += white_points if second == 0 else 1 - white_points
        for node in list(g.mainline())[:3]:  # each engine move carries its score and depth
            assert node.comment.startswith(("+", "-", "?")) and "/" in node.comment
    assert points == result.wins + result.draws / 2


@needs_stockfish
def test_fixed_node_matches_repeat_exactly_at_any_concurrency(local_run, book_file, tmp_path):
    result, path = local_run
    out = tmp_path / "threads.pgn"
    again = play_match([_stockfish(400, "sf400"), _stockfish(200, "sf200")], games=6,
                       openings=read_openings(book_file), pgn=out, concurrency=2)
    assert again.pentanomial == result.pentanomial
    assert out.read_text() == path.read_text()


@needs_stockfish
def test_a_dask_cluster_gives_the_same_games(local_run, book_file, tmp_path):
    distributed = pytest.importorskip("distributed")
    result, path = local_run
    out = tmp_path / "dask.pgn"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        remote = play_match([_stockfish(400, "sf400"), _stockfish(200, "sf200")], games=6,
                            openings=read_openings(book_file), pgn=out, scheduler=c.scheduler_address)
    assert remote.pentanomial == result.pentanomial
    assert (remote.wins, remote.draws, remote.losses) == (result.wins, result.draws, result.losses)
    assert out.read_text() == path.read_text()


@needs_stockfish
def test_an_sprt_stops_the_match_once_decided():
    # full strength against 1 node per move: every pair is won twice, and a logistic SPRT of 0 vs 400 Elo decides
    test = SPRT(0, 400, 0.05, 0.05, "logistic")
    specs = [_stockfish(2000, "strong"), PlayerSpec(Limits(depth=1), uci=STOCKFISH, name="weak",
                                                    options={"Skill Level": "0"})]
    result = play_match(specs, games=40, sprt=test, openings=[Opening(f) for f in BOOK])
    assert result.sprt_result == "H1" and result.stopped == "sprt"
    assert result.llr > result.upper
    assert result.games < 40


def _forfeit_match(mode_args, tmp_path, limits=Limits(nodes=100)):
    specs = [PlayerSpec(limits, uci=FAKE + mode_args, name="fake"),
             PlayerSpec(Limits(depth=1), uci=STOCKFISH, name="sf")]
    out = tmp_path / "f.pgn"
    return play_match(specs, games=2, pgn=out), _games(out)


@needs_stockfish
@pytest.mark.parametrize("mode, termination, words", [
    (["crash"], "abandoned", "crashed"),
    (["illegal"], "rules infraction", "illegal move"),
])
def test_a_crashing_or_illegal_engine_loses_each_game_with_the_reason(mode, termination, words, tmp_path):
    result, games = _forfeit_match(mode, tmp_path)
    assert (result.wins, result.draws, result.losses) == (0, 0, 2)
    assert result.pentanomial == [1, 0, 0, 0, 0]
    assert len(result.forfeits) == 2
    assert all(f["termination"] == termination and words in f["reason"] for f in result.forfeits)
    assert [g.headers["Termination"] for g in games] == [termination] * 2
    assert [g.headers["Result"] for g in games] == ["0-1", "1-0"]  # fake White, then fake Black
    assert words in (games[0].comment + games[0].end().comment)


@needs_stockfish
def test_a_hung_engine_is_killed_and_loses(tmp_path, monkeypatch):
    monkeypatch.setattr(players_module, "HANG_TIMEOUT", 1.5)
    result, games = _forfeit_match(["hang"], tmp_path)
    assert result.losses == 2
    assert all("hung" in f["reason"] for f in result.forfeits)


@needs_stockfish
def test_a_side_over_its_clock_loses_on_time(tmp_path):
    result, games = _forfeit_match(["slow", "0.5"], tmp_path, limits=Limits(tc=TimeControl(0.2, 0)))
    assert result.losses == 2
    assert [g.headers["Termination"] for g in games] == ["time forfeit"] * 2
    assert "loses on time" in result.forfeits[0]["reason"]


def test_an_engine_that_is_not_uci_or_missing_is_refused_before_any_game(tmp_path):
    for cmd, words in ((["/nonexistent/engine"], "command not found"), (["true"], "did not start as a UCI engine")):
        spec = PlayerSpec(Limits(nodes=10), uci=cmd)
        with pytest.raises(MatchError, match=words):
            play_match([spec, spec], games=2)
    spec = PlayerSpec(Limits(nodes=10), uci=FAKE + ["legal"], options={"NoSuchOption": "1"})
    with pytest.raises(MatchError, match="has no option 'NoSuchOption'"):
        play_match([spec, spec], games=2)
    from nnue_infer.errors import NetworkNotFoundError

    missing = str(tmp_path / "missing.nnue")
    with pytest.raises(NetworkNotFoundError, match="missing.nnue"):
        play_match([PlayerSpec(Limits(nodes=10), network=missing), spec], games=2)


def test_bad_limits_and_games_are_refused():
    with pytest.raises(MatchError, match="exactly one limit"):
        Limits()
    with pytest.raises(MatchError, match="exactly one limit"):
        Limits(nodes=5, depth=3)
    with pytest.raises(MatchError, match="nodes must be a whole number > 0"):
        Limits(nodes=0)
    with pytest.raises(MatchError, match="time control 'ten'"):
        TimeControl.parse("ten")
    assert TimeControl.parse("10+0.1") == TimeControl(10, 0.1)
    spec = PlayerSpec(Limits(nodes=10), uci=FAKE + ["legal"])
    with pytest.raises(MatchError, match="must be even"):
        play_match([spec, spec], games=3)


def test_bad_books_name_the_file_and_line(tmp_path):
    with pytest.raises(MatchError, match="cannot read the opening book"):
        read_openings(str(tmp_path / "missing.epd"))
    bad = tmp_path / "bad.epd"
    bad.write_text(BOOK[0] + "\nnot a position at all\n")
    with pytest.raises(MatchError, match=r"bad.epd, line 2"):
        read_openings(str(bad))
    empty = tmp_path / "empty.epd"
    empty.write_text("\n# nothing\n")
    with pytest.raises(MatchError, match="no opening"):
        read_openings(str(empty))
    with pytest.raises(MatchError, match="unknown opening book kind '.csv'"):
        read_openings(str(tmp_path / "x.csv"))
    pgn = tmp_path / "book.pgn"
    pgn.write_text('[Event "a"]\n\n1. e4 e5 2. Nf3 Nc6 *\n\n[Event "b"]\n\n1. d4 d5 2. Ke3 *\n')
    with pytest.raises(MatchError, match="game 2: illegal san"):
        read_openings(str(pgn))


def test_a_pgn_book_gives_its_games_main_lines_cut_to_the_plies(tmp_path):
    pgn = tmp_path / "book.pgn"
    pgn.write_text('[Event "a"]\n\n1. e4 e5 2. Nf3 (2. f4) 2... Nc6 *\n\n[Event "b"]\n\n1. d4 d5 *\n')
    openings = read_openings(str(pgn), plies=3)
    assert [o.moves for o in openings] == [("e2e4", "e7e5", "g1f3"), ("d2d4", "d7d5")]
    assert openings[0].board().fen() == "rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 1 2"


# ------------------------------------------------------------------------------------------ adjudication rules

def _board(fen=chess.STARTING_FEN, moves=()):
    b = chess.Board(fen)
    for m in moves:
        b.push_uci(m)
    return b


def test_resign_needs_both_engines_to_agree_for_n_moves():
    rules = Adjudication(resign_moves=2, resign_score=500)
    board = _board()
    W, B = chess.WHITE, chess.BLACK
    agreed = [(W, 20), (B, -30), (W, 600), (B, -700), (W, 650), (B, -800)]
    assert adjudicate(board, agreed, rules)[0] == "1-0"
    assert "Black resigns" in adjudicate(board, agreed, rules)[1]
    one_sided = [(W, 600), (B, -100), (W, 650), (B, -800)]  # Black's engine did not agree every move
    assert adjudicate(board, one_sided, rules) is None
    too_short = [(W, 20), (B, -30), (W, 600), (B, -700)]
    assert adjudicate(board, too_short, rules) is None
    white_lost = [(W, -600), (B, 100000), (W, -700), (B, 900)]  # a mate score counts as a large score
    assert adjudicate(board, white_lost, rules)[0] == "0-1"
    assert adjudicate(board, [(W, -600), (B, None), (W, -700), (B, 900)], rules) is None


def test_draw_adjudication_waits_for_the_move_number_and_the_streak():
    rules = Adjudication(draw_moves=2, draw_score=10, draw_after=30)
    quiet = [(chess.WHITE, 5), (chess.BLACK, -3), (chess.WHITE, 0), (chess.BLACK, 10)]
    early = _board("8/8/4k3/8/8/3QK3/8/7q w - - 0 12")
    late = _board("8/8/4k3/8/8/3QK3/8/7q w - - 0 30")
    assert adjudicate(early, quiet, rules) is None
    assert adjudicate(late, quiet, rules)[0] == "1/2-1/2"
    assert adjudicate(late, quiet[:-1] + [(chess.BLACK, 11)], rules) is None


def test_max_moves_counts_the_games_moves():
    rules = Adjudication(max_moves=2)
    assert adjudicate(_board(moves=["e2e4", "e7e5", "g1f3"]), [], rules) is None
    assert adjudicate(_board(moves=["e2e4", "e7e5", "g1f3", "b8c6"]), [], rules) == \
        ("1/2-1/2", "draw adjudicated (game reached 2 moves)")


def test_the_games_own_end_is_recognised():
    assert game_end(_board(moves=["f2f3", "e7e5", "g2g4", "d8h4"])) == ("0-1", "checkmate")
    assert game_end(_board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")) == ("1/2-1/2", "stalemate")
    assert game_end(_board("8/8/4k3/8/8/3NK3/8/8 w - - 0 1")) == ("1/2-1/2", "insufficient material")
    shuffle = ["g1f3", "g8f6", "f3g1", "f6g8"] * 2
    assert game_end(_board(moves=shuffle)) == ("1/2-1/2", "threefold repetition")
    assert game_end(_board("8/8/4k3/8/8/3QK3/8/7q w - - 100 80")) == ("1/2-1/2", "fifty-move rule")
    assert game_end(_board()) is None


# --------------------------------------------------------------------------------------------------------- CLI

def _cli(*args):
    from nnue_infer.cli.main import main

    return main(list(args))


def test_the_command_reports_bad_input_clearly(capsys, tmp_path):
    assert _cli("match", "--uci", "/nonexistent/sf", "--uci", "/nonexistent/sf", "--nodes", "10", "--games", "2") == 1
    assert "command not found" in capsys.readouterr().err
    assert _cli("match", "--uci", "x", "--nodes", "10", "--games", "2") == 2
    assert "two players" in capsys.readouterr().err
    assert _cli("match", "--uci", "x", "--uci", "y", "--games", "2") == 2
    assert "player 1 needs exactly one of --nodes" in capsys.readouterr().err
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "3:10", "--games", "2") == 2
    assert "player 3 does not exist" in capsys.readouterr().err
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "5", "--games", "3") == 2
    assert "odd" in capsys.readouterr().err
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "5", "--games", "2", "--sprt", "5", "0", "0.05",
                "0.05") == 2
    assert "elo0 must be below elo1" in capsys.readouterr().err
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "5", "--games", "2", "--openings",
                str(tmp_path / "none.epd")) == 1
    assert "cannot read the opening book" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--pgn", "--json"])
def test_the_command_refuses_an_output_in_a_missing_directory_before_any_game(capsys, tmp_path, option):
    target = tmp_path / "missing" / "out"
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "5", "--games", "2", option, str(target)) == 2
    err = capsys.readouterr().err
    assert option in err and "does not exist" in err and "Traceback" not in err
    assert not target.parent.exists()


def test_the_command_names_a_missing_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "scipy", None)  # `import scipy` raises ImportError
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "5", "--games", "2") == 1
    err = capsys.readouterr().err
    assert "pip install 'nnue-infer[match]'" in err and "Traceback" not in err
    monkeypatch.delitem(sys.modules, "scipy")
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert _cli("match", "--uci", "x", "--uci", "y", "--nodes", "5", "--games", "2", "--workers", "1") == 1
    assert "pip install 'nnue-infer[dask]'" in capsys.readouterr().err


@needs_stockfish
def test_the_command_writes_pgn_and_json(capsys, tmp_path, book_file):
    pgn, js = tmp_path / "m.pgn", tmp_path / "m.json"
    status = _cli("match", "--uci", STOCKFISH, "--uci", STOCKFISH, "--nodes", "1:300", "--nodes", "2:100", "--games",
                  "4", "--openings", book_file, "--pgn", str(pgn), "--json", str(js), "--sprt", "0", "5", "0.05",
                  "0.05", "--seed", "3", "--max-moves", "60", "--quiet")
    assert status == 0, capsys.readouterr().err
    data = json.loads(js.read_text())
    assert data["games"] == 4 and data["wins"] + data["draws"] + data["losses"] == 4 and sum(data["pentanomial"]) == 2
    assert {"elo", "elo_error95", "llr", "lower", "upper", "sprt_result"} <= set(data)
    assert data["sprt_result"] in ("H0", "H1", "inconclusive")
    assert len(_games(pgn)) == 4
    out = capsys.readouterr().out
    assert "Ptnml(0-2):" in out and "Elo:" in out and "LLR:" in out


# ------------------------------------------------------------------------------------------ in-process networks

def _net(nodes: int, name: str) -> PlayerSpec:
    return PlayerSpec(Limits(nodes=nodes), network="default", name=name)


def test_networks_play_in_process_with_the_same_games_on_processes_and_dask(tmp_path):
    pytest.importorskip("nnue_infer.search.engine")
    one, two = tmp_path / "one.pgn", tmp_path / "two.pgn"
    rules = Adjudication(max_moves=30)
    book = [Opening(f) for f in BOOK[:2]]
    specs = [_net(300, "net300"), _net(150, "net150")]
    a = play_match(specs, games=4, openings=book, pgn=one, adjudication=rules)
    b = play_match(specs, games=4, openings=book, pgn=two, adjudication=rules, concurrency=2)
    assert a.games == 4 and sum(a.pentanomial) == 2 and not a.forfeits
    assert b.pentanomial == a.pentanomial
    assert one.read_text() == two.read_text()
    distributed = pytest.importorskip("distributed")
    three = tmp_path / "three.pgn"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        d = play_match(specs, games=4, openings=book, pgn=three, adjudication=rules, scheduler=c.scheduler_address)
    assert d.pentanomial == a.pentanomial and three.read_text() == one.read_text()
    for g in _games(one):
        assert not g.errors
        assert g.headers["White"] in ("net300", "net150")


@needs_stockfish
def test_a_network_plays_a_uci_engine(tmp_path):
    pytest.importorskip("nnue_infer.search.engine")
    specs = [_net(200, "net"), PlayerSpec(Limits(depth=1), uci=STOCKFISH, name="sf")]
    result = play_match(specs, games=2, openings=[Opening(BOOK[2])], adjudication=Adjudication(max_moves=40),
                        pgn=tmp_path / "g.pgn")
    assert result.games == 2 and not result.forfeits
    games = _games(tmp_path / "g.pgn")
    assert [g.headers["White"] for g in games] == ["net", "sf"]
    assert all(not g.errors for g in games)


@needs_stockfish
def test_a_network_and_a_uci_engine_on_worker_processes_finish(tmp_path):
    """Each worker process quits its UCI engines after a pair: python-chess drives one from a non-daemon thread, and
    a worker that kept it would never exit (the match would hang at the pool's shutdown).  Run as a command in a
    session of its own, killed after a time-out, so that a hang fails instead of stalling the suite."""
    import signal
    import subprocess

    pytest.importorskip("nnue_infer.search.engine")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "nnue_infer", "match", "--net", "default", "--uci", STOCKFISH, "--nodes", "500",
           "--games", "2", "--concurrency", "2", "--json", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("a network against a UCI engine at concurrency 2 did not finish within 600 s")
    assert proc.returncode == 0, stderr
    result = json.loads(out.read_text())
    assert result["games"] == 2 and sum(result["pentanomial"]) == 1


def test_an_engine_silent_at_start_is_refused_with_the_wait_and_the_expected_reply(monkeypatch):
    """``cat`` echoes ``uci`` back and never says ``uciok``: the error names the wait and the reply expected."""
    monkeypatch.setattr(players_module, "START_TIMEOUT", 1.0)
    spec = PlayerSpec(Limits(nodes=10), uci=["cat"])
    with pytest.raises(MatchError) as info:
        play_match([spec, spec], games=2)
    import gc
    import warnings

    with warnings.catch_warnings():  # python-chess leaves the timed-out process to its pipe's end: collect it here
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    message = str(info.value)
    assert "no 'uciok' within 1 s" in message and "'cat'" in message
    assert "TimeoutError: )" not in message


def test_the_summary_never_prints_a_negative_zero():
    """Elo, nElo and the LLR that round to zero print ``0.00`` (a symmetric result's float noise has a sign)."""
    from nnue_infer.search.match import MatchResult

    result = MatchResult(["a", "b"], games=2, wins=1, losses=1, pentanomial=[0, 0, 1, 0, 0], elo=-0.0,
                         elo_error95=34.0, nelo=-1e-12, nelo_error95=480.0, llr=-0.004, lower=-2.94, upper=2.94,
                         sprt_result="inconclusive",
                         sprt={"elo0": -0.0, "elo1": 2.0, "alpha": 0.05, "beta": 0.05, "model": "normalized"})
    text = result.summary()
    assert "-0.00" not in text and "Elo: 0.00 +- 34.0" in text and "nElo: 0.00" in text
    assert "LLR: 0.00 (-2.94,2.94) [0.00,2.00]" in text


def test_the_summary_says_a_perfect_score_gives_a_clamped_bound():
    """All games won (or lost): the printed Elo is the clamp's, and the summary says so; a mixed result says nothing."""
    from nnue_infer.search.match import MatchResult

    for wins, losses, pentanomial, word in ((4, 0, [0, 0, 0, 0, 2], "won"), (0, 4, [2, 0, 0, 0, 0], "lost")):
        result = MatchResult(["a", "b"], games=4, wins=wins, losses=losses, pentanomial=pentanomial)
        result._estimate()
        assert f"every game {word}: the Elo and nElo above come from the score clamped" in result.summary()
        assert abs(result.elo) > 1000  # the clamp's value, as the line says
    mixed = MatchResult(["a", "b"], games=4, wins=3, losses=1, pentanomial=[0, 0, 1, 0, 1])
    mixed._estimate()
    assert "clamped" not in mixed.summary()


def test_the_command_lines_manual_names_every_match_option():
    """docs/command-line.md's synopsis of ``match`` keeps up with the options ``match --help`` lists."""
    from nnue_infer.cli.match import match_cmd

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "command-line.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Matches"):]
    names = [max(p.opts, key=len) for p in match_cmd.params if p.opts and p.opts[0].startswith("-")]
    assert "--time-margin" in names and "--progress" in names
    missing = [n for n in names if n not in section]
    assert not missing, f"docs/command-line.md's match section does not name {missing}"
