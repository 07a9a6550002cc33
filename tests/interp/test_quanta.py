"""Known answers of the quanta analysis (interp/analysis/quanta.py)."""

import numpy as np
import pandas as pd
import pytest

from interp.analysis.quanta import (
    class_frequencies,
    class_learning_steps,
    decompose_iw,
    fit_rank_exponent,
    frequency_ranks,
    ranks_tie,
)
from interp.data.task import TaskConfig, TaskGenerator


def step_frame(t_k, steps, low=0.05, high=0.9) -> pd.DataFrame:
    """A per_class_iw.csv frame where class k sits at ``low`` before ``t_k[k]`` and at ``high``
    from it on (never, for NaN)."""
    steps = np.asarray(steps)
    t = np.asarray(t_k, dtype=float)
    acc = np.where(steps[:, None] >= np.where(np.isfinite(t), t, np.inf)[None, :], high, low)
    return pd.DataFrame({"step": steps, **{f"c{k}": acc[:, k] for k in range(len(t))}})


def test_frequencies_and_ranks():
    np.testing.assert_allclose(class_frequencies(4, 1.0), np.array([12, 6, 4, 3]) / 25)
    np.testing.assert_allclose(class_frequencies(5, 0.0), np.full(5, 0.2))
    # The task's own weights (float32) are the same distribution.
    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, alpha=1.5, n_eval=8)
    gen_p = TaskGenerator(task, seed=0).class_probs.double().numpy()
    np.testing.assert_allclose(class_frequencies(64, 1.5), gen_p, rtol=1e-6)
    assert list(frequency_ranks(class_frequencies(4, 0.7))) == [1, 2, 3, 4]
    uniform = frequency_ranks(class_frequencies(6, 0.0))
    assert list(uniform) == [1] * 6 and ranks_tie(uniform)
    assert not ranks_tie([1, 2])
    with pytest.raises(ValueError, match="alpha=-1"):
        class_frequencies(4, -1)


def test_every_class_steps_at_a_known_step():
    steps = np.arange(0, 101, 10)  # evaluations at 0, 10, ..., 100
    acc = np.full((len(steps), 6), 0.1)
    acc[1:, 0] = 0.9  # class 0: from step 10 on
    acc[3:, 1] = 0.5  # class 1: from step 30 on, exactly at the threshold (counts)
    acc[3:, 2] = 1.0  # class 2: from step 30 on
    acc[2, 3] = 0.75  # class 3: a one-evaluation blip at step 20 ...
    acc[7:, 3] = 0.75  # ... then for good from step 70
    acc[-1, 4] = 1.0  # class 4: only at the last evaluation: not confirmed
    acc[:, 5] = np.nan  # class 5: never evaluated
    frame = pd.DataFrame({"step": steps, **{f"c{k}": acc[:, k] for k in range(6)}})
    t = class_learning_steps(frame, 0.5)
    np.testing.assert_array_equal(t.to_numpy(), [10, 30, 30, 70, np.nan, np.nan])
    assert t.name == "t_k" and list(t.index) == list(range(6))
    first = class_learning_steps(frame, 0.5, confirm=1)  # the first crossing
    np.testing.assert_array_equal(first.to_numpy(), [10, 30, 30, 20, 100, np.nan])
    strict = class_learning_steps(frame, 0.8)
    np.testing.assert_array_equal(strict.to_numpy(), [10, np.nan, 30, np.nan, np.nan, np.nan])
    # The rows may come in any order.
    shuffled = frame.sample(frac=1.0, random_state=0)
    np.testing.assert_array_equal(class_learning_steps(shuffled).to_numpy(), t.to_numpy())
    # The sum of sharp steps by hand, with p = (0.4, 0.2, 0.2, 0.1, 0.05, 0.05).
    p = np.array([0.4, 0.2, 0.2, 0.1, 0.05, 0.05])
    curves = decompose_iw(frame.fillna(0.0), p, t).curves.set_index("step")["steps"]
    assert curves[0] == 0 and curves[10] == pytest.approx(0.4) and curves[20] == pytest.approx(0.4)
    assert curves[30] == pytest.approx(0.8) and curves[70] == pytest.approx(0.9)
    assert curves[100] == pytest.approx(0.9)  # classes 4 and 5 never count
    with pytest.raises(ValueError, match="threshold=0"):
        class_learning_steps(frame, 0.0)
    with pytest.raises(ValueError, match="confirm=0"):
        class_learning_steps(frame, confirm=0)


def test_exact_decomposition_is_the_frequency_weighted_mean():
    frame = pd.DataFrame({"step": [0, 50], "c0": [1.0, 0.25], "c1": [0.0, 1.0], "c2": [0.5, 1.0]})
    p = [0.5, 0.3, 0.2]
    metrics = pd.DataFrame({"step": [0, 25, 50], "iw_acc": [0.6, 0.1, 0.725]})
    dec = decompose_iw(frame, p, [np.nan, 50, 0], metrics)
    # 0.5 * 1 + 0.3 * 0 + 0.2 * 0.5 = 0.6; 0.5 * 0.25 + 0.3 * 1 + 0.2 * 1 = 0.625
    np.testing.assert_allclose(dec.curves["exact"], [0.6, 0.625])
    np.testing.assert_allclose(dec.curves["steps"], [0.2, 0.5])  # c2 from 0, c1 from 50
    np.testing.assert_allclose(dec.curves["measured"], [0.6, 0.725])  # step 25 has no row
    assert dec.rms_exact == pytest.approx(np.sqrt((0.0**2 + 0.1**2) / 2))
    assert dec.rms_steps == pytest.approx(np.sqrt((0.4**2 + 0.225**2) / 2))
    assert np.isnan(decompose_iw(frame, p, [0, 0, 0]).rms_exact)  # nothing measured
    with pytest.raises(ValueError, match="must match"):
        decompose_iw(frame, [0.5, 0.5], [0, 0, 0])


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5])
def test_planted_power_law_is_recovered_within_its_interval(alpha):
    """t_k = 200 rank^alpha times log-normal scatter, measured through the learning rule on a
    grid of evaluations every 2 steps, with 10 of 64 classes never learned."""
    K = 64
    ranks = frequency_ranks(class_frequencies(K, alpha))
    rng = np.random.default_rng(7)
    planted = 200.0 * ranks**alpha * np.exp(rng.normal(0.0, 0.1, K))
    planted[rng.choice(K, 10, replace=False)] = np.nan
    steps = np.arange(0, int(np.nanmax(planted)) + 10, 2)
    t_k = class_learning_steps(step_frame(planted, steps))
    assert np.isnan(t_k).sum() == 10
    assert np.nanmax(np.abs(t_k - planted)) <= 2  # the next evaluation at or after t_k
    fit = fit_rank_exponent(t_k, ranks, predicted=alpha, n_boot=500, seed=1)
    assert fit.n_used == 54 and fit.n_classes == 64 and fit.predicted == alpha
    assert fit.low <= alpha <= fit.high
    assert fit.slope == pytest.approx(alpha, abs=0.05)
    assert fit.high - fit.low < 0.15  # an interval that says something
    assert np.exp(fit.intercept) == pytest.approx(200, rel=0.15)
    # Deterministic in its seed.
    assert fit == fit_rank_exponent(t_k, ranks, predicted=alpha, n_boot=500, seed=1)


def test_exponent_refuses_what_it_cannot_fit():
    tie = fit_rank_exponent([10.0, 20.0, 30.0], [1, 1, 1], predicted=0.0)
    assert tie.slope is None and "alpha = 0" in tie.reason and tie.n_used == 3
    few = fit_rank_exponent([10.0, np.nan, 30.0, np.nan], [1, 2, 3, 4])
    assert few.slope is None and "at least 3" in few.reason and few.n_used == 2
    zero = fit_rank_exponent([0.0, 10.0, 20.0, 40.0], [1, 2, 3, 4], n_boot=0)
    assert zero.n_used == 3 and zero.low is None  # t_k = 0 has no log; no bootstrap asked
    # Exactly a power law: the slope, and a degenerate interval.
    exact = fit_rank_exponent(5.0 * np.arange(1, 9) ** 1.25, np.arange(1, 9), n_boot=50)
    assert exact.slope == pytest.approx(1.25) and exact.low == pytest.approx(1.25)
    with pytest.raises(ValueError, match="3 classes but ranks has 2"):
        fit_rank_exponent([1.0, 2.0, 3.0], [1, 2])
