"""The two PGN parsers of :mod:`nnue_infer.io.pgn` (the Rust one and python-chess's) give the same rows and the
same errors for the same text."""

from __future__ import annotations

import pytest

from nnue_infer.io import pgn

pytest.importorskip("rust_pgn_reader_python_binding")


def _read(path, parser):
    rows, errors = [], []
    for batch in pgn.read_pgn(path, parser=parser):
        rows += list(zip(batch.game.tolist(), batch.line.tolist(), batch.ply.tolist(), batch.fen, batch.san))
        errors += [str(e) for e in batch.errors]
    return rows, errors


def test_an_illegal_move_inside_a_variation_is_no_error_of_the_mainline(tmp_path):
    """The Rust parser reads the mainline alone; python-chess's builder stopped the game at the variation's
    illegal move (2. Ke3, 2. Qxh7: no such moves), losing its mainline: both give every mainline position now."""
    path = tmp_path / "variations.pgn"
    path.write_text('[Event "x"]\n\n1. e4 (1. d4 d5 (1... Nf6 2. Qxh7) 2. Ke3) 1... e5 2. Nf3 Nc6 (2... Qh4 3. Qxf7 '
                    '(3. Kxh8)) 3. Bb5 *\n\n[Event "y"]\n\n1. d4 *\n')
    rust, python = _read(path, "rust"), _read(path, "python-chess")
    assert rust == python
    rows, errors = rust
    assert errors == []
    assert [r[4] for r in rows] == ["", "e4", "e5", "Nf3", "Nc6", "Bb5", "", "d4"]
    assert [r[1] for r in rows] == [1] * 6 + [5] * 2


def test_a_nul_byte_after_the_first_8_kib_is_the_same_error_with_either_parser(tmp_path):
    """Past the first 8 KiB (which open_input checks), a NUL byte reached the parsers: the Rust one reported
    'failed to parse SAN: \\x00', python-chess skipped it and read the game on.  Both now read the game up to it
    and say so (the game's line, the ply after the last position read)."""
    path = tmp_path / "nul.pgn"
    game = '[Event "x"]\n\n1. e4 e5 *\n\n'
    path.write_bytes(game.encode() * 500 + b'[Event "z"]\n\n1. e4 \0 e5 2. Nf3 *\n\n[Event "after"]\n\n1. d4 *\n')
    assert path.stat().st_size > 8192
    rust, python = _read(path, "rust"), _read(path, "python-chess")
    assert rust == python
    rows, errors = rust
    assert errors == [f"{path}:2001: game 501, ply 2: NUL byte in the game's text: binary data, not PGN text (the "
                      "game is read up to it)"]
    assert [r[4] for r in rows if r[0] == 501] == ["", "e4"]
    assert [r[4] for r in rows if r[0] == 502] == ["", "d4"]  # the games after it are read
