"""Write docs/benchmarks.md and benchmarks/results/README.md from the raw results in benchmarks/results/.

    python benchmarks/manual.py            # write both pages
    python benchmarks/manual.py --check    # exit 1 when a page is not what the results give
    python benchmarks/manual.py --prune    # also git rm the results no page cites

docs/benchmarks.md has one section per area; each shows, per benchmark script of the area, the
newest run of that script in benchmarks/results/ (a JSON file written by the script's ``--json
FILE``, see ``common.write_json``): the command, the date, commit, machine and load average of the
run, and its figures with the baseline measured in the same run, the ratio and the target an issue
set.  Playing strength is read from ``bench_strength.py``'s match results (dated by their games).  Nothing on the page is typed by hand but the prose of AREAS.

benchmarks/results/README.md lists every kept file with the pages citing it: a page cites a file
when it names it (or a ``benchmarks/results/...*`` pattern matching it), or names the commit in
the file's name in the same paragraph as the file's area (the name's first word, e.g. ``children``).

A result file that cannot be read (not JSON, a field missing or mistyped, a script or area no section
shows) is named with its problem on stderr (exit status 2) and nothing is written or removed; a
``--prune`` git refuses (exit status 1) leaves the pages and the results as they were.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PAGE = REPO / "docs" / "benchmarks.md"
INDEX = RESULTS / "README.md"
#: The pages whose citations keep a result (research/ included: its reports cite runs too).
CITING = ("*.md", "docs/**/*.md", "research/**/*.md", "weights/**/*.md")


@dataclass(frozen=True)
class Area:
    key: str  # the ``area`` of the rows (``common.row`` / ``common.write_json``)
    title: str
    prose: str  # how the figures are measured
    scripts: tuple[str, ...]  # the benchmark scripts whose newest run gives the figures


AREAS = (
    Area("evaluation", "Evaluation: one position, incremental, batches, FEN strings, games", """
`benchmarks/report.py` times, on the dev corpus (3,298 positions, 264 games) with Stockfish 15.1's
network: `Evaluator.evaluate(board)` and `evaluate(fen)` from scratch (median per call);
`push(move)` + `evaluate()` beyond python-chess's own `Board.push` along the dev games, for non-king
and king moves, and `pop()`; `evaluate_batch` throughput from FEN strings and from boards (wall
clock, best of several runs) and its CPU time per position on one thread (the figure other load
moves least); `evaluate_game` over whole games. The baselines run in the same process on a sample
of the same positions: a plain NumPy implementation of the same network
(`benchmarks/numpy_baseline.py`, its values checked equal in the run) and Debian's Stockfish 15.1
`eval` over UCI (one long-lived `/usr/games/stockfish`, `benchmarks/stockfish_uci.py`). The
targets are issues 2 and 3's. `python -m pytest benchmarks --benchmark-enable -n 0` times the same
operations under pytest-benchmark, and `benchmarks/bench_incremental.py` splits push, evaluate and
pop operation by operation.""", ("report.py",)),
    Area("c-floors", "Against hand-written C", """
`benchmarks/bench_limits.py` builds the C kernels of `shared/limits` (plain C, AVX2 and AVX-512
VNNI intrinsics on synthetic weights of Stockfish 15.1's shapes) and alternates rounds of one C
process and this process's measurements of the same operations, both in thread CPU time on one
thread; a cell is the median over the rounds and the ratio is nnue-infer over the best C
implementation (named in brackets). Kernel-only rows call the library's kernel in a compiled loop;
whole-call rows time the Python API. The kernels use explicit SIMD where LLVM would not produce it
from loops (`nnue_infer/kernels/simd.py`: AVX-512 VNNI and AVX-VNNI `vpdpbusd`, AVX2 `vpmaddubsw` +
`vpmaddwd`), chosen once from the CPU's features; `NNUE_INFER_SIMD=vnni512|avxvnni|avx2|portable`
forces a path the CPU has.""", ("bench_limits.py",)),
    Area("children", "Every child of a position", """
`benchmarks/bench_children.py` times `Evaluator.evaluate_moves` per child against C's incremental
evaluation from `shared/limits` (`eval_incremental big hot`: one quiet-move update plus the layer
stack, hot caches; issue 22 asked for at most 3x it), against C's floor for the whole job (the
parent from scratch shared by its children, plus one child with a warm parent), and against the
push / `evaluate()` / pop loop over `board.legal_moves` that it replaces; also
`evaluate_children_batch` on one thread and a game walk (`evaluate_moves()` before each move of dev
games). Thread CPU time, one thread, median of the rounds; the script also prints a breakdown of
the compiled call. [children.md](children.md) describes the path.""", ("bench_children.py",)),
    Area("startup", "Load, start-up and compile", """
`benchmarks/report.py` times `load()` of Stockfish 15.1's 47 MB network (warm, median) and
`nnue-infer eval --fen` as a whole process with a warm and with an empty Numba cache (wall clock).
`benchmarks/bench_compile.py` runs each case in a fresh process with its own empty
`NUMBA_CACHE_DIR` and reports process CPU time (user + sys): the import of `nnue_infer` beyond
numpy, numba and chess (`import`), the README's one-FEN `nnue-infer eval` with the default network
(`cli-eval`), a first Python session with Stockfish 15.1's network (`sf15-session`); `--warm` runs
each case again on the cache it filled, and every `Dispatcher.compile` is printed with its own time,
as a compile (a cache miss) or a load (a cache hit), with Numba's one-time target initialisation
apart (`--list` names the other cases): a warm case compiles nothing. The targets are issue 19's. The test suite's own compiles:
`NNUE_INFER_COMPILE_LOG=FILE python -m pytest ...` appends one JSON line per kernel compile
(`tests/conftest.py`).""", ("report.py", "bench_compile.py")),
    Area("big-nets", "Stockfish 18 and 19 networks", """
`benchmarks/bench_sf19.py`: `evaluate(board)` from scratch, `push(move)` + `evaluate()` through dev
games, `evaluate_game` per ply and `evaluate_batch` with the threat-input networks of Stockfish 18
and 19 against Stockfish 15.1's network in the same run (each network in turn within a round, best
of the rounds, wall clock), and the live engines' own `position fen` + `eval` round trip (npm
Stockfish 18 and 19 under Node.js), the way to get the number without this library. The bounds
are issue 10's. [networks.md](networks.md) lists the networks.""", ("bench_sf19.py",)),
    Area("training-data", "Training data: .binpack, .bin and .plain", """
`benchmarks/bench_binpack.py` reads `shared/data/binpack/selfplay.binpack` (self-play data written
by Stockfish's tools) repeated `--copies` times: decoding into columns (issue target: at least 8
million positions per second per core), `.binpack` to `.plain` in process, the command
`nnue-infer data convert` as a child process (CPU time and peak memory: at most 300 MB, and at most
2x the CPU of the tools' own `convert` when `--tools` names a binary built from Stockfish's tools
branch; no such binary on this machine, so that baseline is absent), its start-up on a
one-position file, and `rescore` against `evaluate_batch` of the same FENs (at least 0.8 of its
rate). Process CPU time, one Numba thread, best of `--repeat`; outputs checked equal.""",
         ("bench_binpack.py",)),
    Area("files", "PGN, Parquet and Dask", """
`benchmarks/bench_pgn.py`: a PGN file (the dev games, repeated) to values and CSV rows on one core,
the fast path (`nnue-infer eval --pgn`) against python-chess's (`read_game`, `evaluate_game`,
`Board.fen`), values checked equal, per CPU second. `benchmarks/bench_distributed.py`: EPD shards of
real FENs scored into a Parquet dataset by `score_files`, in process and on a Dask `LocalCluster`
of worker processes x 1 thread, against `evaluate_batch` of the same FENs on one thread in the same
run (values compared in every run); CPU times, because the wall clock of a shared machine measures
its load: the busiest worker's process CPU is the job's wall clock with a core per worker (target:
1.5x for 2 workers). It also prints the ceiling of the in-process ratio and a profile by stage.
`benchmarks/bench_parquet_options.py`: the Parquet settings of one part, each changed alone against
the parts' own. [large-datasets.md](large-datasets.md) describes the paths.""",
         ("bench_pgn.py", "bench_distributed.py", "bench_parquet_options.py")),
    Area("training", "Training", """
`benchmarks/bench_train.py`: positions per second per core of whole optimiser steps, the reference
PyTorch trainer (`FloatModel`, batch 1,024 and 16,384) against the fast trainer
(`nnue_infer.training.fast`, see [training.md](training.md)) on the default network's shape,
dev-corpus positions, one PyTorch and one Numba thread, process CPU time, rounds of `--seconds`
with the configurations taking turns (issue 25: at least 100,000 positions/s per core on 2 x 256).
`benchmarks/bench_datagen.py`: training positions per CPU second, labels included, of the compiled
walk, the teacher's self-play and engine games against the python-chess generator
(`benchmarks/datagen_baseline.py`).""", ("bench_train.py", "bench_datagen.py")),
    Area("research", "Research outputs: activations and feature indices", """
`benchmarks/bench_activations.py`: `Evaluator.activations_batch(fens)` (every layer's outputs, see
[research.md](research.md)) against nnue-interface 0.2.7's `get_activations_and_eval(fen)` per
position on Stockfish 17.1's big net, the two alternating within each round, best of the rounds
(issue 21: at least 10x faster). `benchmarks/bench_features.py`: `features_batch(fens, spec)`
against the per-board loop a training loader would otherwise write (`chess.Board(fen)`, each
feature set's `active(board)`), both checked equal in the run, with `evaluate_batch` of Stockfish
15.1's network for scale; one thread, thread CPU time.""", ("bench_activations.py", "bench_features.py")),
    Area("search", "Search: nodes per second against Stockfish", """
`benchmarks/bench_search.py`: nodes per CPU second of the compiled search with Stockfish 15.1's
network against Debian's Stockfish 15.1 `bench` on its own 48 positions (Hash 16 MB, one thread;
Stockfish's CPU time from the child process's resource usage, run before and after). The trees
differ, so the cost of a node is what compares. The evaluation's share of the search's cycles
comes from the cycle counter around every evaluation. [playing-strength.md](playing-strength.md)
describes the search.""", ("bench_search.py",)),
    Area("uci", "UCI engine start-up", """
`benchmarks/bench_uci.py`: the UCI engine as a fresh process on a pipe against Debian's Stockfish
15.1, process CPU time (`/proc/<pid>/stat`) read when the line ending each phase arrives: start to
`readyok` (kernel cache warm), the first `go nodes N`, `go perft D` of Kiwipete; `--cold` adds the
first search on an empty kernel cache (issue 36: at most 30 s). The CPU clock ticks every 0.01 s:
a phase shorter than a tick reads as one.""", ("bench_uci.py",)),
    Area("strength", "Playing strength", """
`benchmarks/bench_strength.py` plays matches with `nnue_infer.search.match`; a run takes hours, so
this page reads the newest runs kept in `benchmarks/results/` (dated by their games). `nets`: the
default network bundled at the run's commit against Stockfish 15.1's network, both searched by nnue-infer at fixed
nodes from generated openings: Elo with its 95 % interval (pentanomial). `levels`: nnue-infer's search with Stockfish 15.1's network against Debian's
Stockfish 15.1 with `UCI_LimitStrength` at several `UCI_Elo` levels at a clock; one rating on the
UCI_Elo scale is fitted across the levels by maximum likelihood (Stockfish anchors UCI_Elo at
60+0.6, so at a faster clock the scale is approximate). [playing-strength.md](playing-strength.md)
explains the statistics.""", ()),
)

INTRO = """\
# Benchmarks

Every figure below comes from a script in `benchmarks/` that measures it and its baseline side by
side in the same run: hand-written C (`shared/limits`), Debian's Stockfish 15.1
(`/usr/games/stockfish`), a plain NumPy implementation, or the Python code a path replaces. Where
the machine is shared, CPU time (thread or process) is what the scripts report; the ratios measured
side by side are what to read, and the load average of each run is given. The benchmarks are not
part of the test run (`testpaths = ["tests"]`).

This page is written by `python benchmarks/manual.py` from the newest raw result of each script in
`benchmarks/results/` (index: [benchmarks/results/README.md](../benchmarks/results/README.md)). To
update an area, run its command with `--json benchmarks/results/<script>-<commit>.json`, then
`python benchmarks/manual.py`. [design.md](design.md) describes the kernels these figures measure.
"""


class ResultError(Exception):
    """A file of benchmarks/results/ this script cannot read: the message names the file and the field."""


#: The fields of a run's record (``common.write_json``) and their types; ``settings``, ``cpu``, ``load``
#: and ``raw`` are optional.
FIELDS = {"area": str, "command": str, "date": str, "commit": str, "machine": str, "cores": int, "rows": list}


def _json(path: Path):
    """A result file's JSON value; ResultError naming the file when it cannot be read or parsed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultError(f"benchmarks/results/{path.name}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ResultError(f"benchmarks/results/{path.name}: not valid JSON ({exc})") from None


def _script(path: Path, record: dict) -> str:
    """The benchmark script of a run's record, checked: its fields, its area and rows known to a section
    of docs/benchmarks.md (a run no section shows would be left out of the page and pruned, silently)."""
    where = f"benchmarks/results/{path.name}"
    for field, kind in FIELDS.items():
        if field not in record:
            raise ResultError(f"{where}: no {field!r} field (common.write_json writes it)")
        if not isinstance(record[field], kind) or isinstance(record[field], bool):
            raise ResultError(f"{where}: {field!r} is {record[field]!r}, not a {kind.__name__}")
    if not isinstance(record.get("settings", ""), str):
        raise ResultError(f"{where}: 'settings' is {record['settings']!r}, not text")
    if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", record["date"]):
        raise ResultError(f"{where}: 'date' is {record['date']!r}, not YYYY-MM-DD HH:MM UTC")
    load = record.get("load")
    if load not in (None, []) and not (isinstance(load, list) and len(load) == 3
                                       and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in load)):
        raise ResultError(f"{where}: 'load' is {load!r}, not the three load averages (1, 5, 15 min)")
    words = record["command"].split()
    if len(words) < 2 or not words[1].endswith(".py"):
        raise ResultError(f"{where}: 'command' is {record['command']!r}, not python benchmarks/SCRIPT.py ...")
    script = Path(words[1]).name
    areas = {a.key: a for a in AREAS if a.scripts}
    showing = [a.key for a in AREAS if script in a.scripts]
    if not showing:
        raise ResultError(f"{where}: {script} is in no section of docs/benchmarks.md (scripts of AREAS in "
                          f"benchmarks/manual.py: {', '.join(sorted({s for a in AREAS for s in a.scripts}))})")
    if not record["rows"]:
        raise ResultError(f"{where}: 'rows' is empty")
    for i, row in enumerate(record["rows"], start=1):
        if not isinstance(row, dict) or not (isinstance(row.get("figure"), str) and row["figure"]) \
                or not all(isinstance(row.get(k, ""), str) for k in ("value", "baseline", "ratio", "target", "area")):
            raise ResultError(f"{where}: row {i} is {row!r}, not a row of common.row (a figure, and text fields)")
        area = row.get("area") or record["area"]
        if area not in areas:
            raise ResultError(f"{where}: row {i} ({row['figure']!r}) is in area {area!r}, not an area of "
                              f"docs/benchmarks.md ({', '.join(areas)})")
        if area not in showing:
            raise ResultError(f"{where}: row {i} ({row['figure']!r}) is in area {area!r}, whose section does not "
                              f"show {script}'s runs (its sections: {', '.join(showing)})")
    return script


def _runs() -> dict[str, tuple[Path, dict]]:
    """The newest run of each script: script name -> (file, record).  Other JSON objects (a match's
    results: no ``rows`` nor ``command``) are skipped; ResultError for a file that is not JSON, not an
    object, or a run's record that is incomplete or for no section of the page."""
    newest: dict[str, tuple[Path, dict]] = {}
    for path in sorted(RESULTS.glob("*.json")):
        record = _json(path)
        if not isinstance(record, dict):
            raise ResultError(f"benchmarks/results/{path.name}: a JSON {type(record).__name__}, not an object")
        if "rows" not in record and "command" not in record:
            continue
        script = _script(path, record)
        if script not in newest or (record["date"], path.name) > (newest[script][1]["date"], newest[script][0].name):
            newest[script] = (path, record)
    return newest


def _command(record: dict) -> str:
    """The run's command without its ``--json FILE``."""
    return re.sub(r"\s--json(?:=|\s+)\S+", "", record["command"])


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _table(rows: list[dict]) -> list[str]:
    lines = ["| figure | value | baseline, same run | ratio | target |", "|---|---|---|---|---|"]
    for row in rows:
        target = row.get("target") or ""
        if target and row.get("met") is not None:
            target += " (met)" if row["met"] else " (**not met**)"
        lines.append("| " + " | ".join(_cell(row.get(k) or "") for k in ("figure", "value", "baseline", "ratio"))
                     + f" | {_cell(target)} |")
    return lines


def _run_line(path: Path, record: dict) -> str:
    load = ", ".join(f"{x:.2f}" for x in record.get("load") or [])
    load = f"load average {load} (1, 5, 15 min, at the end; {record['cores']} cores)" if load \
        else f"load average not recorded ({record['cores']} cores)"
    settings = (record.get("settings") or "").rstrip(".")
    settings = f" {settings[:1].upper()}{settings[1:]}." if settings else ""
    return (f"Run {record['date']}, commit `{record['commit']}`, {record['machine']}; {load}.{settings} Raw: "
            f"[{path.name}](../benchmarks/results/{path.name}).")


def _games_date(pgn: Path) -> str:
    """The ``Date`` tag of a match's first game (``YYYY-MM-DD``), or "date not recorded"."""
    found = re.search(r'\[Date "(\d{4})\.(\d\d)\.(\d\d)"\]', pgn.read_text()[:4000]) if pgn.is_file() else None
    return "-".join(found.groups()) if found else "date not recorded"


def _loads(log: Path) -> str:
    """The load averages a strength log printed before and after its matches."""
    found = re.findall(r"load average ([\d.]+) ([\d.]+) ([\d.]+)", log.read_text()) if log.is_file() else []
    return f"load average {found[0][0]} at the start, {found[-1][0]} at the end" if found else "load average not logged"


#: The fields the strength section reads from bench_strength.py's results: a levels fit, one level's
#: match, a nets match.
FIT_FIELDS = ("tc", "levels", "games", "rating", "rating_error95")
LEVEL_FIELDS = ("games", "wins", "draws", "losses", "elo", "elo_error95")
NETS_FIELDS = ("players", "games", "wins", "draws", "losses", "pentanomial", "elo", "elo_error95", "nelo", "nelo_error95")


def _match(path: Path, fields: tuple[str, ...]) -> dict:
    """A bench_strength.py result with ``fields``; ResultError naming the file and the first field missing."""
    record = _json(path)
    missing = [f for f in fields if not isinstance(record, dict) or f not in record]
    if missing:
        raise ResultError(f"benchmarks/results/{path.name}: no {missing[0]!r} field (bench_strength.py writes it)")
    if "levels" in fields and not (isinstance(record["levels"], list) and record["levels"]):
        raise ResultError(f"benchmarks/results/{path.name}: 'levels' is {record['levels']!r}, not a list of levels")
    return record


def _strength() -> list[str]:
    lines: list[str] = []
    fits = sorted(RESULTS.glob("strength-levels-*-fit.json"),
                  key=lambda p: (_games_date(p.with_name(p.name.replace("-fit.json", f"-{_match(p, FIT_FIELDS)['levels'][0]}.pgn"))), p.name))
    if fits:
        fit_path = fits[-1]
        fit = _match(fit_path, FIT_FIELDS)
        label = fit_path.name[len("strength-levels-"):-len("-fit.json")]
        log = RESULTS / f"strength-levels-{label}.log"
        date = _games_date(RESULTS / f"strength-levels-{label}-{fit['levels'][0]}.pgn")
        lines += [f"### `python benchmarks/bench_strength.py levels --tc {fit['tc']} "
                  f"--levels {','.join(map(str, fit['levels']))} --pairs {fit['games'][0] // 2}`", "",
                  f"Games of {date}; {_loads(log)} (the games share the machine's cores). Raw: "
                  f"[{fit_path.name}](../benchmarks/results/{fit_path.name}), "
                  f"[{log.name}](../benchmarks/results/{log.name}) and the games of each level.", "",
                  "| opponent (Debian's Stockfish 15.1) | games | wins / draws / losses | Elo difference (95 %) |",
                  "|---|---|---|---|"]
        for level in fit["levels"]:
            match = RESULTS / f"strength-levels-{label}-{level}.json"
            if not match.is_file():  # the fit counts its games: a table without them would not add up
                raise ResultError(f"benchmarks/results/{fit_path.name}: fitted from UCI_Elo={level}, whose match "
                                  f"result benchmarks/results/{match.name} is missing")
            m = _match(match, LEVEL_FIELDS)
            lines.append(f"| `UCI_Elo={level}` ([{match.name}](../benchmarks/results/{match.name})) | {m['games']} | "
                         f"{m['wins']} / {m['draws']} / {m['losses']} | {m['elo']:+.0f} +- {m['elo_error95']:.0f} |")
        lines += ["", f"Fitted rating of nnue-infer's search with Stockfish 15.1's network at {fit['tc']}: "
                  f"**{fit['rating']:.0f} +- {fit['rating_error95']:.0f}** on the UCI_Elo scale "
                  f"({sum(fit['games'])} games).", ""]
    nets = sorted(RESULTS.glob("strength-nets-*.json"), key=lambda p: (_games_date(p.with_suffix(".pgn")), p.name))
    if nets:
        path = nets[-1]
        m = _match(path, NETS_FIELDS)
        label = path.name[len("strength-nets-"):-len(".json")]
        log = RESULTS / f"strength-nets-{label}.log"
        date = _games_date(path.with_suffix(".pgn"))
        nodes = label.rstrip("n")
        lines += [f"### `python benchmarks/bench_strength.py nets --nodes {nodes} --pairs {m['games'] // 2}`", "",
                  f"Games of {date}; {_loads(log)}. Raw: [{path.name}](../benchmarks/results/{path.name}), "
                  f"[{log.name}](../benchmarks/results/{log.name}).", "",
                  "| players | games | wins / draws / losses | pentanomial (0-2) | Elo (95 %) | normalised Elo (95 %) |",
                  "|---|---|---|---|---|---|",
                  f"| {' vs '.join(m['players'])} | {m['games']} | {m['wins']} / {m['draws']} / {m['losses']} | "
                  f"{', '.join(map(str, m['pentanomial']))} | {m['elo']:+.0f} +- {m['elo_error95']:.0f} | "
                  f"{m['nelo']:+.0f} +- {m['nelo_error95']:.0f} |", ""]
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def benchmarks_page() -> str:
    runs = _runs()
    lines = [INTRO, "Areas: " + ", ".join(f"[{a.title.split(':')[0]}](#{slug(a.title)})" for a in AREAS) + ".", ""]
    for area in AREAS:
        lines += [f"## {area.title}", "", area.prose.strip(), ""]
        if area.key == "strength":
            lines += _strength()
            continue
        for script in area.scripts:
            if script not in runs:
                lines += [f"### `benchmarks/{script}`", "", "No run of it in `benchmarks/results/` yet.", ""]
                continue
            path, record = runs[script]
            rows = [r for r in record["rows"] if (r.get("area") or record["area"]) == area.key]
            if not rows:
                continue
            lines += [f"### `{_command(record)}`", "", _run_line(path, record), "", *_table(rows), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _pages() -> dict[str, str]:
    """Citing page (path relative to the repository) -> its text; docs/benchmarks.md as this script writes it."""
    pages = {}
    for pattern in CITING:
        for path in sorted(REPO.glob(pattern)):
            pages[str(path.relative_to(REPO))] = path.read_text(encoding="utf-8")
    pages["docs/benchmarks.md"] = benchmarks_page()
    return pages


def cited_by(name: str, pages: dict[str, str]) -> list[str]:
    """The pages citing result file ``name``: by name, by a ``benchmarks/results/`` pattern matching it, or by
    the commit in its name in a paragraph that also names its area (the name's first word)."""
    area = name.split("-", 1)[0]
    commits = [c for c in re.findall(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])", Path(name).stem)
               if re.search(r"\d", c) and re.search(r"[a-f]", c)]
    found = []
    for page, text in pages.items():
        patterns = re.findall(r"benchmarks/results/([\w.+*-]*\*[\w.+*-]*)", text)
        if name in text or any(fnmatch.fnmatch(name, p) for p in patterns):
            found.append(page)
            continue
        paragraphs = re.split(r"\n\s*\n", text)
        if any(c in p and re.search(rf"\b{re.escape(area)}", p, re.I) for c in commits for p in paragraphs):
            found.append(page)
    return found


def index_page() -> tuple[str, list[str]]:
    """The text of benchmarks/results/README.md and the result files no page cites."""
    pages = _pages()
    rows, uncited = [], []
    for path in sorted(RESULTS.iterdir()):
        if path.name == "README.md" or not path.is_file():
            continue
        citing = cited_by(path.name, pages)
        if citing:
            rows.append(f"| [{path.name}]({path.name}) | {', '.join(citing)} |")
        else:
            uncited.append(path.name)
    text = "\n".join([
        "# Dated benchmark runs",
        "",
        "Raw output of the benchmark scripts (`benchmarks/bench_*.py`, `benchmarks/report.py`), kept because a",
        "page cites it: by name, by a `benchmarks/results/` pattern matching it, or by the commit in its name in a",
        "paragraph that also names its area. [docs/benchmarks.md](../../docs/benchmarks.md) is written from the",
        "newest JSON run of each script here. This index is written by `python benchmarks/manual.py`; a run no",
        "page cites is removed (`--prune`).",
        "",
        "| file | cited by |",
        "|---|---|",
        *rows,
    ]) + "\n"
    return text, uncited


def _prune(names: list[str]) -> None:
    """Remove result files: ``git rm`` the tracked ones, delete the others; CalledProcessError when git refuses
    (a tracked file changed since its commit), before anything is removed."""
    listed = subprocess.run(["git", "-C", str(RESULTS), "ls-files", "-z", "--", "."], capture_output=True,
                            text=True, check=True).stdout
    tracked = {Path(n).name for n in listed.split("\0") if n and "/" not in n}
    if tracked & set(names):
        subprocess.run(["git", "-C", str(REPO), "rm", "-q", "--", *(str(RESULTS / n) for n in names if n in tracked)],
                       capture_output=True, text=True, check=True)
    for name in set(names) - tracked:
        (RESULTS / name).unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="only check that both pages are what the results give")
    mode.add_argument("--prune", action="store_true", help="git rm the result files no page cites")
    args = ap.parse_args(argv)
    try:
        page = benchmarks_page()
        index, uncited = index_page()
    except ResultError as exc:  # nothing written: the pages stay as they were
        print(f"benchmarks/manual.py: {exc}", file=sys.stderr)
        return 2
    stale = [p for p, text in ((PAGE, page), (INDEX, index)) if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p.relative_to(REPO)} is not what benchmarks/manual.py writes from benchmarks/results/", file=sys.stderr)
        if uncited:
            print(f"results no page cites: {', '.join(uncited)} (python benchmarks/manual.py --prune)", file=sys.stderr)
        return 1 if stale or uncited else 0
    if uncited and args.prune:
        try:
            _prune(uncited)
        except (subprocess.CalledProcessError, OSError) as exc:  # before the pages are written: nothing changed
            reason = (getattr(exc, "stderr", None) or str(exc)).strip()
            print(f"benchmarks/manual.py: --prune could not remove {', '.join(uncited)}: {reason}", file=sys.stderr)
            return 1
    elif uncited:
        print(f"results no page cites ({len(uncited)}): {', '.join(uncited)}; --prune removes them", file=sys.stderr)
    PAGE.write_text(page, encoding="utf-8")
    INDEX.write_text(index, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
