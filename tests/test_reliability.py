"""Issue 8 (reliability): an operation that fails leaves the object as it was, bad input gets a
clear error, and nothing gives a silent wrong number.  Each test names the item it pins; each
failed before its fix.

Items covered here: 1 (network switch), 7 (wrong argument types), 11 (API misuse),
12 (variant boards), 14 (one Evaluator, several threads).
"""

from __future__ import annotations

import random
import sys
import threading
import warnings

import chess
import chess.variant
import numpy as np
import pytest

import nnue_infer
from nnue_infer import Architecture, ConcurrentUseError, Evaluator, FloatNetwork, HiddenLayer, PositionError, quantise

FENS = [
    chess.STARTING_FEN,
    "4k3/8/8/8/8/8/8/Q3K3 w - - 0 1",
    "q3k3/8/8/8/8/8/8/4K3 w - - 0 1",
    "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1",
]
GAME = ["e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "g8f6", "e1g1", "f8c5"]


def small_net(ft_width: int, psqt_buckets: int, output_buckets: int, king_buckets, mirror, seed: int):
    """A random quantised Chess768 network; ``king_buckets`` None or a 64-entry table."""
    arch = Architecture("Chess768", ft_width, "pairwise", 127, 7, psqt_buckets=psqt_buckets,
                        output_buckets=output_buckets, layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")),
                        king_buckets=king_buckets, mirror=mirror)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saturated random parameters do not matter here
        return quantise(FloatNetwork.random(arch, seed=seed))


@pytest.fixture(scope="module")
def networks(network):
    """Networks that differ in every dimension the evaluator's buffers depend on."""
    return [
        network,  # Stockfish 15.1: HalfKAv2_hm, 1024 wide, 8 PSQT buckets, 8 layer stacks
        nnue_infer.default_network(),  # Chess768, 4 mirrored king buckets, 256 wide
        quantise(FloatNetwork.random(Architecture("Chess768", 256, "pairwise", 127, 7, psqt_buckets=0,
                                                  output_buckets=1, layers=(HiddenLayer(1, "none"),)))),
        small_net(64, 8, 8, None, None, 1),
        small_net(64, 0, 2, tuple(sq // 8 for sq in range(64)), "none", 2),  # 8 king buckets, no mirror
        small_net(32, 4, 4, tuple(sq % 2 for sq in range(64)), "e-h", 3),
    ]


def reference_values(net) -> dict:
    """What a fresh Evaluator on ``net`` computes: per FEN, and along GAME."""
    ev = Evaluator(net)
    return {"fens": [ev.evaluate(f) for f in FENS],
            "game": ev.evaluate_game(chess.Board(), GAME).tolist()}


def test_item1_issue_reproducer():
    """Item 1: switching to a network with other PSQT buckets raised half-way and left the evaluator
    half-switched (``ev.network is b`` but evaluate gave the old network's value: 1962, want 133)."""
    a = nnue_infer.default_network()
    b = quantise(FloatNetwork.random(Architecture("Chess768", 256, "pairwise", 127, 7, psqt_buckets=0,
                                                  output_buckets=1, layers=(HiddenLayer(1, "none"),))))
    ev = Evaluator(a)
    ev.evaluate("4k3/8/8/8/8/8/8/Q3K3 w - - 0 1")
    ev.network = b
    fen = "q3k3/8/8/8/8/8/8/4K3 w - - 0 1"
    assert ev.network is b
    assert ev.evaluate(fen) == ev.evaluate_batch([fen])[0] == Evaluator(b).evaluate(fen)


def test_item1_random_switches_give_the_new_networks_numbers(networks):
    """Item 1: random switches among networks of different widths, PSQT buckets, king buckets and
    mirroring, mid-game; every path (fresh, incremental, batch, game, trace) gives a fresh evaluator's numbers."""
    refs = [reference_values(n) for n in networks]
    rng = random.Random(8)
    ev = Evaluator(networks[0])
    ev.set_position(chess.Board())
    for step in range(60):
        k = rng.randrange(len(networks))
        ev.network = networks[k]
        assert ev.network is networks[k]
        ref = refs[k]
        ply = rng.randrange(len(GAME) + 1)  # the board is kept over the switch: move along it
        while len(ev.board.move_stack) > ply:
            ev.pop()
        while len(ev.board.move_stack) < ply:
            ev.push(chess.Move.from_uci(GAME[len(ev.board.move_stack)]))
        assert ev.evaluate() == ref["game"][ply], (step, k, ply)
        i = rng.randrange(len(FENS))
        assert ev.evaluate(FENS[i]) == ref["fens"][i]
        assert ev.evaluate_batch(FENS).tolist() == ref["fens"]
        assert ev.evaluate_game(chess.Board(), GAME).tolist() == ref["game"]
        assert ev.trace(FENS[i]).value == ref["fens"][i]
        assert ev.evaluate() == ref["game"][ply]  # the incremental state survived the other calls


def test_item1_a_failed_switch_changes_nothing(networks, monkeypatch):
    """Item 1: a switch that fails (while building the new state, or for a non-network) raises and
    leaves the evaluator exactly as it was, still giving the old network's numbers."""
    ev = Evaluator(networks[1])
    ev.set_position(chess.Board())
    for uci in GAME[:3]:
        ev.push(chess.Move.from_uci(uci))
    before = (ev.evaluate(), ev.evaluate(FENS[3]), ev.board.fen())
    with pytest.raises(TypeError, match="expected a Network"):
        ev.network = 42
    with pytest.raises(FileNotFoundError):
        ev.network = "no-such-net.nnue"
    import nnue_infer.evaluator as E

    def broken(arch):
        raise MemoryError("simulated failure while building the new state")

    monkeypatch.setattr(E, "architecture_features", broken)
    with pytest.raises(MemoryError):
        ev.network = networks[0]
    monkeypatch.undo()
    assert ev.network is networks[1]
    assert (ev.evaluate(), ev.evaluate(FENS[3]), ev.board.fen()) == before
    ev.pop()
    assert ev.evaluate() == reference_values(networks[1])["game"][2]


# --- item 7, 11: wrong argument types -----------------------------------------------------------

@pytest.mark.parametrize("bad", [None, 42, b"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", ["a"]])
def test_item7_module_evaluate_refuses_non_boards(bad):
    """Item 7: ``nnue_infer.evaluate(None)`` returned the thread-cached evaluator's current position (69)."""
    nnue_infer.evaluate(chess.STARTING_FEN)  # the cached evaluator exists
    with pytest.raises(TypeError, match="expected a chess.Board or a FEN string"):
        nnue_infer.evaluate(bad)


def test_item11_evaluate_game_refuses_a_single_uci_string(evaluator):
    """Item 11: ``evaluate_game(board, "e2e4")`` iterated the string's characters."""
    with pytest.raises(TypeError, match="single str"):
        evaluator.evaluate_game(chess.Board(), "e2e4")
    with pytest.raises(TypeError, match="single Move"):
        nnue_infer.evaluate_game(chess.Board(), chess.Move.from_uci("e2e4"))


@pytest.mark.parametrize("validate", [True, False])
def test_item11_push_none_is_a_type_error(network, validate):
    """Item 11: ``push(None, validate=False)`` raised ``AttributeError``; nothing changes."""
    ev = Evaluator(network)
    before = ev.evaluate()
    with pytest.raises(TypeError, match="expected a chess.Move, got NoneType"):
        ev.push(None, validate=validate)
    assert ev.board.move_stack == [] and ev.evaluate() == before


# --- item 12: variant boards ------------------------------------------------------------------

VARIANTS = [chess.variant.RacingKingsBoard(), chess.variant.AtomicBoard(), chess.variant.CrazyhouseBoard(),
            chess.variant.ThreeCheckBoard(), chess.variant.AntichessBoard(), chess.variant.HordeBoard()]


@pytest.mark.parametrize("board", VARIANTS, ids=lambda b: b.uci_variant)
def test_item12_variant_boards_are_refused_everywhere(evaluator, board):
    """Item 12: variant boards were evaluated by evaluate, evaluate_batch and trace but refused
    by set_position and evaluate_game; now every entry point refuses them with one message."""
    message = f"chess variant '{board.uci_variant}' \\({type(board).__name__}\\) is not supported"
    calls = [
        lambda: evaluator.evaluate(board),
        lambda: evaluator.evaluate_cp(board),
        lambda: evaluator.evaluate_batch([chess.Board(), board]),
        lambda: evaluator.trace(board),
        lambda: evaluator.set_position(board),
        lambda: evaluator.evaluate_game(board, []),
        lambda: nnue_infer.evaluate(board),
        lambda: nnue_infer.evaluate_batch([board]),
        lambda: nnue_infer.evaluate_game(board, []),
    ]
    for call in calls:
        with pytest.raises(PositionError, match=message):
            call()
    assert evaluator.evaluate(chess.Board(chess960=True)) == evaluator.evaluate(chess.Board())  # Chess960 is fine


# --- item 14: one Evaluator, several threads --------------------------------------------------

def test_item14_concurrent_use_raises(network):
    """Item 14: a call made while another thread is inside a call on the same Evaluator raises
    ``ConcurrentUseError`` instead of corrupting the other call's accumulators."""
    ev = Evaluator(network)
    inside, release = threading.Event(), threading.Event()
    result = {}

    class SlowBoard(chess.Board):  # evaluate_game copies the start board while holding the evaluator
        def copy(self, *args, **kwargs):
            inside.set()
            release.wait(10)
            return chess.Board(self.fen()).copy(*args, **kwargs)

    def worker():
        result["values"] = ev.evaluate_game(SlowBoard(), GAME).tolist()

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(10)
    calls = [ev.evaluate, lambda: ev.evaluate(FENS[1]), lambda: ev.push(chess.Move.from_uci("e2e4")), ev.pop,
             lambda: ev.set_position(chess.Board()), lambda: ev.trace(FENS[1]), ev.refresh,
             lambda: ev.evaluate_game(chess.Board(), GAME), lambda: ev.evaluate_cp(FENS[1])]
    for call in calls:
        with pytest.raises(ConcurrentUseError, match="used by another thread at the same time"):
            call()
    with pytest.raises(ConcurrentUseError):
        ev.network = nnue_infer.default_network()
    assert ev.evaluate_batch(FENS).tolist() == Evaluator(network).evaluate_batch(FENS).tolist()  # safe, allowed
    release.set()
    t.join()
    assert result["values"] == Evaluator(network).evaluate_game(chess.Board(), GAME).tolist()
    assert ev.network is network and ev.evaluate() == 69  # usable again, unchanged


def test_item14_reentrant_use_is_named(network):
    """A call from code the evaluator runs inside one of its calls (here a method of a board subclass given to
    evaluate_game; a move iterator is read before the call takes the evaluator) raises ConcurrentUseError whose
    message names that case, not only another thread."""
    ev = Evaluator(network)

    class PeekingBoard(chess.Board):
        def copy(self, *args, **kwargs):
            ev.evaluate()
            return chess.Board(self.fen()).copy(*args, **kwargs)

    with pytest.raises(ConcurrentUseError, match="called again from code that call runs"):
        ev.evaluate_game(PeekingBoard(), GAME[:2])
    assert ev.evaluate_game(chess.Board(), GAME[:2]).tolist() == Evaluator(network).evaluate_game(chess.Board(), GAME[:2]).tolist()


def test_item14_threads_sharing_an_evaluator_never_get_a_wrong_number(network):
    """Item 14: 4 threads evaluating on one Evaluator (13 of 7,998 results were wrong before):
    every call returns the right number or raises ConcurrentUseError."""
    ev = Evaluator(network)
    ref = Evaluator(network)
    fens = [b.fen() for b in _game_boards()] + FENS
    truth = [ref.evaluate(f) for f in fens]
    game_truth = ref.evaluate_game(chess.Board(), GAME).tolist()
    wrong, counts = [], {"done": 0, "refused": 0}
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(400):
            i = rng.randrange(len(fens))
            try:
                if rng.random() < 0.8:
                    got, want = ev.evaluate(fens[i]), truth[i]
                else:
                    got, want = ev.evaluate_game(chess.Board(), GAME).tolist(), game_truth
            except ConcurrentUseError:
                counts["refused"] += 1
                continue
            counts["done"] += 1
            if got != want:
                wrong.append((seed, i, got, want))

    try:
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert wrong == []
    assert counts["done"] + counts["refused"] == 1600
    assert counts["refused"] > 0  # the threads did collide, and it was reported


def _game_boards():
    board = chess.Board()
    yield board.copy()
    for uci in GAME:
        board.push_uci(uci)
        yield board.copy()


def test_item7_evaluate_batch_refuses_none():
    with pytest.raises(TypeError, match="expected a sequence of FEN strings or boards, got NoneType"):
        nnue_infer.evaluate_batch(None)
    assert np.array_equal(nnue_infer.evaluate_batch([]), np.empty(0, np.int32))


# --- found by the hostile pass ------------------------------------------------------------------

def test_evaluators_pickle_and_deepcopy(network):
    """The in-use lock (item 14) made Evaluators unpicklable ("cannot pickle '_thread.lock'"):
    spawn pools and ``copy.deepcopy`` need them; the copy follows the same game."""
    import copy
    import pickle

    ev = Evaluator(network)
    for uci in GAME[:5]:
        ev.push(chess.Move.from_uci(uci))
    want = ev.evaluate()
    for clone in (pickle.loads(pickle.dumps(ev)), copy.deepcopy(ev)):
        assert clone.evaluate() == want and clone.board.fen() == ev.board.fen()
        clone.push(chess.Move.from_uci(GAME[5]))
        assert clone.evaluate() == Evaluator(network).evaluate(clone.board)
    assert ev.evaluate() == want  # the original is untouched


def test_a_forked_child_is_not_blocked_by_locks_held_in_the_parent(network):
    """A thread of the parent inside ``evaluate_game`` (holding the evaluator's lock) and one holding
    the batch lock at the moment of a fork: the child's evaluator and batches must still work
    (before: ConcurrentUseError / a batch waiting forever in the child)."""
    import multiprocessing as mp

    import nnue_infer.batch as B

    ev = Evaluator(network)
    truth = (Evaluator(network).evaluate(FENS[3]), Evaluator(network).evaluate_batch(FENS).tolist())
    inside, release = threading.Event(), threading.Event()

    def slow_moves():
        inside.set()
        release.wait(30)
        yield from GAME

    t = threading.Thread(target=lambda: ev.evaluate_game(chess.Board(), slow_moves()))
    t.start()
    assert inside.wait(10)
    B.PARALLEL_LOCK.acquire()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork() with threads running
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            child = ctx.Process(target=_child_work, args=(ev, queue))
            child.start()
        child.join(120)
        assert child.exitcode == 0, "the child hung or failed"
        assert queue.get(timeout=10) == truth
    finally:
        B.PARALLEL_LOCK.release()
        release.set()
        t.join()


def _child_work(ev, queue):
    queue.put((ev.evaluate(FENS[3]), ev.evaluate_batch(FENS).tolist()))
