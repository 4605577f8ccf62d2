"""A UCI engine that misbehaves on purpose, for the match runner's forfeit tests.

Usage: fake_uci_engine.py MODE, MODE one of: crash (exits at its first ``go``), illegal (answers ``bestmove e2e5``),
hang (never answers ``go``), slow SECONDS (plays the first legal move after sleeping), noreply (never sends
``uciok``: not a UCI engine), legal (plays the first legal move at once).
"""

import sys
import time

import chess


def main() -> None:
    mode = sys.argv[1]
    board = chess.Board()
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "uci":
            if mode == "noreply":
                continue
            print(f"id name fake-{mode}\nuciok", flush=True)
        elif cmd[0] == "isready":
            print("readyok", flush=True)
        elif cmd[0] == "position":
            board = chess.Board() if cmd[1] == "startpos" else chess.Board(" ".join(cmd[2:8]))
            if "moves" in cmd:
                for m in cmd[cmd.index("moves") + 1:]:
                    board.push_uci(m)
        elif cmd[0] == "go":
            if mode == "crash":
                sys.exit(3)
            if mode == "illegal":
                print("info depth 1 score cp 12\nbestmove e2e5", flush=True)
            elif mode in ("slow", "legal"):
                if mode == "slow":
                    time.sleep(float(sys.argv[2]))
                move = min(board.legal_moves, key=lambda m: m.uci())
                print(f"info depth 1 score cp 0\nbestmove {move.uci()}", flush=True)
        elif cmd[0] == "quit":
            return


if __name__ == "__main__":
    main()
