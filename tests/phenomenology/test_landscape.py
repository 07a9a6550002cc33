"""Known answers of the nested-logit model [docs/science.md section 4] and its predictions."""

import math

import numpy as np
import pytest

from phenomenology.landscape import (
    check_task,
    cliff_window_drop,
    detect_cliff,
    gradient,
    gradient_descent,
    gradient_flow,
    landscape_grid,
    loss,
    quantities,
)
from phenomenology.predictions import origin_stuck, plateau_length, plateau_lengths

TASK = {"L": 32, "N": 8, "B": 2}  # n = 4
SMALL_START = (-6.0, 0.0, 0.0)


def _fd_gradient(point, task, h=1e-6):
    g = np.zeros(3)
    for i in range(3):
        xp, xm = np.array(point, float), np.array(point, float)
        xp[i] += h
        xm[i] -= h
        g[i] = (loss(*xp, **task) - loss(*xm, **task)) / (2 * h)
    return g


def test_loss_at_origin_is_log_L():
    assert loss(0.0, 0.0, 0.0, **TASK) == pytest.approx(math.log(32), abs=1e-12)
    q = quantities(0.0, 0.0, 0.0, **TASK)
    assert q["acc"] == pytest.approx(1 / 32)
    assert q["p"] == pytest.approx(1 / 4)  # B / N: attention spread evenly
    assert q["cla"] == pytest.approx(4 / 32)


@pytest.mark.parametrize("L,N,B", [(32, 8, 2), (10, 8, 1), (5, 8, 2), (4, 8, 2), (64, 16, 4)])
def test_dxi_at_origin_is_1_over_L_minus_1_over_n(L, N, B):
    n = N // B
    g = gradient(0.0, 0.0, 0.0, L=L, N=N, B=B)
    assert g[2] == pytest.approx(1 / L - 1 / n, abs=1e-14)
    assert g[0] == 0.0 and g[1] == 0.0


@pytest.mark.parametrize(
    "point", [(-1.3, 0.7, 2.1), (0.5, 3.0, 8.0), (-6.0, 0.01, 0.3), (2.0, -1.0, -4.0)]
)
def test_analytic_gradient_matches_finite_differences(point):
    np.testing.assert_allclose(gradient(*point, **TASK), _fd_gradient(point, TASK), atol=1e-7)


def test_user_loss_form_uses_finite_differences():
    def scaled(b1, a, xi, L, N, B):
        return 2.0 * loss(b1, a, xi, L=L, N=N, B=B)

    point = (-1.0, 2.0, 3.0)
    np.testing.assert_allclose(
        gradient(*point, **TASK, loss_fn=scaled), 2.0 * gradient(*point, **TASK), atol=1e-6
    )


@pytest.mark.parametrize("b1,a", [(-3.0, 0.0), (0.0, 5.0), (2.0, -1.0)])
def test_dalpha_vanishes_when_xi_is_zero(b1, a):
    assert gradient(b1, a, 0.0, **TASK)[1] == 0.0


@pytest.mark.parametrize("b1,xi", [(-3.0, 1.0), (0.0, 5.0), (2.0, -2.0)])
def test_dbeta1_vanishes_when_alpha_is_zero(b1, xi):
    assert gradient(b1, 0.0, xi, **TASK)[0] == 0.0


def test_origin_is_critical_at_L_equal_n_and_descent_stays():
    np.testing.assert_array_equal(gradient(0.0, 0.0, 0.0, L=4, N=8, B=2), 0.0)
    traj = origin_stuck(8, 2, steps=2000, record_every=500)
    assert (traj[["beta1", "alpha", "xi"]].to_numpy() == 0.0).all()
    np.testing.assert_allclose(traj["loss"], math.log(4))
    np.testing.assert_allclose(traj["acc"], 1 / 4)


def test_descent_from_small_start_has_plateau_then_cliff():
    traj = gradient_descent(SMALL_START, **TASK, lr=0.1, steps=4000)
    t, y = traj["t"].to_numpy()[1:], traj["loss"].to_numpy()[1:]
    cliff = detect_cliff(t, y)
    # The plateau: after the quick drop log L -> about log n, a long stretch (more than half of
    # the time to the jump) on which the loss falls at a tenth of the cliff's log-time rate.
    assert cliff.plateau_length > 0.5 * cliff.transition
    assert cliff.plateau_log_slope < 0.1 * cliff.peak_log_slope
    assert abs(cliff.plateau_loss - math.log(4)) < 0.3
    # The cliff: the loss more than halves within a window of 5% of the time taken to reach it.
    assert cliff_window_drop(t, y, window=0.05) < 0.5
    assert cliff.floor_loss < 0.01


def test_xi_then_alpha_then_beta1():
    traj = gradient_flow(SMALL_START, **TASK, t_max=600, n_points=6001)

    def first_time(col, frac=0.1):
        move = (traj[col] - traj[col].iloc[0]).abs()
        return traj["t"][np.argmax(move.to_numpy() >= frac * move.max())]

    t_xi, t_alpha, t_beta1 = first_time("xi"), first_time("alpha"), first_time("beta1")
    assert t_xi < t_alpha < t_beta1
    # and the accuracy first moves from 1/L towards 1/n, before the jump
    cliff = detect_cliff(traj["t"].to_numpy()[1:], traj["loss"].to_numpy()[1:])
    acc_plateau = np.interp(cliff.onset * 0.9, traj["t"], traj["acc"])
    assert 1 / 32 < acc_plateau < 1 / 4 + 0.01
    assert t_xi < cliff.onset and t_beta1 < cliff.end


def test_flow_and_descent_agree_for_small_lr():
    flow = gradient_flow(SMALL_START, **TASK, t_eval=[0.0, 100.0, 200.0, 300.0])
    gd = gradient_descent(SMALL_START, **TASK, lr=0.01, steps=30000, record_every=10000)
    np.testing.assert_allclose(gd["loss"], flow["loss"], rtol=2e-2, atol=1e-3)


def test_trajectory_columns_and_recording():
    traj = gradient_descent(SMALL_START, **TASK, lr=0.1, steps=1001, record_every=100)
    assert list(traj.columns) == [
        "step",
        "t",
        "beta1",
        "alpha",
        "xi",
        "s1",
        "p",
        "loss",
        "acc",
        "cla",
    ]
    assert traj["step"].tolist() == [*range(0, 1001, 100), 1001]
    flow = gradient_flow(SMALL_START, **TASK, t_max=10, n_points=11)
    assert list(flow.columns) == ["t", "beta1", "alpha", "xi", "s1", "p", "loss", "acc", "cla"]


def test_landscape_grid_orientation():
    xs, ys, Z = landscape_grid(
        "alpha", "xi", {"alpha": (0, 4), "xi": (-2, 6)}, {"beta1": 1.0}, **TASK, n_points=9
    )
    assert Z.shape == (9, 9)
    assert Z[3, 5] == pytest.approx(loss(1.0, xs[5], ys[3], **TASK))


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"L": 3, "N": 8, "B": 2}, "L"),
        ({"L": 32, "N": 8, "B": 3}, "B"),
        ({"L": 32, "N": 8, "B": 8}, "B"),
        ({"L": 32, "N": 1, "B": 1}, "N"),
    ],
)
def test_bad_task_raises_naming_parameter(kwargs, word):
    with pytest.raises(ValueError, match=rf"^{word} must"):
        check_task(**kwargs)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="lr"):
        gradient_descent(SMALL_START, **TASK, lr=0.0, steps=10)
    with pytest.raises(ValueError, match="start"):
        gradient_flow((0.0, 0.0), **TASK, t_max=1.0)
    with pytest.raises(ValueError, match="param_x"):
        landscape_grid("xi", "xi", {"xi": (0, 1)}, {"beta1": 0.0}, **TASK)


def test_plateau_diverges_as_L_approaches_n():
    df = plateau_lengths([4.0001, 4.01, 5.0, 8.0, 32.0], N=8, B=2, time_scale=10.0)
    lengths = df["plateau_time"].to_numpy()
    assert np.all(np.diff(lengths) < 0)  # longer as L comes down to n
    assert lengths[0] > 20 * lengths[-1]
    np.testing.assert_allclose(df["plateau_steps"], 10.0 * lengths)
    assert plateau_length(4.0, N=8, B=2, start=(0.0, 0.0, 0.0), t_max=1e4) == math.inf
