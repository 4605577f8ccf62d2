"""The dev corpus: 3,298 positions with Stockfish 15.1's printed output and exact raw integers.

Source of every expected value: ``shared/data/positions-dev.jsonl`` (fields ``sf`` and ``raw``)
and ``positions-dev-raw.jsonl.gz`` (Stockfish's complete ``eval`` text), both produced with
Debian's Stockfish 15.1 (see ``shared/data/README.md``).
"""

from __future__ import annotations

import hashlib

import chess
import pytest

import nnue_infer
from nnue_infer.normalisation import tdiv
from nnue_infer.trace import format_cp_aligned, format_cp_compact
from stockfish_uci import INFO_LINE, nnue_part
import sys
from pathlib import Path

#: Checksum of the corpus's raw integers (``checksum()`` below over ``raw`` of every position, in
#: file order), computed from positions-dev.jsonl on 2026-11-30.  Quote it when behaviour changes
#: on purpose, like Stockfish's ``Bench:``.
CORPUS_CHECKSUM = "a539590cfacd00c3"


def checksum(rows: list[tuple[list[int], list[int], int]]) -> str:
    """First 16 hex digits of SHA-256 over "psqt positional value" lines, one per position."""
    h = hashlib.sha256()
    for psqt, positional, value in rows:
        h.update((" ".join(map(str, [*psqt, *positional, value])) + "\n").encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def traces(corpus, evaluator):
    return [evaluator.trace(chess.Board(row["fen"])) for row in corpus]


def report(mismatches: list[str], total: int, what: str) -> str:
    return f"{len(mismatches)} mismatches in {what} over {total} positions; first ones:\n" + "\n".join(mismatches[:10])


def test_raw_integers_and_checksum(corpus, traces):
    """psqt and positional of all 8 buckets and the value equal Stockfish's exact integers (in check too)."""
    bad = []
    for row, t in zip(corpus, traces):
        raw = row["raw"]
        got = (list(t.psqt), list(t.positional), t.value)
        if got != (raw["psqt"], raw["positional"], raw["value"]):
            bad.append(f"{row['fen']}: got {got}, Stockfish {raw}")
    ours = checksum([(t.psqt, t.positional, t.value) for t in traces])
    theirs = checksum([(r["raw"]["psqt"], r["raw"]["positional"], r["raw"]["value"]) for r in corpus])
    assert not bad, report(bad, len(corpus), "raw integers") + f"\nchecksum ours {ours}, corpus {theirs}"
    assert ours == theirs == CORPUS_CHECKSUM, f"corpus checksum: ours {ours}, corpus {theirs}, pinned {CORPUS_CHECKSUM}"


def c_div(a: int, b: int) -> int:
    """C's integer division, truncating toward zero (C99 6.5.5), written out here rather than taken
    from the package.  Exact through a float here: |a| < 2**53, and a / 361 is an integer or at
    least 1/361 away from one."""
    return int(a / b)


def test_evaluate_matches_raw_value(corpus, evaluator):
    """Evaluator.evaluate / evaluate_cp and the module-level evaluate() agree with ``raw.value``;
    centipawns as Stockfish 15.1's ``UCI::to_cp``: ``100 * v / NormalizeToPawnValue`` (361) in C ints."""
    bad = []
    for row in corpus:
        board = chess.Board(row["fen"])
        v = row["raw"]["value"]
        v_white = v if board.turn == chess.WHITE else -v
        got = (evaluator.evaluate(board), nnue_infer.evaluate(board, evaluator.network), evaluator.evaluate_cp(board),
               evaluator.evaluate_cp(board, white_pov=True))
        want = (v, v, c_div(100 * v, 361), c_div(100 * v_white, 361))
        if got != want:
            bad.append(f"{row['fen']}: got {got}, want {want}")
    assert not bad, report(bad, len(corpus), "evaluate()")


def test_printed_fields(corpus, traces):
    """Bucket table cells, used bucket, NNUE line and the 64 piece-value cells, as Stockfish prints them."""
    bad = []
    checked = 0
    for row, t in zip(corpus, traces):
        sf = row["sf"]
        if row["in_check"]:
            assert sf["buckets"] is None and sf["final_eval"] == "none (in check)"
            continue
        checked += 1
        buckets = []
        for p, q in zip(t.psqt, t.positional):
            pk, qk = tdiv(p, 16), tdiv(q, 16)
            buckets.append([format_cp_aligned(x).strip() for x in (pk, qk, pk + qk)])
        cells = []
        for rank in range(7, -1, -1):
            for file in range(8):
                sq = chess.square(file, rank)
                cells.append(format_cp_compact(t.piece_values[sq]).strip() if sq in t.piece_values else "")
        got = {"buckets": buckets, "bucket_used": t.bucket, "nnue_eval": "%+.2f" % (t.value_white / 361),
               "piece_values": cells}
        for key, value in got.items():
            if value != sf[key]:
                bad.append(f"{row['fen']}: {key}: got {value}, Stockfish {sf[key]}")
    assert checked == 3298 - 180
    assert not bad, report(bad, checked, "printed fields")


def test_format_stockfish_line_for_line(corpus, traces, corpus_raw_lines):
    bad = []
    checked = 0
    for row, t in zip(corpus, traces):
        lines = corpus_raw_lines[row["fen"]]
        assert lines[0] == INFO_LINE
        if row["in_check"]:
            assert "Final evaluation: none (in check)" in lines
            continue
        checked += 1
        want = nnue_part(lines)
        got = t.format_stockfish().split("\n")
        if got != want:
            diff = next(i for i, (a, b) in enumerate(zip(got + [None] * 99, want + [None] * 99)) if a != b)
            bad.append(f"{row['fen']}: line {diff}: got {got[diff] if diff < len(got) else None!r}, "
                       f"Stockfish {want[diff] if diff < len(want) else None!r}")
        assert str(t) == t.format_stockfish()
    assert checked == 3298 - 180
    assert not bad, report(bad, checked, "format_stockfish()")


def test_module_level_evaluate_from_threads(corpus, network):
    """nnue_infer.evaluate is documented thread-safe (one Evaluator per thread): values stay exact."""
    from concurrent.futures import ThreadPoolExecutor

    rows = corpus[::8]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda row: nnue_infer.evaluate(row["fen"], network), rows))
    assert got == [row["raw"]["value"] for row in rows]


# -- hostile input ---------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def test_numpy_baseline_is_bit_identical_to_stockfish(network, corpus):
    """The baseline the benchmarks time nnue-infer against computes Stockfish 15.1's exact values
    (the corpus's ``raw.value``); the check lived in a benchmark, outside ``testpaths``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from numpy_baseline import NumpyEvaluator
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    baseline = NumpyEvaluator(network)
    rows = [r for r in corpus if not r["in_check"]][::66]
    assert len(rows) >= 40
    assert [baseline.evaluate(chess.Board(r["fen"])) for r in rows] == [r["raw"]["value"] for r in rows]
