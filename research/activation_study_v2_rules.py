"""The rules the activation study v2's runner (``activation_study_v2.py``) and its report
(``activation_study_v2_report.py``) share: the variants in table order and the learning-rate sweep's
choice.  Both import this module, neither the other's rules, so there is no import circle between them.
"""

from __future__ import annotations

#: Variants in table order: ungated (half-width accumulator: same first-layer inputs), the ungated
#: baseline with the paired variants' accumulator (same feature-transformer parameters), the gates.
VARIANTS = ("crelu", "screlu", "crelu_wide", "pairwise", "pairwise_screlu", "glu", "bilinear", "hswish_glu", "lut_glu")


def sweep_choice(lrs, lr_extend_to: float, loss_of, lr_min: float = 0.0) -> tuple[list[float], float | None]:
    """A variant's sweep: (its rates so far, the chosen rate or ``None`` while one is unmeasured).

    Parameters
    ----------
    lrs : sequence of float
        The planned rates.
    lr_extend_to : float
        While the best measured rate is the highest of the sweep, twice it joins the sweep if that
        is at most ``lr_extend_to`` (0: never).
    loss_of : callable
        ``loss_of(lr)``: the quantised validation loss of the sweep run at ``lr``, ``None`` if not run.
    lr_min : float
        While the best measured rate is the lowest of the sweep, half of it joins if that is at
        least ``lr_min`` (0: never, as in v2; v3 brackets both ways).
    """
    rates = sorted(float(x) for x in lrs)
    while True:
        losses = {lr: loss_of(lr) for lr in rates}
        if any(v is None for v in losses.values()):
            return rates, None
        best = min(rates, key=losses.get)
        if best == rates[0] and lr_min > 0 and best / 2 >= lr_min * (1 - 1e-9):
            rates.insert(0, best / 2)
            continue
        if best == rates[-1] and 0 < 2 * best <= lr_extend_to * (1 + 1e-9):
            rates.append(2 * best)
            continue
        return rates, best
