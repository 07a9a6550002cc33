"""The transition law's prior and a partial curve's forecast combined by precision
(:func:`phenomenology.prior.combine`), with unequal spreads, so that the weights cannot be crossed
unnoticed: the combined ``log T`` is the inverse-variance weighted mean, its sd
``(1/s0^2 + 1/sc^2)^-1/2``."""

from __future__ import annotations

import math

import pytest

from phenomenology.law_forms import Z80
from phenomenology.prior import combine
from phenomenology.transition_law import Prediction

PRIOR_MEAN, PRIOR_SD = math.log(20000.0), 0.2  # the law: sure of itself
CURVE_STEP, CURVE_SD, BIAS = 40000.0, 0.6, 0.1  # the curve: three times as spread
SEEN = 1000.0  # r = 1000 / 40000 in the first bin; 1000 / 20000 early in the prior's plateau


def _prior(mean: float = PRIOR_MEAN, sd: float = PRIOR_SD) -> Prediction:
    return Prediction.interval(mean, Z80 * sd, sd)


def _calibration(mode: str = "weighted", sd: float = CURVE_SD) -> dict:
    cell = {"bin": 0, "prior_bin": 0, "n": 30, "bias": BIAS, "sd": sd, "mode": mode}
    return {"template": [cell]}


def _weighted(m0: float, s0: float, mc: float, sc: float) -> tuple[float, float]:
    w0, wc = 1 / s0**2, 1 / sc**2
    return (w0 * m0 + wc * mc) / (w0 + wc), math.sqrt(1 / (w0 + wc))


def test_unequal_spreads_give_the_inverse_variance_weighted_mean():
    post = combine(_prior(), CURVE_STEP, "template", SEEN, _calibration())
    mc = math.log(CURVE_STEP) + BIAS
    mean, sd = _weighted(PRIOR_MEAN, PRIOR_SD, mc, CURVE_SD)
    # the law's weight is 9 times the curve's: 0.9 of the way to the prior
    assert mean == pytest.approx(0.9 * PRIOR_MEAN + 0.1 * mc, abs=1e-12)
    assert post.log_mean == pytest.approx(mean, abs=1e-12)
    assert post.log_sd == pytest.approx(sd, abs=1e-12)
    # the truncation at T > 1000 is 20 sd away: the median and quantiles are the normal's
    assert post.step == pytest.approx(math.exp(mean), rel=1e-9)
    assert post.low == pytest.approx(math.exp(mean - Z80 * sd), rel=1e-6)
    assert post.high == pytest.approx(math.exp(mean + Z80 * sd), rel=1e-6)
    # crossed weights (each estimate weighed by the other's precision) land elsewhere
    crossed = (PRIOR_MEAN / CURVE_SD**2 + mc / PRIOR_SD**2) / (1 / CURVE_SD**2 + 1 / PRIOR_SD**2)
    assert abs(post.log_mean - crossed) > 0.4


def test_the_sharper_estimate_wins_whichever_side_it_is_on():
    # swap the spreads: now the curve is the sharp one and pulls the mean to itself
    post = combine(_prior(sd=0.6), CURVE_STEP, "template", SEEN, _calibration(sd=0.2))
    mc = math.log(CURVE_STEP) + BIAS
    mean, sd = _weighted(PRIOR_MEAN, 0.6, mc, 0.2)
    assert mean == pytest.approx(0.1 * PRIOR_MEAN + 0.9 * mc, abs=1e-12)
    assert post.log_mean == pytest.approx(mean, abs=1e-12)
    assert post.log_sd == pytest.approx(sd, abs=1e-12)


def test_curve_mode_takes_the_bias_corrected_curve_alone():
    post = combine(_prior(), CURVE_STEP, "template", SEEN, _calibration("curve"))
    assert post.log_mean == pytest.approx(math.log(CURVE_STEP) + BIAS, abs=1e-12)
    assert post.log_sd == pytest.approx(CURVE_SD, abs=1e-12)


def test_prior_mode_and_an_uncalibrated_method_leave_the_prior():
    for cal, method in ((_calibration("prior"), "template"), (_calibration(), "progress")):
        post = combine(_prior(), CURVE_STEP, method, SEEN, cal)
        assert post.log_mean == pytest.approx(PRIOR_MEAN, abs=1e-12)
        assert post.log_sd == pytest.approx(PRIOR_SD, abs=1e-12)
