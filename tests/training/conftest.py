"""Fixtures of the training tests: a toy activation-study-v3 data directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research"))


@pytest.fixture
def toy_study(tmp_path, data_dir, monkeypatch) -> Path:
    """Activation study v3's data at toy size (validation and test 300 positions, two training chunks
    of 1,000: 475 walk, 475 self-play and 50 engine-game positions each, batch 250) in ``tmp_path/study``."""
    import activation_study_v3 as S

    monkeypatch.setenv("NNUE_INFER_SHARED", str(data_dir.parent))
    cfg = S.Config(val_positions=300, test_positions=300, chunk_positions=1000, batch_size=250)
    study = tmp_path / "study"
    S.load_config(study, cfg)
    S.ensure_data(study, cfg, 2, log=lambda *a: None)
    return study
