"""Match statistics against fishtest's published results and against an independent maximum-likelihood fit.

The published numbers are fishtest's own output, copied from public pages (each cited where used); they are
rounded as fishtest prints them, so the checks allow half a unit of the last printed digit.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("scipy")
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from nnue_infer.search.statistics import (  # noqa: E402
    NELO_PER_T,
    SPRT,
    elo_to_score,
    llr,
    logistic_elo,
    normalized_elo,
    pair_category,
    pentanomial,
    score_to_elo,
    sprt_bounds,
)

# Fixed-games tests as fishtest printed them ("Elo: x +-y (95%) LOS: z%" and "nElo: x +-y (95%)").
PUBLISHED_ELO = [
    # official-stockfish/Stockfish pull request 4160 ("More LTC tuning."), fishtest test 631836b437f41b13973d7da1
    ([39, 5335, 18992, 5622, 12], 1.35, 1.2, 0.986, 3.13, 2.8),
    # official-stockfish/Stockfish pull request 6255 ("Simplify stalemate detection"), "Stalemate 10k"
    ([1, 137, 4659, 203, 0], 2.22, 1.3, 1.000, 12.00, 6.8),
]

# SPRTs as fishtest printed them ("LLR: x (-2.94,2.94) <elo0,elo1>": normalized Elo; "{elo0,elo1}": logistic).
PUBLISHED_LLR = [
    # Stockfish pull request 4160: the 60+0.6 8-thread SPRT
    ([12, 2318, 9925, 2598, 3], 0.5, 2.5, "normalized", 2.95),
    # Stockfish pull request 6255: non-regression STC and LTC
    ([317, 12094, 28735, 12231, 319], -1.75, 0.25, "normalized", 2.96),
    ([47, 9917, 26934, 10064, 45], -1.75, 0.25, "normalized", 2.94),
    # Stockfish pull request 4403 ("Simplify singular depth increment"): STC, LTC and the failed retest
    ([1402, 55789, 136915, 55460, 1426], -1.75, 0.25, "normalized", 2.96),
    ([173, 43599, 134275, 43384, 181], -1.75, 0.25, "normalized", 2.94),
    ([44, 11252, 34531, 10903, 50], -1.75, 0.25, "normalized", -2.94),
    # Stockfish pull request 3209 ("New net cb26f10b1fd9"): logistic bounds {-0.25,1.25} and {0.25,1.25}
    ([253, 4282, 17604, 4431, 286], -0.25, 1.25, "logistic", 2.94),
    ([58, 3302, 33130, 3518, 84], 0.25, 1.25, "logistic", 2.97),
    # official-stockfish/fishtest pull request 2088: results_info of running tests (one with zero counts)
    ([61, 12006, 31864, 12078, 47], 0.5, 2.5, "normalized", -2.24),
    ([1364, 74663, 161073, 73693, 1479], -1.75, 0.25, "normalized", -0.66),
    ([57, 4083, 10436, 4259, 56], 0.5, 2.5, "normalized", 1.14),
    ([129, 5397, 11780, 5428, 98], 0.0, 2.0, "normalized", -1.11),
    ([33, 1777, 4421, 1801, 29], 0.5, 2.5, "normalized", -0.21),
    ([0, 236, 690, 265, 0], 0.0, 2.0, "normalized", 0.32),
]


@pytest.mark.parametrize("counts, elo, error, los, nelo, nerror", PUBLISHED_ELO)
def test_elo_and_interval_match_fishtests_published_results(counts, elo, error, los, nelo, nerror):
    est = logistic_elo(counts)
    assert est.elo == pytest.approx(elo, abs=0.005)
    assert est.error95 == pytest.approx(error, abs=0.05)
    assert est.los == pytest.approx(los, abs=0.0005)
    nest = normalized_elo(counts)
    assert nest.elo == pytest.approx(nelo, abs=0.005)
    assert nest.error95 == pytest.approx(nerror, abs=0.05)


@pytest.mark.parametrize("counts, elo0, elo1, model, printed", PUBLISHED_LLR)
def test_llr_matches_fishtests_published_results(counts, elo0, elo1, model, printed):
    assert llr(counts, elo0, elo1, model) == pytest.approx(printed, abs=0.005)


def test_llr_matches_fishtests_full_precision_output():
    """fishtest's SPRT_elo for a normalized non-regression test, printed with every digit in
    official-stockfish/fishtest issue 1737 ("Is Fishtest Elo result reproducable from Pentanomial
    distribution or WDL?"): 'LLR': 2.9420974720708513, bounds +-2.9444389791664403."""
    assert llr([93, 18711, 58877, 18739, 100], -1.75, 0.25, "normalized") == pytest.approx(2.9420974720708513,
                                                                                             rel=1e-9)
    assert sprt_bounds(0.05, 0.05) == pytest.approx((-2.9444389791664403, 2.9444389791664403), rel=1e-12)


def _llr_by_direct_fit(counts, s0, s1):
    """The logistic GSPRT's LLR by a general constrained optimiser (SLSQP) instead of the secular equation:
    each hypothesis's distribution maximises the multinomial log-likelihood subject to its mean score."""
    import numpy as np
    from scipy.optimize import minimize

    reg = np.array([c if c > 0 else 1e-3 for c in counts], dtype=float)
    values = np.linspace(0, 1, len(reg))

    def fit(s):
        cons = [{"type": "eq", "fun": lambda p: p.sum() - 1}, {"type": "eq", "fun": lambda p: p @ values - s}]
        res = minimize(lambda p: -(reg * np.log(p)).sum(), np.full(len(reg), 1 / len(reg)), method="SLSQP",
                       bounds=[(1e-12, 1)] * len(reg), constraints=cons, options={"ftol": 1e-14, "maxiter": 500})
        return (reg * np.log(res.x)).sum()

    return fit(s1) - fit(s0)


@pytest.mark.parametrize("counts, elo0, elo1", [([3, 20, 50, 25, 2], 0, 5), ([10, 4, 12], -10, 10),
                                                  ([1, 9, 30, 12, 6], -5, 20)])
def test_logistic_llr_equals_a_direct_constrained_maximum_likelihood_fit(counts, elo0, elo1):
    expected = _llr_by_direct_fit(counts, elo_to_score(elo0), elo_to_score(elo1))
    assert llr(counts, elo0, elo1, "logistic") == pytest.approx(expected, abs=1e-5)


def test_elo_and_score_are_inverse_logistic_functions():
    assert elo_to_score(0) == 0.5
    assert score_to_elo(0.75) == pytest.approx(400 * math.log10(3))
    for elo in (-300.0, -10.0, 0.0, 42.0, 500.0):
        assert score_to_elo(elo_to_score(elo)) == pytest.approx(elo, abs=1e-9)
    assert NELO_PER_T == pytest.approx(347.43558552260146)


def test_pair_category_counts_the_pairs_points():
    assert [pair_category(a, b) for a, b in [(0, 0), (0, 0.5), (1, 0), (0.5, 0.5), (0.5, 1), (1, 1)]] == \
        [0, 1, 2, 2, 3, 4]
    assert pentanomial([(1, 0), (1, 1), (0.5, 0), (0.5, 0.5)]) == (0, 1, 2, 0, 1)
    with pytest.raises(ValueError, match="0, 0.5 or 1 point"):
        pair_category(2, 0)


def test_edge_cases_give_finite_answers():
    for counts in ([0, 0, 0, 0, 7], [7, 0, 0, 0, 0], [0, 0, 5, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0, 1, 0]):
        for f in (logistic_elo, normalized_elo):
            est = f(counts)
            assert math.isfinite(est.elo) and math.isfinite(est.error95) and 0 <= est.los <= 1, (counts, est)
        for model in ("logistic", "normalized"):
            assert math.isfinite(llr(counts, -2, 3, model))
    assert logistic_elo([0, 0, 0, 0, 7]).elo == pytest.approx(score_to_elo(1 - 1e-3))  # clamped, as fishtest's
    assert logistic_elo([0, 0, 5, 0, 0]).elo == pytest.approx(0, abs=1e-9)
    empty = logistic_elo([0, 0, 0, 0, 0])
    assert empty.elo == 0 and empty.error95 == math.inf
    assert llr([0, 0, 0], 0, 5, "logistic") == 0


def test_bad_inputs_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="3 counts .* or 5"):
        logistic_elo([1, 2, 3, 4])
    with pytest.raises(ValueError, match=">= 0"):
        normalized_elo([1, -1, 3])
    with pytest.raises(ValueError, match="unknown Elo model 'bayes'"):
        llr([1, 2, 3], 0, 5, "bayes")
    with pytest.raises(ValueError, match="elo0 must be below elo1"):
        SPRT(5, 0)
    with pytest.raises(ValueError, match="alpha must lie strictly between 0 and 1"):
        SPRT(0, 5, alpha=0)
    with pytest.raises(ValueError, match="alpha \\+ beta must be below 1"):
        sprt_bounds(0.6, 0.5)


def test_sprt_decides_at_its_bounds():
    test = SPRT(0, 2, model="normalized")
    assert test.lower == pytest.approx(math.log(0.05 / 0.95)) and test.upper == pytest.approx(math.log(0.95 / 0.05))
    assert test.decision([0, 0, 0, 0, 0]) is None and test.decision([1, 2, 3, 2, 1]) is None
    strong = [20, 400, 1200, 800, 120]
    weak = list(reversed(strong))
    assert test.decision(strong) == "H1" and test.llr(strong) > test.upper
    assert test.decision(weak) == "H0" and test.llr(weak) < test.lower


pentas = st.lists(st.integers(0, 400), min_size=5, max_size=5).filter(lambda c: sum(c) > 0)
trinos = st.lists(st.integers(0, 400), min_size=3, max_size=3).filter(lambda c: sum(c) > 0)


@settings(max_examples=60, deadline=None)
@given(st.one_of(pentas, trinos))
def test_symmetric_results_give_zero_elo(half):
    counts = [a + b for a, b in zip(half, reversed(half))]
    assert logistic_elo(counts).elo == pytest.approx(0, abs=1e-6)
    assert normalized_elo(counts).elo == pytest.approx(0, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.one_of(pentas, trinos), st.floats(-20, 20), st.floats(0.5, 20), st.sampled_from(["logistic", "normalized"]))
def test_swapping_the_engines_negates_elo_and_llr(counts, elo0, width, model):
    """The second engine's view reverses the counts (its wins are the first one's losses, a pair's LD its WD)."""
    mirror = list(reversed(counts))
    assert logistic_elo(mirror).elo == pytest.approx(-logistic_elo(counts).elo, abs=1e-6)
    assert logistic_elo(mirror).error95 == pytest.approx(logistic_elo(counts).error95, rel=1e-6)
    assert normalized_elo(mirror).elo == pytest.approx(-normalized_elo(counts).elo, abs=1e-6)
    elo1 = elo0 + width
    assert llr(mirror, -elo1, -elo0, model) == pytest.approx(-llr(counts, elo0, elo1, model), abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(pentas, st.floats(-30, 30), st.floats(0.5, 10))
def test_llr_grows_with_a_won_pair_and_with_h1_nearer_the_estimate(counts, elo0, width):
    """Adding a pair won twice makes H1 likelier against H0 (logistic and normalized); with the estimate above both
    hypotheses, moving H1 towards it raises the LLR (the profile likelihood is unimodal)."""
    elo1 = elo0 + width
    more = list(counts)
    more[4] += 1
    assert llr(more, elo0, elo1, "logistic") > llr(counts, elo0, elo1, "logistic") - 1e-9
    est = logistic_elo(counts).elo
    assume(est > elo1 + 1 and abs(est) < 500)
    assert llr(counts, elo0, (elo1 + est) / 2, "logistic") > llr(counts, elo0, elo1, "logistic")


@settings(max_examples=40, deadline=None)
@given(pentas)
def test_a_pentanomial_and_its_games_give_the_same_score(counts):
    """The pairs' mean score equals that of the games they hold (trinomial counts of the same games)."""
    ll, ld, dd_wl, wd, ww = counts
    # split WL+DD as all DD: the games are then 2 LL losses..., every category's games counted
    losses = 2 * ll + ld
    draws = ld + 2 * dd_wl + wd
    wins = wd + 2 * ww
    assume(min(counts) > 0 and min(losses, draws, wins) > 0)
    assert logistic_elo(counts).score == pytest.approx(logistic_elo([losses, draws, wins]).score, rel=1e-9)
