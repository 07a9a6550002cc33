"""Known answers of the quanta analysis (interp/analysis/quanta.py), its figures and
``induction-cliff quanta``."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from interp.analysis.quanta import (
    analyse_run,
    class_frequencies,
    class_learning_steps,
    decompose_iw,
    fit_rank_exponent,
    frequency_ranks,
    ranks_tie,
)
from interp.cli import main
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


@pytest.fixture(scope="module")
def quanta_run(tmp_path_factory):
    """A tiny run with Zipf classes and the per-class evaluation."""
    out = tmp_path_factory.mktemp("quanta") / "run"
    args = ["train", "--preset", "tiny", "--set", "steps=60", "--set", "eval_every=10"]
    args += ["--set", "per_class_iw=4", "--set", "alpha=1", "--set", "p_B=0.5"]
    args += ["--set", "n_eval=128", "--set", "num_threads=1", "--out", str(out), "--quiet"]
    assert main(args) == 0
    return out


def test_exact_decomposition_matches_the_iw_set_of_a_trained_network(quanta_run):
    """The premise of the decomposition: the IW set draws its query class from p(k), so
    sum_k p(k) acc_k equals IW accuracy (here on large fresh sets, where sampling noise is
    small)."""
    from interp.analysis.evaluation import accuracy_and_loss, per_class_accuracy
    from interp.io.rundir import load_run

    run = load_run(quanta_run)
    gen = run.generator()
    model = run.load_model().eval()
    g = torch.Generator().manual_seed(123)
    acc = np.array(per_class_accuracy(model, gen.per_class_iw(64, g), run.task.K))
    iw = gen.iw(8192, g)
    with torch.no_grad():
        measured, _ = accuracy_and_loss(model(iw.tokens, iw.positions), iw)
    assert 0.2 < measured < 0.95  # learning under way: the comparison is not trivial
    p = class_frequencies(run.task.K, run.task.alpha)
    assert acc @ p == pytest.approx(measured, abs=0.025)


def test_cli_quanta_prints_and_writes_quanta_json(quanta_run, capsys):
    assert main(["quanta", str(quanta_run)]) == 0
    out = capsys.readouterr().out
    for words in ("classes learned:", "rank exponent", "predicted slope (alpha): 1", "RMS"):
        assert words in out
    saved = json.loads((quanta_run / "quanta.json").read_text())
    assert saved["K"] == 64 and saved["alpha"] == 1.0 and saved["threshold"] == 0.5
    assert len(saved["classes"]["t_k"]) == 64 and saved["classes"]["rank"][:3] == [1, 2, 3]
    assert saved["n_learned"] == sum(t is not None for t in saved["classes"]["t_k"])
    at_start = sum(t == 0 for t in saved["classes"]["t_k"])
    assert saved["n_learned_at_start"] == at_start
    assert saved["exponent"]["n_used"] == saved["n_learned"] - at_start
    assert f"{at_start} of them already at step 0 (left out of the fit)" in out
    # The same numbers as the library's, and t_k as the learning rule reads the file.
    from interp.io.rundir import load_run

    run = load_run(quanta_run)
    result = analyse_run(run)
    assert saved["exponent"]["slope"] == pytest.approx(result.fit.slope)
    t_k = class_learning_steps(pd.read_csv(quanta_run / "per_class_iw.csv"))
    assert [None if np.isnan(v) else v for v in t_k] == saved["classes"]["t_k"]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["--threshold", "1.5"], 2, "--threshold=1.5 is invalid"),
        (["--threshold", "x"], 2, "--threshold='x' is not a number"),
    ],
)
def test_cli_quanta_bad_input_is_one_line(quanta_run, capsys, args, code, words):
    assert main(["quanta", str(quanta_run), *args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0]


def test_cli_quanta_on_a_run_without_the_file(tmp_path, capsys):
    run = tmp_path / "plain"
    assert (
        main(["train", "--preset", "tiny", "--set", "steps=10", "--out", str(run), "--quiet"]) == 0
    )
    capsys.readouterr()
    assert main(["quanta", str(run)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "per_class_iw.csv is missing" in err[0]
    assert main(["quanta", str(tmp_path / "nothing")]) == 3
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_alpha_zero_run_says_there_is_no_exponent(tmp_path, capsys):
    run = tmp_path / "uniform"
    args = ["train", "--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10"]
    args += ["--set", "per_class_iw=2", "--set", "n_eval=32", "--out", str(run), "--quiet"]
    assert main(args) == 0
    assert main(["quanta", str(run)]) == 0
    assert "rank exponent: none (all classes have the same frequency rank (alpha = 0" in (
        capsys.readouterr().out
    )
    from interp.io.rundir import load_run
    from interp.viz.quanta_plots import quanta_figures_for_run

    figures = quanta_figures_for_run(load_run(run))
    assert list(figures) == ["quanta"]  # no rank figure without ranks


def test_figures_of_a_run_with_per_class_iw(quanta_run, tmp_path):
    from interp.io.rundir import load_run
    from interp.viz.figures import write_standard_figures
    from interp.viz.quanta_plots import plot_quanta, plot_rank_exponent

    result = analyse_run(load_run(quanta_run))
    fig = plot_quanta(result)
    names = [t.name for t in fig.data]
    assert names[:3] == [
        "IW accuracy (measured)",
        "Σ p(k) acc_k(t) (exact)",
        "Σ p(k) 1[t ≥ t_k] (sharp steps)",
    ]
    raster = next(t for t in fig.data if t.type == "heatmap")
    # Rows in rank order: with alpha > 0 row r is class r - 1, its accuracies over the steps.
    frame = result.frame
    np.testing.assert_array_equal(np.asarray(raster.z)[0], frame["c0"].to_numpy())
    np.testing.assert_array_equal(np.asarray(raster.z)[5], frame["c5"].to_numpy())
    rank = plot_rank_exponent(result)
    fitted = [t for t in rank.data if t.name.startswith("fit: slope")]
    predicted = [t for t in rank.data if t.name.startswith("predicted: slope")]
    assert len(fitted) == 1 and len(predicted) == 1
    # The lines' log-log slopes are the fitted and the predicted exponents.
    for trace, slope in ((fitted[0], result.fit.slope), (predicted[0], 1.0)):
        x, y = np.log(np.asarray(trace.x)), np.log(np.asarray(trace.y))
        assert (y[-1] - y[0]) / (x[-1] - x[0]) == pytest.approx(slope)
    written = write_standard_figures([quanta_run], tmp_path / "figs", formats=("html",))
    names = {p.name for p in written}
    assert {"quanta_run.html", "quanta_run.csv", "quanta_rank_run.html"} <= names
