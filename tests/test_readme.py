"""The Python examples (``>>>`` blocks) of README.md and of every manual page in docs/ run as
doctests, so the documented output is real."""

from __future__ import annotations

import argparse
import ast
import doctest
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_examples(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(page), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {page.name} failed (output above)"


def test_the_manual_has_examples():
    """README and the Python pages keep runnable examples (a page whose examples vanished is caught)."""
    counts = {p.name: len(doctest.DocTestParser().get_examples(p.read_text(encoding="utf-8"))) for p in PAGES}
    assert counts["README.md"] >= 5, counts
    assert counts["python-api.md"] >= 10, counts
    assert counts["evaluation.md"] >= 5, counts


def test_readme_is_short_and_links_every_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in text, f"README.md does not link docs/{page.name}"


def _python_blocks(text: str) -> list[str]:
    """The ```python blocks of a page that are not doctests (no ``>>>``): run by nobody."""
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    return [b for b in blocks if ">>>" not in b]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_code_blocks_parse_and_their_imports_exist(page):
    """The examples that are not doctests (they read files a reader has, e.g. games.pgn.zst) are
    valid Python and import only what nnue-infer has (docs/large-datasets.md imported the
    ``nnue_infer.pgn`` of an older layout: fresh-user trial)."""
    for block in _python_blocks(page.read_text(encoding="utf-8")):
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "nnue_infer":
                        importlib.import_module(alias.name)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nnue_infer":
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), \
                        f"{page.name}: from {node.module} import {alias.name}: no such name"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_source_files_named_exist(page):
    """Every ``nnue_infer/....py`` or ``benchmarks/....py`` path a page names is a file of the checkout
    (pages named files of an older layout: fresh-user trial)."""
    text = page.read_text(encoding="utf-8")
    missing = sorted({p for p in re.findall(r"\b((?:nnue_infer|benchmarks|research|tests)/[\w/]+\.py)\b", text)
                      if not (ROOT / p).is_file()})
    assert not missing, f"{page.name} names files that do not exist: {missing}"


def test_set_up_commands_that_install_with_apt_install_python3_venv():
    """Debian's and Ubuntu's own ``python3 -m venv`` fails without the ``python3-venv`` package ("ensurepip is not
    available"): README's command that installs Debian packages before making the venv, and CI's script, install
    it too (they did not)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("apt-get") and "python3 -m venv" in line]
    assert commands and all("python3-venv" in line.split("python3 -m venv")[0] for line in commands), commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    installs = [line for line in ci.splitlines() if "apt-get install" in line]
    assert ci.index("python3-venv") < ci.index("python3 -m venv") and any("python3-venv" in line for line in installs)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_page_keeps_a_placeholder(page):
    """A page is finished: no marker such as ``EXAMPLE-PLACEHOLDER`` left where an example or result belongs."""
    text = page.read_text(encoding="utf-8")
    found = [m.group(0) for m in re.finditer(r"\S*PLACEHOLDER\S*", text, re.IGNORECASE)]
    assert not found, f"{page.name} still holds {found}"


#: The pages whose links are checked: the manual, and the index of the kept benchmark runs.
LINKED = [*PAGES, ROOT / "benchmarks" / "results" / "README.md"]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    anchors = set()
    for heading in re.findall(r"^#+\s+(.*?)\s*$", text, flags=re.M):
        base = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = base, 0
        while anchor in anchors:  # GitHub numbers repeated headings
            n += 1
            anchor = f"{base}-{n}"
        anchors.add(anchor)
    return anchors


@pytest.mark.parametrize("page", LINKED, ids=[str(p.relative_to(ROOT)) for p in LINKED])
def test_links_to_files_and_headings_resolve(page):
    """Every relative link of a page names a file of the checkout, and its ``#anchor`` a heading of that
    page; every ``benchmarks/results/NAME`` a page names exists (a run deleted from benchmarks/results
    while a page still cites it fails here)."""
    text = page.read_text(encoding="utf-8")
    dead = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            dead.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            dead.append(target)
    for name in re.findall(r"benchmarks/results/([\w.+-]+\.\w+)", text):
        if not (ROOT / "benchmarks" / "results" / name).is_file():
            dead.append(f"benchmarks/results/{name}")
    assert not dead, f"{page.relative_to(ROOT)} links what does not exist: {dead}"


def _manual():
    """benchmarks/manual.py as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("benchmarks_manual", ROOT / "benchmarks" / "manual.py")
    manual = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = manual  # its dataclasses look their module up
    try:
        spec.loader.exec_module(manual)
    finally:
        del sys.modules[spec.name]
    return manual


def test_benchmarks_page_and_results_index_are_written_from_the_results():
    """docs/benchmarks.md and benchmarks/results/README.md are what ``benchmarks/manual.py`` writes from the
    raw results (no figure typed by hand), and every kept result is cited by a page."""
    assert _manual().main(["--check"]) == 0, "run python benchmarks/manual.py (--prune) and commit its pages"


@pytest.fixture
def results_copy(tmp_path, monkeypatch):
    """benchmarks/manual.py on a git checkout in tmp_path holding copies of the pages and of benchmarks/results."""
    manual = _manual()
    for pattern in (*manual.CITING, "benchmarks/results/*"):  # every page that may cite a result
        for path in ROOT.glob(pattern):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    monkeypatch.setattr(manual, "REPO", tmp_path)
    monkeypatch.setattr(manual, "RESULTS", tmp_path / "benchmarks" / "results")
    monkeypatch.setattr(manual, "PAGE", tmp_path / "docs" / "benchmarks.md")
    monkeypatch.setattr(manual, "INDEX", tmp_path / "benchmarks" / "results" / "README.md")
    return manual


def _newest_uci_run(results: Path) -> Path:
    """The kept bench_uci.py run (the manual keeps the newest one of each script; it is named for its commit),
    not the runs a test adds."""
    (path,) = (p for p in results.glob("uci-*.json") if re.fullmatch(r"uci-[0-9a-f]{7,40}\.json", p.name))
    return path


def _newer_run(results: Path, name: str, change) -> Path:
    """A copy of the newest bench_uci.py run, dated later, changed by ``change(record)`` (or replaced by the
    text it returns), as ``name``."""
    record = json.loads(_newest_uci_run(results).read_text())
    record["date"] = "2099-01-01 00:00 UTC"
    text = change(record)  # text: the file's whole content instead of the record
    path = results / name
    path.write_text(text if isinstance(text, str) else json.dumps(record))
    return path


def _pop(key):
    return lambda r: r.pop(key) and None


def _set(**fields):
    return lambda r: r.update(fields)


def _rows_in(area):
    return lambda r: [row.update(area=area) for row in r["rows"]]


@pytest.mark.parametrize("name, change, problem", [
    ("uci-x.json", lambda r: "{", "not valid JSON"),
    ("uci-x.json", lambda r: "[1, 2]", "a JSON list, not an object"),
    ("uci-x.json", _pop("date"), "no 'date' field"),
    ("uci-x.json", _set(date="yesterday"), "'date' is 'yesterday'"),
    ("uci-x.json", _set(load="high"), "'load' is 'high'"),
    ("uci-x.json", _set(command="python"), "'command' is 'python'"),
    ("uci-x.json", _set(rows=[]), "'rows' is empty"),
    ("uci-x.json", _set(rows=["fast"]), "row 1 is 'fast'"),
    ("gpu-x.json", _set(command="python benchmarks/bench_gpu.py --json gpu-x.json"),
     "bench_gpu.py is in no section of docs/benchmarks.md"),
    ("uci-x.json", _rows_in("gpu"), "is in area 'gpu', not an area of docs/benchmarks.md"),
    ("uci-x.json", _rows_in("children"), "is in area 'children', whose section does not show bench_uci.py's runs"),
])
def test_benchmarks_manual_names_a_bad_result_file_and_changes_nothing(results_copy, capsys, name, change, problem):
    """A result file the page cannot be written from (not JSON, a field missing or mistyped, an area or script
    no section shows) is named with its problem; neither page is written and --prune deletes nothing (skipped,
    or with its rows dropped, the run would be pruned as uncited and an older one shown)."""
    manual = results_copy
    kept = _newest_uci_run(manual.RESULTS)
    path = _newer_run(manual.RESULTS, name, change)
    before = {p.name: p.read_bytes() for p in (manual.PAGE, manual.INDEX)}
    assert manual.main(["--prune"]) == 2
    err = capsys.readouterr().err
    assert f"benchmarks/results/{name}" in err and problem in err, err
    assert path.exists() and kept.exists()
    assert {p.name: p.read_bytes() for p in (manual.PAGE, manual.INDEX)} == before
    assert manual.main(["--check"]) == 2


FIT = "benchmarks/results/strength-levels-10+0.1-fit.json"


@pytest.mark.parametrize("name, text, message", [
    ("strength-levels-10+0.1-fit.json", "{}", f"{FIT}: no 'tc' field"),
    ("strength-nets-25000n.json", '{"games": 2}', "benchmarks/results/strength-nets-25000n.json: no 'players' field"),
    ("strength-levels-10+0.1-2200.json", "{", "benchmarks/results/strength-levels-10+0.1-2200.json: not valid JSON"),
    ("strength-levels-10+0.1-2200.json", None,
     f"{FIT}: fitted from UCI_Elo=2200, whose match result benchmarks/results/strength-levels-10+0.1-2200.json is missing"),
])
def test_benchmarks_manual_names_a_bad_or_missing_match_result(results_copy, capsys, name, text, message):
    """bench_strength.py's results (None: the file deleted) are read by name too: a field missing or a level the
    fit counts without its match is named instead of a traceback or a table whose games do not add up."""
    manual = results_copy
    if text is None:
        (manual.RESULTS / name).unlink()
    else:
        (manual.RESULTS / name).write_text(text)
    assert manual.main([]) == 2
    err = capsys.readouterr().err
    assert message in err, err


def test_benchmarks_manual_says_when_a_run_recorded_no_load_average(results_copy):
    manual = results_copy
    for name, change in (("uci-x.json", _pop("load")), ("uci-y.json", _set(load=[]))):
        _newer_run(manual.RESULTS, name, change)
        assert manual.main([]) == 0
        line = next(x for x in manual.PAGE.read_text().splitlines() if f"[{name}]" in x)
        assert "load average not recorded (2 cores)" in line and "load average  (" not in line, line


def test_benchmarks_manual_prune_keeps_a_result_a_page_in_a_subfolder_cites(results_copy):
    manual = results_copy
    cited = manual.REPO / "docs" / "guide" / "search.md"
    cited.parent.mkdir()
    cited.write_text("Measured in `benchmarks/results/search-nps-2.txt`.\n")
    playing = manual.REPO / "docs" / "playing-strength.md"
    playing.write_text(playing.read_text().replace("search-nps-2.txt", "search-nps-3.txt"))
    assert manual.main(["--prune"]) == 0
    assert (manual.RESULTS / "search-nps-2.txt").exists()
    assert "| [search-nps-2.txt](search-nps-2.txt) | docs/guide/search.md |" in manual.INDEX.read_text()


def test_benchmarks_manual_prune_that_git_refuses_changes_nothing(results_copy, capsys):
    """A cited-no-more file changed since its commit: git rm refuses; the message says why and neither the
    pages nor the other results change."""
    manual = results_copy
    playing = manual.REPO / "docs" / "playing-strength.md"
    playing.write_text(playing.read_text().replace("search-nps-2.txt", "search-nps-3.txt"))
    (manual.RESULTS / "search-nps-2.txt").write_text("edited\n")
    before = {p.name: p.read_bytes() for p in (manual.PAGE, manual.INDEX)}
    assert manual.main(["--prune"]) == 1
    err = capsys.readouterr().err
    assert "--prune could not remove search-nps-2.txt" in err and "local modifications" in err, err
    assert {p.name: p.read_bytes() for p in (manual.PAGE, manual.INDEX)} == before
    assert (manual.RESULTS / "search-nps-2.txt").read_text() == "edited\n"


def test_benchmarks_manual_check_and_prune_together_are_refused(results_copy, capsys):
    with pytest.raises(SystemExit) as exc:
        results_copy.main(["--check", "--prune"])
    assert exc.value.code == 2 and "not allowed with argument --check" in capsys.readouterr().err


def _benchmarks_common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    return common


@pytest.mark.parametrize("target, problem", [("missing/run.json", "there is no directory"),
                                             (".", "is a directory, not a file to write")])
def test_benchmark_json_file_that_cannot_be_written_is_refused_before_the_run(tmp_path, target, problem):
    """``--json FILE`` of every benchmark script is checked when the arguments are read: a run of minutes or
    hours does not end in a traceback with its figures lost."""
    common = _benchmarks_common()
    with pytest.raises(argparse.ArgumentTypeError, match=problem):
        common.output_file(str(tmp_path / target))
    assert common.output_file(str(tmp_path / "run.json")) == tmp_path / "run.json"
    scripts = [p for p in sorted((ROOT / "benchmarks").glob("*.py"))
               if 'add_argument("--json", metavar="FILE"' in p.read_text(encoding="utf-8")]
    unchecked = [p.name for p in scripts if "output_file" not in p.read_text(encoding="utf-8")]
    assert len(scripts) >= 10 and not unchecked, unchecked
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_uci.py"), "--json", str(tmp_path / target)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "argument --json: " in run.stderr and problem in run.stderr, run.stderr


def test_benchmarks_page_shows_a_runs_command_without_its_json_file(results_copy):
    manual = results_copy
    for option in ("--json /tmp/x/uci-x.json", "--json=/tmp/x/uci-x.json"):
        _newer_run(manual.RESULTS, "uci-x.json", _set(command=f"python benchmarks/bench_uci.py --runs 3 {option} --cold"))
        assert manual.main([]) == 0
        assert "### `python benchmarks/bench_uci.py --runs 3 --cold`" in manual.PAGE.read_text()


def test_benchmark_run_is_written_without_git_or_load_average_and_shown(results_copy, monkeypatch):
    """A run on a machine without git or load averages still writes its figures (commit "unknown", load
    null), and the page shows it with "load average not recorded"."""
    common, manual = _benchmarks_common(), results_copy
    monkeypatch.setenv("PATH", "")  # no git

    def no_load():
        raise OSError("no load average here")

    monkeypatch.setattr(common.os, "getloadavg", no_load)
    path = manual.RESULTS / "uci-x.json"
    common.write_json(path, "uci", [common.row("UCI start to readyok", "0.5 s")],
                      argv=["--runs", "1", "--json", str(path)])
    record = json.loads(path.read_text())
    assert record["commit"] == "unknown" and record["load"] is None
    record["date"] = "2099-01-01 00:00 UTC"  # the newest run of bench_uci.py
    record["command"] = record["command"].replace(record["command"].split()[1], "benchmarks/bench_uci.py")
    path.write_text(json.dumps(record))
    assert manual.main([]) == 0
    line = next(x for x in manual.PAGE.read_text().splitlines() if "[uci-x.json]" in x)
    assert "commit `unknown`" in line and "load average not recorded" in line, line
