"""The one transition API: ``logistic`` on a rising measure, ``cliff`` on a falling one."""

import numpy as np
import pandas as pd
import pytest

from interp.analysis.transition import (
    detect_run_transition,
    detect_transition,
    find_transition,
    logistic,
    measure_direction,
)
from phenomenology.fit import observed_transition

STEPS = np.linspace(0, 60000, 301)


def _loss_step(mid=30000.0, width=1500.0, seed=0, noise=0.01):
    rng = np.random.default_rng(seed)
    return 2.0 / (1 + np.exp((STEPS - mid) / width)) + 0.05 + rng.normal(0, noise, STEPS.size)


def test_direction_from_the_measure_name():
    assert (
        measure_direction("ic_loss") == "falling" and measure_direction("train_loss") == "falling"
    )
    assert measure_direction("ic_acc") == "rising" and measure_direction("ila1") == "rising"


def test_rising_curve_gets_the_logistic_with_its_known_midpoint():
    rng = np.random.default_rng(1)
    acc = logistic(STEPS, 0.1, 0.98, 30000, 800) + rng.normal(0, 0.03, STEPS.size)
    r = find_transition(STEPS, acc)
    assert (r.method, r.direction) == ("logistic", "rising") and r.transitioned
    assert r.step == pytest.approx(30000, rel=0.01)
    # The same numbers as the logistic detector it wraps.
    assert r.step == detect_transition(STEPS, acc).step
    assert r.plateau_start == 0.0


def test_falling_curve_gets_the_cliff_at_the_steepest_log_step_drop():
    """For 2 / (1 + e^((t - m) / w)) the steepest drop per log-step is where 2 sigma - 1 = w / t,
    i.e. about m + 0.1 w (within one grid step of 200)."""
    r = find_transition(STEPS, _loss_step(), direction="falling")
    assert (r.method, r.direction) == ("cliff", "falling") and r.transitioned
    assert abs(r.step - 30150) <= 200
    assert r.plateau_level == pytest.approx(2.05, abs=0.03)
    assert r.final_level == pytest.approx(0.05, abs=0.03)
    # onset and end at 10% of the drop from the plateau and the floor: m -/+ w ln 9.
    assert r.plateau_end == pytest.approx(30000 - 1500 * np.log(9), abs=400)
    assert r.width == pytest.approx(2 * 1500 * np.log(9), abs=800)
    # Without a direction it is inferred from the curve.
    assert find_transition(STEPS, _loss_step()).method == "cliff"


def test_explicit_method_overrides_the_direction():
    r = find_transition(STEPS, _loss_step(), method="logistic", direction="falling")
    assert r.method == "logistic" and r.transitioned
    assert r.step == pytest.approx(30000, rel=0.01)
    assert r.plateau_level == pytest.approx(2.05, abs=0.05)  # levels in the curve's own sign


def test_smooth_decay_and_flat_curve_are_not_cliffs():
    decay = 2.0 * np.exp(-STEPS / 5000.0)
    r = find_transition(STEPS, decay, direction="falling")
    # Its steepest log-step drop is at t = tau, with no plateau before it.
    assert not r.transitioned and "no plateau" in r.reason
    assert r.step == pytest.approx(5000, abs=200)
    flat = 1.0 + np.random.default_rng(0).normal(0, 0.01, STEPS.size)
    r = find_transition(STEPS, flat, direction="falling")
    assert not r.transitioned and "drop" in r.reason
    with pytest.raises(ValueError, match="method"):
        find_transition(STEPS, flat, method="steepest")


def test_figures_and_fit_report_the_same_transition():
    """One detector behind both: the figures' step for a loss and the fit's observed step."""
    metrics = pd.DataFrame({"step": STEPS, "ic_loss": _loss_step(seed=2)})
    from_figures = detect_run_transition(metrics, column="ic_loss")
    from_fit = observed_transition(metrics, column="ic_loss")
    assert from_fit["method"] == "cliff" and from_fit["transitioned"]
    assert from_figures == from_fit["transition_step"]


def test_a_steady_fall_is_not_a_cliff():
    """A straight line's steepest log-step drop is at its end, with no real plateau before it."""
    r = find_transition(STEPS, 3.0 - STEPS / 30000.0, direction="falling")
    assert not r.transitioned and ("no plateau" in r.reason or "last point" in r.reason)
    assert r.step == STEPS[-1]


# A plateau drifting from 3.45 down to 3.01, then the cliff in the last two evaluations.
END_STEPS = np.arange(1, 41) * 250.0
END_LOSS = np.concatenate([3.45 - 0.44 * np.arange(37) / 36, [3.01, 0.82, 0.12]])


def test_a_cliff_in_the_last_evaluations_is_found():
    from interp.analysis.transition import smooth, smooth_symmetric

    # The ends of the one-sided smoothing put the drop at the last point (3.01 -> 1.9 -> 0.82);
    # the symmetric window keeps the last evaluations as they are.
    assert smooth(END_LOSS, 5)[-2] == pytest.approx((3.01 + 0.82) / 2)
    np.testing.assert_allclose(smooth_symmetric(END_LOSS, 5)[-3:], [3.01, 0.82, 0.12])
    np.testing.assert_allclose(smooth_symmetric(END_LOSS, 5)[2:-2], smooth(END_LOSS, 5)[2:-2])
    m = pd.DataFrame({"step": END_STEPS, "ic_loss": END_LOSS})
    obs = observed_transition(m, column="ic_loss")
    assert obs["transitioned"], obs["reason"]
    assert obs["transition_step"] == 9750.0  # the 0.82 evaluation: the steepest log-step drop
    # Unsmoothed, the same detector finds the same step.
    raw = find_transition(END_STEPS, END_LOSS, method="cliff", smooth_window=1)
    assert raw.transitioned and raw.step == 9750.0
    # A curve that stops at its cliff's first point still says why it counts no cliff.
    cut = observed_transition(m.iloc[:-1], column="ic_loss")
    assert not cut["transitioned"] and "last point" in cut["reason"]


def test_the_transition_report_gives_both_steps_by_name():
    from interp.analysis.transition import transition_report

    acc = np.concatenate([np.full(37, 0.12), [0.2, 0.8, 0.97]])
    report = transition_report(
        [pd.DataFrame({"step": END_STEPS, "ic_acc": acc, "ic_loss": END_LOSS})]
    )
    row = report.iloc[0]
    assert row["cliff_step"] == 9750.0  # the IC-loss cliff step
    assert row["step"] == detect_transition(END_STEPS, acc).step  # the IC-accuracy midpoint
    assert report.loc[report["run"] == "mean", "cliff_step"].item() == 9750.0
