"""The distillation trainer (nnue_infer.training.train, `nnue-infer train`): PyTorch float model, tiny runs.

CI installs the ``train`` extra (.ci/run), so these run there; without PyTorch they skip.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nnue_infer  # noqa: E402
from nnue_infer.training import datagen, model as M, train as T  # noqa: E402
from nnue_infer.cli import main  # noqa: E402
from nnue_infer.training.crosscheck import crosscheck  # noqa: E402
from nnue_infer.float_network import forward_float  # noqa: E402
from nnue_infer.float_network import FloatNetwork  # noqa: E402
from nnue_infer.network import FT_ACTIVATIONS, Architecture  # noqa: E402
from nnue_infer.quantisation import quantise_with_report  # noqa: E402

SMALL = T.default_architecture(ft_width=32)


@pytest.fixture(scope="module")
def positions(network):
    """3,000 playout positions labelled by Stockfish 15.1's network."""
    return datagen.generate(3000, 3, network, progress=False)


@pytest.fixture(scope="module")
def positions_file(positions, tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "pos.npz"
    datagen.save(path, positions)
    return path


def _config(**kw):
    base = dict(epochs=4, batch_size=256, lr=3e-3, val_fraction=0.1, seed=5, threads=1)
    return T.TrainConfig(**{**base, **kw})


def test_tiny_run_loss_falls_and_quantises_cleanly(positions, tmp_path):
    trainer = T.Trainer(SMALL, positions, _config(), tmp_path, progress=False)
    before, mae_before = trainer.validate()
    log = trainer.fit()
    assert [r["epoch"] for r in log] == [1, 2, 3, 4]
    assert log[-1]["train_loss"] < log[0]["train_loss"]
    assert log[-1]["val_loss"] < 0.9 * before and log[-1]["val_mae_cp"] < mae_before
    lines = (tmp_path / "loss.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3, 4]
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fnet = trainer.float_network("tiny")
    qnet, report = quantise_with_report(fnet)
    assert report.clipped == []  # dense weights were kept inside their int8 range
    fens = [datagen.to_board(positions, i).fen() for i in trainer.val_idx[:150].tolist()]
    cc = crosscheck(fnet, qnet, fens).summary()
    assert cc["mae_cp"] < 5 and cc["correlation"] > 0.999


@pytest.mark.parametrize("activation", ["pairwise", "crelu", "screlu", "glu", "bilinear"])
def test_model_computes_the_float_semantics(positions, activation):
    """The PyTorch model and nnue_infer.float_network.forward_float agree on every position."""
    arch = dataclasses.replace(SMALL, ft_activation=activation, ft_shift=0 if activation == "crelu" else 7)
    model = M.FloatModel(arch, seed=2)
    with torch.no_grad():  # move weights away from the initialisation so every part matters
        g = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
        model.ft_weights[-1] = 0
    fnet = M.model_to_float_network(model)
    feats, buckets = M.prepare_features(positions, arch)
    idx = np.arange(0, 3000, 37)
    got = model(torch.from_numpy(feats[idx]).long(), torch.from_numpy(buckets[idx])).detach().numpy()
    want = np.array([forward_float(fnet, datagen.to_board(positions, int(i))) for i in idx])
    assert np.abs(got - want).max() < 0.05 * max(1.0, np.abs(want).max() / 1000)


def test_fused_pairwise_kernels_match_pytorch_autograd(positions):
    fused, plain = M.FloatModel(SMALL, seed=4, fused=True), M.FloatModel(SMALL, seed=4, fused=False)
    with torch.no_grad():
        for p in fused.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
        fused.ft_weights[-1] = 0
    plain.load_state_dict(fused.state_dict())
    feats, buckets = M.prepare_features(positions, SMALL)
    f, b = torch.from_numpy(feats[:500]).long(), torch.from_numpy(buckets[:500])
    target = torch.from_numpy(positions["value"][:500].astype(np.float32))
    for m in (fused, plain):
        ((m(f, b) - target) ** 2).mean().backward()
    for (name, p), q in zip(fused.named_parameters(), plain.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-5 * float(q.grad.abs().max())), name


def test_checkpoint_resume_continues_the_same_run(positions, tmp_path):
    straight = T.Trainer(SMALL, positions, _config(epochs=2), tmp_path / "a", progress=False).fit()
    first = T.Trainer(SMALL, positions, _config(epochs=2), tmp_path / "b", progress=False)
    first.train_epoch()
    second = T.Trainer(SMALL, positions, _config(epochs=2), tmp_path / "b", progress=False)
    second.load_checkpoint(tmp_path / "b" / "checkpoint.pt")
    assert second.epoch == 1
    resumed = second.fit()
    assert resumed[-1]["val_loss"] == pytest.approx(straight[-1]["val_loss"], rel=1e-4)
    other = dataclasses.replace(SMALL, ft_width=64)
    with pytest.raises(T.TrainingError, match="another architecture"):
        T.Trainer(other, positions, _config(), tmp_path / "c", progress=False).load_checkpoint(tmp_path / "b" / "checkpoint.pt")


def test_bad_inputs_raise_clear_errors(positions, tmp_path):
    with pytest.raises(T.TrainingError, match=r"^config: epochs = 0: need >= 1$"):
        T.Trainer(SMALL, positions, _config(epochs=0), tmp_path, progress=False)
    with pytest.raises(T.TrainingError, match=r"^config: lr = nan: .*; sigmoid_scale_cp = 0: need a finite number > 0"):
        T.Trainer(SMALL, positions, _config(lr=float("nan"), sigmoid_scale_cp=0), tmp_path, progress=False)
    bad = dict(positions, bitboards=positions["bitboards"].copy())
    bad["bitboards"][17, 5] = 0  # no kings at all
    with pytest.raises(T.TrainingError, match="row 17: white king count 0"):
        M.prepare_features(bad, SMALL)
    with pytest.raises(T.TrainingError, match="not a preset"):
        T.architecture_from_spec(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("option,value", [("--sigmoid-scale", "0"), ("--lr", "-1"), ("--lr", "nan"),
                                          ("--val-fraction", "1.5"), ("--seed", "-1"),
                                          ("--seed", str(2**64))])  # (an overflow traceback: hostile pass 2)
def test_cli_train_names_the_bad_option(positions_file, tmp_path, capsys, option, value):
    """A bad value is a usage error naming its option, and no output directory is made (--sigmoid-scale 0
    ended in a ZeroDivisionError traceback and left an empty directory: hostile pass)."""
    status = main(["train", str(positions_file), "-o", str(tmp_path / "run"), "--epochs", "1", option, value])
    err = capsys.readouterr().err
    assert status == 2 and f"Invalid value for '{option}'" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fraction,problem", [("1e-9", "leaves 0 validation positions; need at least 2"),
                                              ("0.9999", "leaves no training position")])
def test_cli_train_refuses_a_split_that_leaves_too_few_positions(positions_file, tmp_path, capsys, fraction, problem):
    """1e-9 trained on 1 validation position and wrote a bare NaN correlation into summary.json; 0.9999
    left no training position and ended in "loss became nan ... lower the learning rate"."""
    status = main(["train", str(positions_file), "-o", str(tmp_path / "run"), "--epochs", "1", "--val-fraction", fraction])
    err = capsys.readouterr().err
    assert status == 2 and f"Invalid value for '--val-fraction': {float(fraction)!r} of 3000 positions {problem}" in err
    assert not (tmp_path / "run").exists()


def test_summary_json_is_strict_json_when_a_figure_is_undefined(positions_file, tmp_path):
    """A correlation over one position is undefined: summary.json says null (it said NaN, which strict
    JSON readers refuse), and the returned summary None."""
    summary = T.run(positions_file, tmp_path / "run", SMALL, _config(epochs=1), crosscheck_positions=1, progress=False,
                    log=lambda message: None)

    def refuse(constant):
        raise AssertionError(f"summary.json holds {constant}")

    written = json.loads((tmp_path / "run" / "summary.json").read_text(), parse_constant=refuse)
    cc = written["crosscheck_float_vs_quantised"]
    assert cc["positions"] == 1 and cc["correlation"] is None and cc["mae_cp"] >= 0
    assert summary["crosscheck_float_vs_quantised"] == cc


def test_cli_train_that_diverges_before_a_checkpoint_changes_nothing(positions_file, tmp_path, capsys):
    """--lr 1e308 diverges at once: exit 1 naming the step, and no directory is left (it left an empty one)."""
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    for out in (tmp_path / "new" / "run", existing):
        status = main(["train", str(positions_file), "-o", str(out), "--epochs", "1", "--batch-size", "512",
                       "--ft-width", "32", "--lr", "1e308", "--quiet"])
        err = capsys.readouterr().err
        assert status == 1 and "the training loss became nan at step 1 (epoch 1); lower the learning rate (lr = 1e+308)" in err
    assert not (tmp_path / "new").exists()
    assert [p.name for p in existing.iterdir()] == ["notes.txt"]


def test_cli_train_reads_the_eval_corpus_before_training(positions_file, tmp_path, capsys):
    """A malformed --eval-positions file fails before training (it failed after it, leaving a
    trained run without a summary)."""
    bad = tmp_path / "corpus.jsonl"
    bad.write_text('{"fen": "8/8/8/8/8/8/8/8 w - - 0 1"}\n')
    status = main(["train", str(positions_file), "-o", str(tmp_path / "run"), "--epochs", "1", "--ft-width", "32",
                   "--eval-positions", str(bad), "--quiet"])
    err = capsys.readouterr().err
    assert status == 1 and f"{bad}: line 1: not a corpus row with fen and raw.value" in err
    assert not (tmp_path / "run").exists()


def test_cli_train_checks_the_run_directory_before_training(positions_file, tmp_path, capsys):
    """-o below a file failed when the first checkpoint was saved, after an epoch of training."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    status = main(["train", str(positions_file), "-o", str(blocker / "run"), "--epochs", "1", "--ft-width", "32"])
    err = capsys.readouterr().err
    assert status == 1 and f"{blocker} is not a directory: no run directory can be made there" in err
    assert "validation positions" not in err  # (the line logged when training starts)


def test_cli_train_that_fails_after_a_checkpoint_says_so_in_the_directory(positions_file, tmp_path, capsys):
    """A failure after an epoch keeps the checkpoint and writes failed.json naming the failure;
    --resume then finishes the run and removes failed.json."""
    out = tmp_path / "run"
    (out / "network.safetensors").mkdir(parents=True)  # the quantised network cannot be written
    argv = ["train", str(positions_file), "-o", str(out), "--epochs", "1", "--batch-size", "512", "--ft-width", "32",
            "--val-fraction", "0.1", "--quiet"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    record = json.loads((out / "failed.json").read_text())
    assert record["type"] == "IsADirectoryError" and record["stage"] == "export" and record["epoch"] == 1
    assert "network.safetensors" in record["error"] and record["error"] in err
    assert f"{out / 'failed.json'} records the failure; the checkpoint of epoch 1 is kept" in err
    assert (out / "checkpoint.pt").is_file() and not (out / "summary.json").exists()
    (out / "network.safetensors").rmdir()
    assert main(argv + ["--resume"]) == 0
    assert (out / "summary.json").is_file() and not (out / "failed.json").exists()


def test_architecture_presets_and_json(tmp_path):
    assert T.architecture_from_spec("stockfish-15.1") == nnue_infer.stockfish_15_1_architecture()
    arch = T.architecture_from_spec("default", ft_width=64)
    assert arch.ft_width == 64 and arch.feature_set == "Chess768" and arch.mirror == "e-h"
    assert sorted(set(arch.king_buckets)) == [0, 1, 2, 3]
    path = tmp_path / "arch.json"
    path.write_text(arch.to_json())
    assert T.architecture_from_spec(str(path)) == arch
    assert isinstance(Architecture.from_json(path.read_text()), Architecture)


def test_architecture_activation_override_and_an_unknown_one_named():
    """``--ft-activation`` (the bundled network: ``default`` at width 512 with ``bilinear``) changes the
    activation alone; a name that is no feature-transformer activation is refused with the known ones."""
    base = T.architecture_from_spec("default", ft_width=64)
    arch = T.architecture_from_spec("default", ft_width=64, ft_activation="bilinear")
    assert arch.ft_activation == "bilinear" and base.ft_activation == "pairwise"
    assert dataclasses.replace(arch, ft_activation="pairwise") == base
    with pytest.raises(T.TrainingError, match="ft_activation 'swish': not one of .*bilinear"):
        T.architecture_from_spec("default", ft_activation="swish")


@pytest.mark.parametrize("spec", ["default", "stockfish-15.1"])
@pytest.mark.parametrize("activation", list(FT_ACTIVATIONS))
def test_architecture_activation_override_takes_the_quantisers_shift(spec, activation):
    """Every ``--ft-activation`` choice makes a valid architecture whose feature-transformer shift is
    the one the quantiser gives that activation, whatever the preset's own activation needed."""
    arch = T.architecture_from_spec(spec, ft_width=16, ft_activation=activation)
    qnet = nnue_infer.quantise(FloatNetwork.random(arch, seed=1))
    assert arch.ft_activation == activation and qnet.architecture.ft_activation == activation
    assert arch.ft_shift == qnet.architecture.ft_shift
    assert 0 < arch.ft_clamp ** arch.ft.degree >> arch.ft_shift <= arch.ft.max_output


@pytest.mark.parametrize("activation", ["hswish_glu", "pairwise_screlu"])
def test_cli_train_with_a_higher_degree_activation_writes_a_network(positions_file, tmp_path, activation):
    """Activations of degree 3 and 4 need a larger shift than the preset's pairwise one: the run
    trains, quantises and writes a network of that activation which evaluates."""
    out = tmp_path / "run"
    status = main(["train", str(positions_file), "-o", str(out), "--epochs", "1", "--ft-width", "16",
                   "--batch-size", "512", "--val-fraction", "0.1", "--quiet", "--ft-activation", activation])
    assert status == 0
    net = nnue_infer.load(out / "network.safetensors")
    assert net.architecture.ft_activation == activation
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crosscheck_float_vs_quantised"]["mae_cp"] < 10
    assert isinstance(nnue_infer.evaluate("8/8/8/4k3/8/3QK3/8/8 w - - 0 1", net), int)


def test_network_description_names_each_seed_once_and_counts_files_without_one(positions, tmp_path):
    """Concatenated files give a list of seeds (None for files without one, such as a study's chunks):
    the description lists each seed once and counts the rest, not a list of every file's."""
    assert T.describe_seeds(3) == "seed 3" and T.describe_seeds(None) == "no seed"
    assert T.describe_seeds([1, 2, 1] + [None] * 64) == "seeds 1, 2 and 64 files without one"
    assert T.describe_seeds([[1, 2], None, 3]) == "seeds 1, 2, 3 and 1 file without one"
    assert T.describe_seeds([None, None]) == "2 files without a seed"
    seeded, unseeded = tmp_path / "seeded.npz", tmp_path / "unseeded.npz"
    datagen.save(seeded, positions)
    meta = json.loads(str(positions["meta"]))
    datagen.save(unseeded, {**positions, "meta": np.array(json.dumps({k: v for k, v in meta.items() if k != "seed"}))})
    out = tmp_path / "run"
    assert main(["train", str(seeded), str(seeded), str(unseeded), "-o", str(out), "--epochs", "1", "--ft-width", "16",
                 "--batch-size", "512", "--val-fraction", "0.1", "--quiet"]) == 0
    description = nnue_infer.load(out / "network.safetensors").description
    assert f"9000 positions (seed {meta['seed']} and 1 file without one)" in description


def test_cli_train_refuses_an_unknown_activation_before_reading_data(tmp_path, capsys):
    """An unknown ``--ft-activation`` is a usage error naming the option and the known activations, raised
    before the data (here not a positions file at all) is read and before anything is written."""
    from nnue_infer.network import FT_ACTIVATIONS

    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a positions file")
    missing_dir = tmp_path / "run"
    assert main(["train", str(junk), "-o", str(missing_dir), "--ft-activation", "swish"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--ft-activation" in err and "'swish': not one of" in err and not missing_dir.exists()
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert all(name in help_text for name in FT_ACTIVATIONS)  # the help lists every activation there is


def test_cli_train_help_states_the_validation_cap_the_trainer_applies(capsys):
    """``--val-fraction`` of a large file is capped at ``TrainConfig.max_val`` positions: the help says so."""
    assert main(["train", "--help"]) == 0
    assert f"at most {T.TrainConfig().max_val:,}" in " ".join(capsys.readouterr().out.split())


def test_cli_train_writes_network_plot_and_summary(positions_file, tmp_path, data_dir, capsys):
    out = tmp_path / "run"
    argv = ["train", str(positions_file), str(positions_file), "-o", str(out), "--ft-width", "32", "--epochs", "2", "--batch-size", "512",
            "--lr", "3e-3", "--val-fraction", "0.1", "--quiet", "--eval-positions", str(data_dir / "positions-dev.jsonl")]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["final"]["epoch"] == 2 and report["accuracy"]["all"]["positions"] == 3298
    assert json.loads((out / "summary.json").read_text())["positions"] == 6000  # two files, concatenated
    net = nnue_infer.load(out / "network.safetensors")
    assert net.architecture.ft_width == 32
    assert isinstance(nnue_infer.evaluate("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", net), int)
    for name in ("loss.png", "loss.jsonl", "checkpoint.pt", "float.safetensors", "summary.json"):
        assert (out / name).is_file(), name


def test_core_package_does_not_import_torch():
    code = ("import sys, nnue_infer, nnue_infer.cli, nnue_infer.training.datagen, nnue_infer.training.distil; "
            "nnue_infer.cli.main(['--help']); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
