"""Match statistics as fishtest computes them: pentanomial counts, Elo with a 95 % interval, normalized Elo, SPRT.

Source of every formula: fishtest (official-stockfish/fishtest, ``server/fishtest/stats/``: ``stat_util.py`` for
the Elo estimate and its interval, ``LLRcalc.py`` for the generalized log-likelihood ratio of both Elo models,
``sprt.py`` for the bounds; ``server/fishtest/http/template_helpers.py`` for normalized Elo's interval), with the
theory in Michel Van den Bergh's notes (https://www.cantate.be/Fishtest/: ``support_MLE_multinomial.pdf``,
``normalized_elo_practical.pdf``).  Written from those formulas, not from the code.

Results are counts ordered from worst to best for the first engine:

* trinomial: ``(L, D, W)``, games lost, drawn and won;
* pentanomial: ``(LL, LD, WL+DD, WD, WW)`` over game pairs (an opening played once with each colour), the
  pair's points 0, 0.5, 1, 1.5 and 2 (:func:`pair_category`).

A count of zero is replaced by 0.001 before any estimate (fishtest's regularisation), so a handful of games, all
wins or all draws give finite numbers; an empty result gives Elo 0 with an infinite interval and an LLR of 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Normalized Elo per unit of t-value (fishtest's ``nelo_divided_by_nt``): 800 / ln 10.
NELO_PER_T = 800 / math.log(10)
#: What a count of zero becomes before an estimate (fishtest's ``regularize``).
ZERO_COUNT = 1e-3
#: Expected scores are clamped to [SCORE_CLAMP, 1 - SCORE_CLAMP] before conversion to Elo (fishtest's ``elo``):
#: all wins gives +1199.6 Elo, not infinity.
SCORE_CLAMP = 1e-3
#: Elo models of the SPRT (fishtest's names).
ELO_MODELS = ("logistic", "normalized")


def _norm():
    import scipy.stats

    return scipy.stats.norm


def score_to_elo(score: float) -> float:
    """Logistic Elo difference of an expected score per game (0 to 1, clamped to :data:`SCORE_CLAMP`):
    ``-400 log10(1 / score - 1)``."""
    score = min(max(float(score), SCORE_CLAMP), 1 - SCORE_CLAMP)
    return -400 * math.log10(1 / score - 1)


def elo_to_score(elo: float) -> float:
    """Expected score per game of a logistic Elo difference: ``1 / (1 + 10 ** (-elo / 400))``."""
    return 1 / (1 + 10 ** (-float(elo) / 400))


def pair_category(first: float, second: float) -> int:
    """Index 0-4 in the pentanomial of a game pair whose games scored ``first`` and ``second`` points (each 0, 0.5
    or 1, the same engine's view): twice the pair's points.  ``ValueError`` for another score."""
    points = []
    for p in (first, second):
        if p not in (0, 0.5, 1):
            raise ValueError(f"a game scores 0, 0.5 or 1 point, not {p!r}")
        points.append(p)
    return int(round(2 * (points[0] + points[1])))


def pentanomial(pairs: Iterable[tuple[float, float]]) -> tuple[int, int, int, int, int]:
    """The pentanomial counts ``(LL, LD, WL+DD, WD, WW)`` of game pairs, each given as its two games' points for
    the same engine (:func:`pair_category`)."""
    counts = [0] * 5
    for first, second in pairs:
        counts[pair_category(first, second)] += 1
    return tuple(counts)


def _checked(counts: Sequence[float]) -> list[float]:
    values = [float(c) for c in counts]
    if len(values) not in (3, 5):
        raise ValueError(f"results are 3 counts (L, D, W) or 5 pentanomial counts (LL..WW), not {len(values)}")
    if any(not math.isfinite(c) or c < 0 for c in values):
        raise ValueError(f"results must be finite counts >= 0, not {list(counts)}")
    return values


def _regularised(counts: Sequence[float]) -> list[float]:
    return [c if c > 0 else ZERO_COUNT for c in counts]


def _distribution(counts: Sequence[float]) -> tuple[float, list[float], list[float]]:
    """(samples, values, probabilities) of regularised ``counts``: values spread evenly over [0, 1] (a game's or a
    pair's score per game), probabilities the relative frequencies."""
    reg = _regularised(counts)
    n = sum(reg)
    k = len(reg)
    return n, [i / (k - 1) for i in range(k)], [c / n for c in reg]


def _moments(values: Sequence[float], probs: Sequence[float]) -> tuple[float, float]:
    mean = sum(p * v for v, p in zip(values, probs))
    return mean, sum(p * (v - mean) ** 2 for v, p in zip(values, probs))


@dataclass(frozen=True)
class EloEstimate:
    """An Elo difference with its 95 % interval.

    Attributes
    ----------
    elo : float
        The estimate (logistic or normalized Elo, as the function that made it says).
    error95 : float
        Half the width of the 95 % interval (``inf`` with no games).
    los : float
        Likelihood of superiority: the probability that the first engine is the stronger, 0 to 1.
    score : float
        The first engine's mean score per game, 0 to 1 (of the regularised counts).
    """

    elo: float
    error95: float
    los: float
    score: float


def logistic_elo(counts: Sequence[float]) -> EloEstimate:
    """Logistic Elo with its 95 % interval and LOS from trinomial ``(L, D, W)`` or pentanomial counts
    (fishtest's ``stat_util.get_elo``).

    The per-game score ``mu`` and its standard error come from the counts' categories (for pentanomial counts the
    variance is the pairs', which counts the correlation of an opening's two games); the interval is the Elo of
    ``mu +- 1.96 standard errors``, halved: ``(elo(mu_max) - elo(mu_min)) / 2``.

    Raises
    ------
    ValueError
        Not 3 or 5 counts, or a negative or non-finite count.
    """
    values = _checked(counts)
    if sum(values) == 0:
        return EloEstimate(0.0, math.inf, 0.5, 0.5)
    n, _, _ = _distribution(values)
    reg = _regularised(values)
    k = len(reg)
    games = n * (k - 1) / 2
    # points of category i: i / 2 (a game: 0, 0.5, 1; a pair: 0 to 2); the per-game score and the variance of a
    # category's points per game, as fishtest's stats()
    mu = sum(c * i / 2 for i, c in enumerate(reg)) / games
    centre = (k - 1) / 2 * mu
    var = sum(c * (i / 2 - centre) ** 2 for i, c in enumerate(reg)) / games
    stderr = math.sqrt(var / games)
    norm = _norm()
    lo, hi = mu + norm.ppf(0.025) * stderr, mu + norm.ppf(0.975) * stderr
    los = float(norm.cdf((mu - 0.5) / stderr)) if stderr > 0 else (1.0 if mu > 0.5 else 0.0 if mu < 0.5 else 0.5)
    return EloEstimate(score_to_elo(mu), (score_to_elo(hi) - score_to_elo(lo)) / 2, los, mu)


def normalized_elo(counts: Sequence[float]) -> EloEstimate:
    """Normalized Elo with its 95 % interval from trinomial or pentanomial counts (fishtest's ``nElo``).

    Normalized Elo is the t-value ``(mu - 1/2) / sigma`` of the score per game times ``800 / ln 10``, ``sigma`` the
    standard deviation of a game's score (pentanomial: ``sqrt(2)`` times that of a pair's mean score, so nElo is
    ``800 / ln 10 / sqrt(2)`` times the pairs' t-value).  Its interval is fishtest's: the t-value's asymptotic
    variance ``1 - t skewness + t^2 (excess kurtosis + 2) / 4`` over the number of samples.  The LOS is the
    logistic estimate's (the same test of ``mu > 1/2``).

    Raises
    ------
    ValueError
        Not 3 or 5 counts, or a negative or non-finite count.
    """
    values = _checked(counts)
    if sum(values) == 0:
        return EloEstimate(0.0, math.inf, 0.5, 0.5)
    n, vals, probs = _distribution(values)
    mean, var = _moments(vals, probs)
    sd = math.sqrt(var)
    skew = sum(p * (v - mean) ** 3 for v, p in zip(vals, probs)) / sd ** 3
    exkurt = sum(p * (v - mean) ** 4 for v, p in zip(vals, probs)) / var ** 2 - 3
    t = (mean - 0.5) / sd
    var_t = max(1 - t * skew + 0.25 * t * t * (exkurt + 2), 0.0)
    scale = NELO_PER_T / (math.sqrt(2) if len(values) == 5 else 1)
    error = scale * float(_norm().ppf(0.975)) * math.sqrt(var_t / n)
    return EloEstimate(scale * t, error, logistic_elo(values).los, mean)


def _secular_root(shifted: Sequence[float], probs: Sequence[float]) -> float:
    """The root ``x`` of ``sum_i p_i a_i / (1 + x a_i) = 0`` for which every ``1 + x a_i`` is positive (the
    Lagrange multiplier of the maximum-likelihood distribution under a linear constraint: Van den Bergh,
    ``support_MLE_multinomial.pdf``, Proposition 1.1).  ``ValueError`` when the ``a_i`` are not of both signs."""
    from scipy.optimize import brentq

    lo_a, hi_a = min(shifted), max(shifted)
    if not lo_a < 0 < hi_a:
        raise ValueError("the hypothesis lies outside the range of the observed results: no maximum-likelihood "
                         f"distribution (shifted values {min(shifted):.6g} to {max(shifted):.6g})")
    eps = 1e-9

    def f(x: float) -> float:
        return sum(p * a / (1 + x * a) for a, p in zip(shifted, probs))

    return brentq(f, -1 / hi_a + eps, -1 / lo_a - eps)


def _mle_with_mean(values: Sequence[float], probs: Sequence[float], s: float) -> list[float]:
    """The distribution on ``values`` closest to the observed ``probs`` (maximum likelihood) whose mean is ``s``."""
    shifted = [v - s for v in values]
    x = _secular_root(shifted, probs)
    return [p / (1 + x * a) for a, p in zip(shifted, probs)]


def _mle_with_t(values: Sequence[float], probs: Sequence[float], ref: float, t: float) -> list[float]:
    """The maximum-likelihood distribution on ``values`` whose t-value ``(mean - ref) / sd`` is ``t``: the
    fixed-point iteration of ``normalized_elo_practical.pdf`` (Section 4.1), from the uniform distribution."""
    k = len(values)
    current = [1 / k] * k
    for _ in range(10):
        mean, var = _moments(values, current)
        sd = math.sqrt(var)
        shifted = [v - ref - t * sd * (1 + ((mean - v) / sd) ** 2) / 2 for v in values]
        x = _secular_root(shifted, probs)
        new = [p / (1 + x * a) for a, p in zip(shifted, probs)]
        done = max(abs(a - b) for a, b in zip(new, current)) < 1e-9
        current = new
        if done:
            break
    return current


def llr(counts: Sequence[float], elo0: float, elo1: float, model: str = "normalized") -> float:
    """The generalized log-likelihood ratio of H1 (Elo = ``elo1``) against H0 (Elo = ``elo0``) for trinomial or
    pentanomial ``counts`` (fishtest's ``LLR_logistic`` / ``LLR_normalized``).

    Each hypothesis's likelihood is the multinomial likelihood of the counts under the maximum-likelihood
    distribution that satisfies it: a mean score per game of ``elo_to_score(elo)`` (``model="logistic"``), or a
    t-value of the score of ``elo / (800 / ln 10)`` per game (``"normalized"``; ``sqrt(2)`` times that for the
    pairs of pentanomial counts).  The LLR is the number of samples (games or pairs) times the mean difference of
    the two distributions' log-probabilities under the observed one.

    Returns
    -------
    float
        The LLR (natural log); 0 with no games.

    Raises
    ------
    ValueError
        Bad counts (see :func:`logistic_elo`), an unknown ``model``, ``elo0 >= elo1``, or a hypothesis outside what
        the counts' categories can express.
    """
    values = _checked(counts)
    if model not in ELO_MODELS:
        raise ValueError(f"unknown Elo model {model!r} (expected one of {', '.join(ELO_MODELS)})")
    if not elo0 < elo1:
        raise ValueError(f"the SPRT's elo0 must be below elo1 (got {elo0} and {elo1})")
    if sum(values) == 0:
        return 0.0
    n, vals, probs = _distribution(values)
    if model == "logistic":
        p0, p1 = (_mle_with_mean(vals, probs, elo_to_score(e)) for e in (elo0, elo1))
    else:
        scale = math.sqrt(2) if len(values) == 5 else 1.0
        p0, p1 = (_mle_with_mean_t(vals, probs, e * scale / NELO_PER_T) for e in (elo0, elo1))
    return n * sum(p * (math.log(b) - math.log(a)) for p, a, b in zip(probs, p0, p1))


def _mle_with_mean_t(values: Sequence[float], probs: Sequence[float], t: float) -> list[float]:
    return _mle_with_t(values, probs, 0.5, t)


def sprt_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's bounds of the LLR for error rates ``alpha`` (accepting H1 when H0 holds) and ``beta`` (accepting H0
    when H1 holds): ``(log(beta / (1 - alpha)), log((1 - beta) / alpha))``.  ``ValueError`` unless both lie in
    (0, 1) and ``alpha + beta < 1``."""
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not 0 < v < 1:
            raise ValueError(f"the SPRT's {name} must lie strictly between 0 and 1 (got {v})")
    if alpha + beta >= 1:
        raise ValueError(f"the SPRT's alpha + beta must be below 1 (got {alpha} + {beta})")
    return math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)


@dataclass(frozen=True)
class SPRT:
    """A sequential probability ratio test of H0: Elo = ``elo0`` against H1: Elo = ``elo1`` (fishtest's GSPRT).

    Parameters
    ----------
    elo0, elo1 : float
        The hypotheses, ``elo0 < elo1``, in ``model``'s Elo.
    alpha, beta : float
        Error rates: of accepting H1 when H0 holds, of accepting H0 when H1 holds (fishtest: 0.05 each).
    model : {"normalized", "logistic"}
        The Elo model of ``elo0`` and ``elo1`` (fishtest's default today: normalized).

    Raises
    ------
    ValueError
        ``elo0 >= elo1``, bad error rates (:func:`sprt_bounds`) or an unknown model.

    Notes
    -----
    The test stops at the first LLR outside ``(lower, upper)``; fishtest's overshoot correction of the bounds
    (dynamic, from the LLR's past jumps) is not applied.
    """

    elo0: float
    elo1: float
    alpha: float = 0.05
    beta: float = 0.05
    model: str = "normalized"

    def __post_init__(self) -> None:
        if self.model not in ELO_MODELS:
            raise ValueError(f"unknown Elo model {self.model!r} (expected one of {', '.join(ELO_MODELS)})")
        if not (math.isfinite(self.elo0) and math.isfinite(self.elo1) and self.elo0 < self.elo1):
            raise ValueError(f"the SPRT's elo0 must be below elo1 (got {self.elo0} and {self.elo1})")
        sprt_bounds(self.alpha, self.beta)

    @property
    def lower(self) -> float:
        """The LLR below which H0 is accepted."""
        return sprt_bounds(self.alpha, self.beta)[0]

    @property
    def upper(self) -> float:
        """The LLR above which H1 is accepted."""
        return sprt_bounds(self.alpha, self.beta)[1]

    def llr(self, counts: Sequence[float]) -> float:
        """The LLR of ``counts`` (:func:`llr`)."""
        return llr(counts, self.elo0, self.elo1, self.model)

    def decision(self, counts: Sequence[float]) -> str | None:
        """``"H1"`` (LLR above :attr:`upper`), ``"H0"`` (below :attr:`lower`) or ``None`` (play on)."""
        value = self.llr(counts)
        if value > self.upper:
            return "H1"
        if value < self.lower:
            return "H0"
        return None
