"""Output that needs an optional extra says which one to install, before any work (fresh-user trial).

Before: ``eval --epd F -o s.parquet`` without pyarrow and ``--workers 2`` without dask ended in a
``ModuleNotFoundError`` traceback.
"""

import sys
from pathlib import Path

from nnue_infer.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_parquet_output_without_pyarrow_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` raise ImportError
    status = main(["eval", "--epd", str(EXAMPLES / "demo.epd"), "-o", str(tmp_path / "s.parquet")])
    err = capsys.readouterr().err
    assert status == 1
    assert "pip install 'nnue-infer[parquet]'" in err and "Traceback" not in err


def test_cluster_mode_without_dask_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)
    status = main(["eval", "--epd", str(EXAMPLES / "demo.epd"), "--output", str(tmp_path / "out"),
                   "--workers", "1"])
    err = capsys.readouterr().err
    assert status == 1
    assert "pip install 'nnue-infer[dask]'" in err and "Traceback" not in err


def test_parquet_training_data_without_pyarrow_names_the_extra(monkeypatch, tmp_path, capsys, data_dir):
    """``data convert`` to or from .parquet without pyarrow: one error naming the extra (was a
    ModuleNotFoundError traceback: fresh-user trial), no output file left."""
    binpack = data_dir / "binpack" / "dev-games.binpack"
    parquet = tmp_path / "in.parquet"
    assert main(["data", "convert", str(binpack), str(parquet), "-q"]) == 0
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    for src, dst in ((binpack, tmp_path / "out.parquet"), (parquet, tmp_path / "out.binpack")):
        status = main(["data", "convert", str(src), str(dst), "-q"])
        err = capsys.readouterr().err
        assert status == 1, err
        assert "Parquet training data needs pyarrow: pip install 'nnue-infer[parquet]'" in err and "Traceback" not in err
        assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_activations_to_parquet_without_pyarrow_names_the_extra(monkeypatch, tmp_path, capsys):
    """``eval --activations -o acts.parquet`` without pyarrow: the extra named, before any work, no file
    (was a ModuleNotFoundError traceback after the evaluation: fresh-user trial)."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    status = main(["eval", "--activations", "-o", str(tmp_path / "acts.parquet"), "startpos"])
    err = capsys.readouterr().err
    assert status == 1 and "Parquet output needs pyarrow: pip install 'nnue-infer[parquet]'" in err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_activations_to_arrow_without_pyarrow_names_the_extra(monkeypatch):
    """The Python API's ``Activations.to_arrow()`` without pyarrow names the extra as the command line
    does (was a bare ``ModuleNotFoundError: No module named 'pyarrow'``: fresh-user trial)."""
    import chess
    import pytest

    import nnue_infer

    acts = nnue_infer.Evaluator().activations(chess.Board())
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"Activations\.to_arrow\(\) needs pyarrow: pip install 'nnue-infer\[parquet\]'"):
        acts.to_arrow()
