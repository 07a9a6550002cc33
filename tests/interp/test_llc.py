"""The LLC driver (interp.analysis.llc): a known answer, diagnostics, llc.csv, the CLI and the
figure."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("devinterp", reason="the llc extra is not installed")

from interp.analysis.llc import (  # noqa: E402
    LLC_CSV,
    LLCConfig,
    estimate_llc,
    llc_columns,
    llc_over_checkpoints,
    parse_steps,
    read_llc_csv,
    write_llc_csv,
)
from interp.cli import main  # noqa: E402
from interp.config.train_config import TrainConfig  # noqa: E402
from interp.data.task import TaskConfig  # noqa: E402
from interp.experiments.standard import train  # noqa: E402
from interp.viz.llc_plots import plot_llc  # noqa: E402


def regression(d: int, n: int = 2000, batch: int = 500, seed: int = 0):
    """A linear model at its least-squares optimum and its data, in batches.

    With unit Gaussian noise the negative log-likelihood per sample is 0.5 (y - w.x)^2 + const,
    a regular model with d parameters: its learning coefficient is exactly d / 2.
    """
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    y = X @ torch.randn(d, generator=g) + torch.randn(n, generator=g)
    w_hat = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    with torch.random.fork_rng(devices=[]):  # nn.Linear's init draws from the global RNG
        model = torch.nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(w_hat[None])
    batches = [(X[i : i + batch], y[i : i + batch]) for i in range(0, n, batch)]
    return model, batches


def gaussian_nll(model, batch):
    x, y = batch
    return 0.5 * ((model(x)[:, 0] - y) ** 2).mean(), {}


# Settings for the regular model: a small step (eps 3e-3 with nbeta = 500 / log 500 = 80 keeps
# the discretisation bias small), no localization (it would shrink the estimate below d / 2).
REGULAR = LLCConfig(
    epsilon=3e-3, nbeta=500 / math.log(500), localization=0.0, chains=4, draws=200, burnin=100
)


@pytest.mark.parametrize("d", [4, 10])
def test_regular_model_llc_is_half_the_dimension(d):
    model, batches = regression(d)
    before = model.weight.detach().clone()
    est = estimate_llc(model, batches, gaussian_nll, REGULAR)
    # Known answer: lambda = d / 2 for a regular model. Tolerance 20%: at these settings one
    # chain's estimate has a standard deviation of ~10% of the value (~5% for the mean of 4), and
    # the SGLD step-size bias is a few per cent. d = 4 and d = 10 give disjoint bands.
    assert est.llc_mean == pytest.approx(d / 2, rel=0.2)
    assert est.failed_chains == 0 and est.warning == ""
    assert len(est.llc_chains) == 4 and all(np.isfinite(est.llc_chains))
    assert est.trace.shape == (4, 200)
    assert 0.0 < est.mala_acceptance <= 1.0
    assert torch.equal(model.weight, before)  # devinterp samples on copies


def test_step_size_too_large_is_a_warning_not_a_silent_nan():
    model, batches = regression(4)
    cfg = LLCConfig(epsilon=10.0, nbeta=80.0, localization=0.0, chains=2, draws=20, burnin=0)
    est = estimate_llc(model, batches, gaussian_nll, cfg)
    assert est.failed_chains == 2
    assert math.isnan(est.llc_mean) and all(math.isnan(v) for v in est.llc_chains)
    assert "2 of 2 chains diverged" in est.warning and "epsilon=10" in est.warning


def test_not_at_a_minimum_is_flagged_negative():
    # Far from the optimum SGLD walks downhill: the "LLC" comes out negative and is flagged.
    model, batches = regression(4)
    with torch.no_grad():
        model.weight.add_(3.0)
    cfg = LLCConfig(epsilon=3e-3, nbeta=80.0, localization=0.0, chains=2, draws=50, burnin=0)
    est = estimate_llc(model, batches, gaussian_nll, cfg)
    assert est.llc_mean < 0
    assert "LLC < 0" in est.warning


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="LLCConfig.epsilon"):
        LLCConfig(epsilon=0.0)
    with pytest.raises(ValueError, match="LLCConfig.nbeta"):
        LLCConfig(nbeta=float("nan"))
    with pytest.raises(ValueError, match="LLCConfig.chains"):
        LLCConfig(chains=0)
    with pytest.raises(ValueError, match="LLCConfig.draws"):
        LLCConfig(draws=2)
    assert LLCConfig(nbeta=None).resolved(128).nbeta == pytest.approx(128 / math.log(128))


def test_llc_csv_round_trips(tmp_path):
    rows = [
        {
            "step": 10,
            "llc_mean": 1.5,
            "llc_std": 0.25,
            "llc_chain_0": 1.25,
            "llc_chain_1": 1.75,
            "init_loss": 0.123456789,
            "mala_acceptance": 0.9,
            "trace_drift": 0.01,
            "failed_chains": 0,
            "seconds": 2.5,
            "epsilon": 1e-4,
            "nbeta": 26.38,
            "localization": 100.0,
            "chains": 2,
            "draws": 100,
            "burnin": 50,
            "batch_size": 128,
            "n_batches": 16,
            "seed": 0,
            "devinterp_version": "1.3.2",
            "warning": "",
        },
        {
            "step": 0,
            "llc_mean": float("nan"),
            "llc_std": float("nan"),
            "llc_chain_0": float("nan"),
            "llc_chain_1": float("nan"),
            "init_loss": 3.4,
            "mala_acceptance": float("nan"),
            "trace_drift": float("nan"),
            "failed_chains": 2,
            "seconds": 1.0,
            "epsilon": 1e-4,
            "nbeta": 26.38,
            "localization": 100.0,
            "chains": 2,
            "draws": 100,
            "burnin": 50,
            "batch_size": 128,
            "n_batches": 16,
            "seed": 0,
            "devinterp_version": "1.3.2",
            "warning": "2 of 2 chains diverged (NaN/inf loss): epsilon=0.0001 is too large; x, y",
        },
    ]
    df = pd.DataFrame(rows, columns=llc_columns(2))
    write_llc_csv(tmp_path, df)
    back = read_llc_csv(tmp_path / LLC_CSV)
    assert list(back["step"]) == [0, 10]  # sorted by step
    expected = df.sort_values("step").reset_index(drop=True)
    pd.testing.assert_frame_equal(back, expected, check_dtype=False)
    # No warning at all: the column still reads back as empty strings, not NaN.
    write_llc_csv(tmp_path, df.iloc[:1])
    assert list(read_llc_csv(tmp_path)["warning"]) == [""]


def test_calibration_picks_the_largest_settled_step_size():
    from interp.analysis.llc_calibration import _pick

    def table(llcs, warnings=None):
        eps = [1e-5, 3e-5, 1e-4, 3e-4]
        return pd.DataFrame(
            {
                "epsilon": eps * 2,
                "nbeta": [26.4] * 4 + [80.0] * 4,
                "llc_mean": llcs + [1.0, 50.0, 2.0, 90.0],
                "warning": (warnings or [""] * 4) + [""] * 4,
            }
        )

    # LLC 10 -> 30 -> 33 -> 35: settled from 1e-4 on (changes of 9% and 6%), so 3e-4.
    chosen, _ = _pick(table([10.0, 30.0, 33.0, 35.0]), default_nb=26.4)
    assert chosen == {"epsilon": 3e-4, "nbeta": 26.4}
    # The largest step size is flagged: the pair (3e-5, 1e-4) is the settled one.
    chosen, _ = _pick(table([10.0, 30.0, 33.0, 80.0], ["", "", "", "x"]), default_nb=26.4)
    assert chosen == {"epsilon": 1e-4, "nbeta": 26.4}
    # Still rising with the step size everywhere: nothing is chosen, and the reason says why.
    chosen, reason = _pick(table([4.0, 11.0, 35.0, 75.0]), default_nb=26.4)
    assert chosen is None and "not settled" in reason


def test_parse_steps():
    assert parse_steps("all", [0, 5, 10]) == [0, 5, 10]
    assert parse_steps("10,0", [0, 5, 10]) == [0, 10]
    with pytest.raises(ValueError, match=r"--steps.*no checkpoint at step\(s\) \[7\]"):
        parse_steps("7", [0, 5, 10])
    with pytest.raises(ValueError, match="--steps.*'x' is not an integer"):
        parse_steps("x", [0, 5, 10])


TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    train(
        TASK,
        None,
        TrainConfig(
            optimizer="adam",
            lr=3e-3,
            batch_size=32,
            steps=40,
            eval_every=10,
            checkpoint_every=20,
            n_log_checkpoints=0,
            checkpoint_on_jump=None,
        ),
        out,
        progress=False,
    )
    return out


# One worker: the pool (the default on several CPUs) has its own test below, not the CLI tests.
FAST = ["--chains", "2", "--draws", "10", "--burnin", "0", "--n-batches", "4", "--workers", "1"]


def test_cli_writes_resumes_and_refuses_other_settings(run_dir, capsys):
    assert main(["llc", str(run_dir), "--steps", "0,20", *FAST]) == 0
    first = read_llc_csv(run_dir / LLC_CSV)
    assert list(first["step"]) == [0, 20]
    assert {"llc_chain_0", "llc_chain_1", "mala_acceptance", "warning"} <= set(first.columns)
    assert (first["chains"] == 2).all() and (first["batch_size"] == 32).all()
    assert first["nbeta"].iloc[0] == pytest.approx(32 / math.log(32))
    # Resume: the done steps are skipped (their rows unchanged), the new one is added.
    capsys.readouterr()
    assert main(["llc", str(run_dir), "--steps", "all", *FAST]) == 0
    out = capsys.readouterr().out
    assert "step 0: already in llc.csv, skipped" in out and "step 20: already" in out
    again = read_llc_csv(run_dir / LLC_CSV)
    assert list(again["step"]) == [0, 20, 40]
    pd.testing.assert_frame_equal(again.iloc[:2], first)
    # Different settings are refused before any sampling, naming the field and the file.
    assert main(["llc", str(run_dir), *FAST, "--epsilon", "1e-3"]) == 2
    err = capsys.readouterr().err
    assert "epsilon=0.001 differs from" in err and "llc.csv" in err
    assert read_llc_csv(run_dir / LLC_CSV).equals(again)


def test_cli_bad_input_is_one_line(run_dir, tmp_path, capsys):
    assert main(["llc", str(tmp_path), *FAST]) == 3  # not a run: as from every command
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: RUN_DIR:") and "no config.json" in err and "\n" not in err
    assert main(["llc", str(run_dir), "--steps", "3", *FAST]) == 2
    assert "--steps='3' is invalid" in capsys.readouterr().err
    assert main(["llc", str(run_dir), "--chains", "0"]) == 2
    assert "LLCConfig.chains=0" in capsys.readouterr().err
    assert not (tmp_path / LLC_CSV).exists()


def test_cli_diverging_chains_warn_on_stderr_and_in_csv(tmp_path, run_dir, capsys):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(run_dir, run)
    (run / LLC_CSV).unlink(missing_ok=True)
    assert main(["llc", str(run), "--steps", "40", *FAST, "--epsilon", "1e3"]) == 0
    err = capsys.readouterr().err
    assert "warning: step 40:" in err and "chains diverged" in err
    assert err.count("chains diverged") == 1  # once, not again through the library's logger
    row = read_llc_csv(run).iloc[0]
    assert "2 of 2 chains diverged" in row["warning"] and math.isnan(row["llc_mean"])


def test_plot_llc_marks_flagged_estimates_and_transition():
    metrics = pd.DataFrame({"step": [0, 10, 20], "ic_acc": [0.1, 0.5, 0.9], "ila1": [0, 0.5, 1]})
    llc = pd.DataFrame(
        {
            "step": [0, 10, 20],
            "llc_mean": [1.0, float("nan"), 3.0],
            "llc_std": [0.1, float("nan"), 0.2],
            "llc_chain_0": [0.9, float("nan"), 2.8],
            "llc_chain_1": [1.1, float("nan"), 3.2],
            "warning": ["", "2 of 2 chains diverged", ""],
        }
    )
    fig = plot_llc(metrics, llc, transition_step=12)
    names = [t.name for t in fig.data]
    mean = fig.data[names.index("LLC (mean of chains)")]
    assert list(mean.x) == [0, 20] and list(mean.y) == [1.0, 3.0]  # the NaN is not joined
    flagged = fig.data[names.index("flagged estimate (see warning)")]
    assert list(flagged.x) == [10] and "diverged" in flagged.text[0]
    assert list(fig.data[names.index("LLC (each chain)")].y) == [0.9, 1.1, 2.8, 3.2]
    assert {"IC", "ILA1"} <= set(names)
    assert [s.x0 for s in fig.layout.shapes] == [12, 12]  # the transition, on both panels


def _llc_frame(steps, flagged=()) -> pd.DataFrame:
    """An ``llc.csv`` table of two chains at ``steps`` (LLC = step / 10 + 1; ``flagged`` steps
    carry a warning), as the estimator writes it."""
    settings = {"epsilon": 1e-4, "nbeta": 26.38, "localization": 100.0, "chains": 2, "draws": 10}
    settings |= {"burnin": 0, "batch_size": 32, "n_batches": 4, "seed": 0}
    rows = [
        {
            "step": s,
            "llc_mean": s / 10 + 1,
            "llc_std": 0.1,
            "llc_chain_0": s / 10 + 0.9,
            "llc_chain_1": s / 10 + 1.1,
            "init_loss": 2.0,
            "mala_acceptance": 0.9,
            "trace_drift": 0.01,
            "failed_chains": 0,
            "seconds": 1.0,
            **settings,
            "devinterp_version": "1.3.2",
            "warning": "drifting trace" if s in flagged else "",
        }
        for s in steps
    ]
    return pd.DataFrame(rows, columns=llc_columns(2))


def test_standard_figures_include_the_llc_figure_only_with_llc_csv(run_dir, tmp_path):
    """On its own (it writes the llc.csv it draws, so it passes run alone or in any order)."""
    import shutil

    from interp.viz.figures import write_standard_figures

    kw = {"formats": ("html",), "max_slider_checkpoints": 3, "n_average": 4}
    with_llc = tmp_path / "with_llc" / "tiny"
    shutil.copytree(run_dir, with_llc)
    write_llc_csv(with_llc, _llc_frame([0, 20, 40], flagged=[20]))
    names = {p.name for p in write_standard_figures([with_llc], tmp_path / "with", **kw)}
    assert {"llc_tiny.html", "llc_tiny.csv"} <= names
    plotted = pd.read_csv(tmp_path / "with" / "llc_tiny.csv")  # a row per step
    drawn = plotted.dropna(subset=["LLC (mean of chains)"])
    assert list(drawn["training step"]) == [0, 40]
    assert list(drawn["LLC (mean of chains)"]) == [1.0, 5.0]
    flagged = plotted.dropna(subset=["flagged estimate (see warning)"])
    assert list(flagged["training step"]) == [20]  # every estimate is drawn, the flagged apart
    bare = tmp_path / "bare" / "tiny"
    shutil.copytree(with_llc, bare)
    (bare / LLC_CSV).unlink()
    names = {p.name for p in write_standard_figures([bare], tmp_path / "without", **kw)}
    assert not any(n.startswith("llc_") for n in names)


def test_parallel_workers_give_the_one_thread_values(run_dir, tmp_path):
    """Two spawned one-thread workers write what one thread in this process writes (every
    estimate is seeded by its settings alone), sorted by step whatever order they finish in."""
    import shutil

    copies = []
    for name in ("serial", "pool"):
        copies.append(tmp_path / name)
        shutil.copytree(run_dir, copies[-1])
        (copies[-1] / LLC_CSV).unlink(missing_ok=True)
    cfg = LLCConfig(chains=2, draws=10, burnin=0, n_batches=4)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        serial = llc_over_checkpoints(copies[0], cfg, [40, 0, 20], workers=1)
    finally:
        torch.set_num_threads(threads)
    seen = []
    pooled = llc_over_checkpoints(
        copies[1], cfg, [40, 0, 20], workers=2, on_result=lambda s, e: seen.append(s)
    )
    assert sorted(seen) == [0, 20, 40]
    assert list(read_llc_csv(copies[1] / LLC_CSV)["step"]) == [0, 20, 40]
    cols = ["step", "llc_mean", "llc_std", "llc_chain_0", "llc_chain_1", "mala_acceptance"]
    pd.testing.assert_frame_equal(
        serial[cols].reset_index(drop=True), pooled[cols].reset_index(drop=True)
    )
    with pytest.raises(ValueError, match="workers=0 is invalid"):
        llc_over_checkpoints(copies[1], cfg, [0], workers=0)


def test_a_damaged_checkpoint_fails_before_any_estimate(run_dir, tmp_path):
    """With workers or without, an unreadable checkpoint among those asked for stops the command
    before any estimate: an existing llc.csv is left byte for byte (even with overwrite)."""
    import shutil

    from interp.io.checkpoints import CheckpointError

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / LLC_CSV).unlink(missing_ok=True)
    cfg = LLCConfig(chains=2, draws=10, burnin=0, n_batches=4)
    llc_over_checkpoints(run, cfg, [0], workers=1)
    before = (run / LLC_CSV).read_bytes()
    ckpt = next((run / "checkpoints").glob("step_*20.safetensors"))
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    for workers in (1, 2):
        with pytest.raises(CheckpointError, match="truncated or corrupted"):
            llc_over_checkpoints(run, cfg, [40, 20], workers=workers, overwrite=True)
        assert (run / LLC_CSV).read_bytes() == before
