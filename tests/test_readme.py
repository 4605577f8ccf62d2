"""The Python examples (``>>>`` blocks) of README.md and of every manual page in docs/ run as
doctests, so the documented output is real."""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import re
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


def test_benchmarks_page_and_results_index_are_written_from_the_results():
    """docs/benchmarks.md and benchmarks/results/README.md are what ``benchmarks/manual.py`` writes from the
    raw results (no figure typed by hand), and every kept result is cited by a page."""
    spec = importlib.util.spec_from_file_location("benchmarks_manual", ROOT / "benchmarks" / "manual.py")
    manual = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = manual  # its dataclasses look their module up
    try:
        spec.loader.exec_module(manual)
    finally:
        del sys.modules[spec.name]
    assert manual.main(["--check"]) == 0, "run python benchmarks/manual.py (--prune) and commit its pages"
