"""Playing: ``uci`` (the UCI engine on standard input and output) and ``perft``."""

from __future__ import annotations

import sys

import click

from .common import example, load_network


@click.command(epilog=example("nnue-infer uci", "nnue-infer uci --net my.safetensors",
                              "printf 'position startpos moves e2e4\\ngo nodes 20000\\n' | nnue-infer uci"))
@click.option("--net", default=None,
              help="The network to play with: a file or a name, as for eval (default: 'default'); "
                   "'setoption name EvalFile value SPEC' changes it.")
def uci(net):
    """Run the UCI chess engine on standard input and output (for GUIs, match runners, python-chess).

    Commands: uci, isready, ucinewgame, setoption, position, go (depth, nodes, movetime, wtime/btime/winc/binc/
    movestogo, infinite, perft N), stop, quit; d and eval as in Stockfish.  Options: Hash, Threads, EvalFile,
    UCI_Chess960, MultiPV, Move Overhead, Clear Hash.  The first search on an empty kernel cache compiles
    its kernels first ('info string compiling ...').
    """
    from ..search.uci import UciSession

    network = load_network(net)

    def write(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    session = UciSession(network, write, name=net or "default")
    if sys.stdin is None:
        return
    session.run(iter(sys.stdin.buffer.readline, b""))


@click.command(epilog=example("nnue-infer perft startpos 5",
                              "nnue-infer perft 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1' 4",
                              "nnue-infer perft --chess960 'bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9' 3"))
@click.argument("fen")
@click.argument("depth", type=click.IntRange(1, 64))
@click.option("--chess960", is_flag=True, help="Read the FEN as Chess960 (X-FEN); Shredder-FEN castling "
                                               "(HAha) is read as Chess960 anyway.")
def perft(fen, depth, chess960):
    """Count the leaf positions DEPTH plies below FEN ('startpos' for the start position), per root move,
    as Stockfish's 'go perft DEPTH' prints them ('move: count' lines, then 'Nodes searched: N')."""
    import chess

    from ..errors import NnueError
    from ..positions import board_from_fen
    from ..search.perft import perft as count, perft_text

    try:
        board = chess.Board() if fen == "startpos" else board_from_fen(fen)
        if chess960 and not board.chess960:  # (X-FEN: the castling field's rooks as Chess960 reads them)
            board = chess.Board(board.fen() if fen == "startpos" else fen, chess960=True)
        click.echo(perft_text(board, count(board, depth)), nl=False)
    except NnueError as exc:
        raise click.ClickException(str(exc)) from None
