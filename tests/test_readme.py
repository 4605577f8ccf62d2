"""The Python examples (``>>>`` blocks) of README.md and of every manual page in docs/ run as
doctests, so the documented output is real."""

from __future__ import annotations

import doctest
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
