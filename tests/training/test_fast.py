"""The fast trainer (nnue_infer.training.fast): same values and gradients as the reference
PyTorch model (nnue_infer.training.model.FloatModel) on a batch, for every feature-transformer activation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nnue_infer.training import datagen, model as M, train as T  # noqa: E402
from nnue_infer.network import FT_ACTIVATIONS  # noqa: E402
from nnue_infer.quantisation import SCHEMES  # noqa: E402
from nnue_infer.training import fast  # noqa: E402


@pytest.fixture(scope="module")
def positions(network):
    """600 playout positions labelled by Stockfish 15.1's network."""
    return datagen.generate(600, 7, network, progress=False)


def _models(arch, seed):
    """A reference model and a fast one with the same parameters, moved off the initialisation so
    that every clamp of the activations is crossed by some accumulators and some are inside."""
    ref = M.FloatModel(arch, seed, fused=False)
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        for p in ref.parameters():
            p.add_(0.15 * torch.randn(p.shape, generator=g))
        ref.ft_weights[-1] = 0
    quick = fast.FastModel(arch, seed)
    quick.load_state_dict(ref.state_dict())
    return ref, quick


@pytest.mark.parametrize("activation", sorted(FT_ACTIVATIONS))
def test_fast_model_gradients_equal_the_reference(positions, activation):
    arch = dataclasses.replace(T.default_architecture(ft_width=32), ft_activation=activation,
                               ft_shift=SCHEMES["stockfish"].shift_for(activation))
    ref, quick = _models(arch, seed=3)
    feats, buckets = M.prepare_features(positions, arch)
    values = positions["value"].astype(np.float32)
    loss_ref = M.win_probability_mse(ref(torch.from_numpy(feats).long(), torch.from_numpy(buckets)), torch.from_numpy(values),
                       arch, 361.0, 600.0)
    f, b, v, counts = fast.sort_by_bucket(feats, buckets, values, arch.output_buckets)
    loss_fast = M.win_probability_mse(quick.forward_sorted(f, b, counts), v, arch, 361.0, 600.0)
    assert abs(float(loss_fast.detach()) - float(loss_ref.detach())) <= 1e-5 * float(loss_ref.detach())
    loss_ref.backward()
    loss_fast.backward()
    for (name, p), q in zip(quick.named_parameters(), ref.parameters()):
        if not q.requires_grad:
            continue
        scale = float(q.grad.abs().max())
        assert scale > 0, name
        assert torch.allclose(p.grad, q.grad, rtol=1e-3, atol=1e-4 * scale), name
    # the values, in the batch's own order
    got = fast.predict(quick, feats, buckets)
    want = ref(torch.from_numpy(feats).long(), torch.from_numpy(buckets)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


def test_fast_training_steps_lower_the_loss(positions):
    arch = T.default_architecture(ft_width=32)
    model = fast.FastModel(arch, 1)
    opt = fast.make_optimizer(model, 2e-3)
    feats, buckets = M.prepare_features(positions, arch)
    batch = fast.sort_by_bucket(feats, buckets, positions["value"].astype(np.float32), arch.output_buckets)
    losses = [fast.train_step(model, opt, batch, 361.0, 600.0, 2e-3) for _ in range(30)]
    assert losses[-1] < 0.7 * losses[0]
    limits = model._limits
    assert all(float(w.detach().abs().max()) <= lim for w, lim in zip(model.layer_weights, limits))
