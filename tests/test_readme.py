"""README.md's Python examples (``>>>`` blocks) run as doctests, so the documented output is real."""

from __future__ import annotations

import doctest
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples(monkeypatch):
    monkeypatch.chdir(README.parent)
    result = doctest.testfile(str(README), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 10, "README.md lost its examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} README examples failed (output above)"
