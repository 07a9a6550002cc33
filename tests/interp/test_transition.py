import numpy as np
import pandas as pd
import pytest

from interp.analysis.transition import detect_transition, event_order, logistic, transition_report


def noisy_logistic(mid, scale, seed, n=200, noise=0.03, low=0.1, high=0.98):
    rng = np.random.default_rng(seed)
    steps = np.linspace(0, 60000, n)
    return steps, logistic(steps, low, high, mid, scale) + rng.normal(0, noise, n)


@pytest.mark.parametrize("mid, scale", [(30000, 800), (12000, 300), (45000, 2000)])
def test_recovers_step_of_noisy_logistic(mid, scale):
    steps, values = noisy_logistic(mid, scale, seed=mid)
    r = detect_transition(steps, values)
    assert r.transitioned
    assert r.step == pytest.approx(mid, rel=0.03)
    assert r.plateau_level == pytest.approx(0.1, abs=0.03)
    assert r.final_level == pytest.approx(0.98, abs=0.03)
    assert r.width == pytest.approx(2 * np.log(9) * scale, rel=0.5)
    assert r.plateau_end < r.step


@pytest.mark.parametrize("mid, scale", [(30000, 800), (12000, 300), (45000, 2000)])
def test_width_is_the_10_to_90_percent_rise_time(mid, scale):
    """On a clean logistic the width equals the steps between the curve's own 10% and 90%
    crossings, read off a dense grid (independently of the 2 ln 9 formula). The 20-80% time is
    2 ln 4 / 2 ln 9 = 0.63 of it, far outside the 2% tolerance."""
    steps = np.linspace(0, 60000, 600)
    low, high = 0.1, 0.98
    values = logistic(steps, low, high, mid, scale)
    fine = np.linspace(0, 60000, 600001)
    curve = logistic(fine, low, high, mid, scale)
    t10 = fine[np.argmax(curve >= low + 0.1 * (high - low))]
    t90 = fine[np.argmax(curve >= low + 0.9 * (high - low))]
    r = detect_transition(steps, values)
    assert r.transitioned
    assert r.width == pytest.approx(t90 - t10, rel=0.02)
    assert not r.width == pytest.approx(np.log(4) / np.log(9) * (t90 - t10), rel=0.1)


def test_flat_curve_reports_no_transition():
    rng = np.random.default_rng(0)
    steps = np.linspace(0, 60000, 200)
    r = detect_transition(steps, 0.1 + rng.normal(0, 0.03, 200))
    assert not r.transitioned and r.step is None and "rise" in r.reason


def test_gradual_climb_is_not_an_abrupt_transition():
    """A rise spread over the whole run (10-90% width ~53k of 60k steps) is reported as gradual;
    the same rise 10x faster is a transition."""
    steps, slow = noisy_logistic(30000, 12000, seed=3, noise=0.01)
    r = detect_transition(steps, slow)
    assert not r.transitioned and r.step is None and "gradual rise" in r.reason
    steps, fast = noisy_logistic(30000, 1200, seed=3, noise=0.01)
    assert detect_transition(steps, fast).transitioned


def test_robust_to_outliers():
    steps, values = noisy_logistic(20000, 500, seed=1)
    values[::17] = 0.0  # dropouts
    r = detect_transition(steps, values)
    assert r.transitioned and r.step == pytest.approx(20000, rel=0.05)


def test_event_order_and_report_across_seeds():
    frames = []
    for seed, mid in enumerate([20000, 24000, 28000]):
        steps, acc = noisy_logistic(mid, 500, seed)
        _, cla = noisy_logistic(mid - 8000, 3000, seed + 10, low=0.2, high=1.0)
        _, ila1 = noisy_logistic(mid - 200, 500, seed + 20, low=0.15, high=0.9)
        frames.append(
            pd.DataFrame({"step": steps, "ic_acc": acc, "cla": cla, "ila1": ila1, "tila2": acc})
        )
    order = event_order(frames[0], ["cla", "ila1", "tila2", "ic_acc"])
    assert order["measure"].iloc[0] == "cla"
    assert order.set_index("measure").loc["cla", "lag"] == pytest.approx(-8000, rel=0.1)
    report = transition_report(
        frames + [pd.DataFrame({"step": steps, "ic_acc": np.full(200, 0.1)})]
    )
    assert list(report["run"]) == ["run0", "run1", "run2", "run3", "mean", "std"]
    mean = report.set_index("run").loc["mean"]
    assert mean["transitioned"] == "3/4"
    assert mean["step"] == pytest.approx(24000, rel=0.03)


def test_too_few_points_is_not_a_transition():
    r = detect_transition([0, 1, 2], [0.1, 0.5, 0.9])
    assert not r.transitioned and "too few points" in r.reason


def test_measured_plateau_level_is_the_median_of_the_plateau_s_last_fifth():
    """A plateau that drifts from 0.05 to 0.15 before a jump at 30k: the logistic's floor sits
    near the start of the drift, the measured level is what the curve reads just before the jump
    (the median of the last 20% of the plateau, here about 0.14)."""
    steps = np.arange(0, 60001, 500.0)
    drift = 0.05 + 0.10 * np.clip(steps / 28000, 0, 1)
    jump = 1 / (1 + np.exp(-(steps - 30000) / 400))
    values = drift + (1.0 - drift) * jump
    r = detect_transition(steps, values)
    assert r.transitioned
    on_plateau = (steps >= r.plateau_end - 0.2 * r.plateau_length) & (steps <= r.plateau_end)
    assert r.plateau_measured == pytest.approx(np.median(values[on_plateau]), abs=1e-12)
    assert r.plateau_measured == pytest.approx(0.14, abs=0.01)
    assert r.plateau_level < r.plateau_measured - 0.03  # the fit's floor is not the level
    assert np.isnan(detect_transition(steps, np.full_like(steps, 0.1)).plateau_measured)


@pytest.mark.parametrize("first, mid, scale", [(1000, 30000, 1500), (5000, 12000, 400)])
def test_plateau_ends_at_the_curves_10_percent_point_and_is_counted_from_the_first_step(
    first, mid, scale
):
    """On a clean logistic recorded from step ``first`` (not 0, so that the plateau's length and
    its end differ), the plateau ends where the curve itself first reaches 10% of its rise (read
    off a dense grid, independently of the ``mid - ln 9 scale`` formula) and lasts from the first
    recorded step to there."""
    low, high = 0.1, 0.98
    steps = np.linspace(first, 60000, 400)
    fine = np.linspace(first, 60000, 590001)
    t10 = fine[np.argmax(logistic(fine, low, high, mid, scale) >= low + 0.1 * (high - low))]
    r = detect_transition(steps, logistic(steps, low, high, mid, scale))
    assert r.transitioned
    assert r.plateau_end == pytest.approx(t10, abs=2)
    assert r.plateau_length == pytest.approx(t10 - first, abs=2)
    # the falling form (a loss) through the one detector keeps the same plateau
    from interp.analysis.transition import find_transition

    f = find_transition(steps, -logistic(steps, low, high, mid, scale), method="logistic")
    assert f.plateau_start == first
    assert f.plateau_end == pytest.approx(t10, abs=2)
    assert f.plateau_length == pytest.approx(t10 - first, abs=2)
