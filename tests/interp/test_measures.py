"""The progress-measure registry: declarations, the rows the fast path computes, what derives from
it (metrics.csv, the figures' tables, the fit's joint measures, ``list``), and plugins."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp.analysis import measures as reg
from interp.analysis.measures import (
    MEASURES,
    MeasureInputs,
    compute_measures,
    get_measure,
    last_layer_rows_read,
    progress_measures,
    register_measure,
)
from interp.analysis.probes import cache_patterns, pattern_hook
from interp.cli import main
from interp.data.task import Batch, TaskConfig, TaskGenerator
from interp.io import plugins
from interp.model.network import InductionNet, ModelConfig

FIXTURE = Path(__file__).parents[1] / "fixtures" / "extra_measure.py"
TASK = TaskConfig(D=15, K=16, L=8, N=4, N_max=4, B=2, p_C=0.5, n_eval=64)


@pytest.fixture
def registry():
    """Restore the measure registry and the loaded plugins after the test; the test starts with
    no plugin loaded (one an earlier test loaded would be recorded in its runs' config.json)."""
    saved, loaded = dict(MEASURES), dict(plugins._LOADED)
    plugins._LOADED.clear()
    yield MEASURES
    MEASURES.clear()
    MEASURES.update(saved)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


def _model_and_batch(dtype=torch.float64):
    ic = TaskGenerator(TASK, 0).eval_sets(seed=1)["ic"]
    ic = Batch(**{**ic.__dict__, "tokens": ic.tokens.to(dtype)})
    return InductionNet(ModelConfig.from_task(TASK), seed=0).to(dtype), ic


def test_cla_of_a_b1_batch_with_known_logits():
    # Two sequences, context labels {0, 1} and {2, 3}. Predictions 1 (in its context) and 5 (not).
    logits = torch.full((2, 8), -1.0)
    logits[0, 1] = 3.0
    logits[1, 5] = 3.0
    batch = Batch(
        tokens=torch.zeros(2, 5, 3),
        positions=torch.arange(5).expand(2, 5),
        item_classes=torch.tensor([[0, 1], [2, 3]]),
        item_labels=torch.tensor([[0, 1], [2, 3]]),
        query_class=torch.tensor([0, 2]),
        target=torch.tensor([0, 2]),
    )
    cla = get_measure("cla").compute(MeasureInputs(batch, logits, {}, 2))
    assert cla == 0.5
    logits[1, 3] = 4.0  # now label 3, which is in the second context
    assert get_measure("cla").compute(MeasureInputs(batch, logits, {}, 2)) == 1.0
    logits[:, 7] = 9.0  # label 7 is in neither context
    assert get_measure("cla").compute(MeasureInputs(batch, logits, {}, 2)) == 0.0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(name="Bad Name"), "name"),
        (dict(name="ic2_acc"), "name"),
        (dict(compute=3), "compute"),
        (dict(reads="blocks.0.attn.hook_pattern"), "reads"),
        (dict(rows=[1, 2]), "rows"),
        (dict(color="red"), "color"),
        (dict(direction="up"), "direction"),
        (dict(fit_quantity="s1"), "fit_map"),
        (dict(fit_quantity="s1", fit_map="cubic"), "fit_map"),
    ],
)
def test_invalid_declarations_name_the_field(registry, kwargs, field):
    args = dict(name="ok_name", compute=lambda x: 0.0, color="#123456", direction="rising")
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"Measure\.{field}="):
        register_measure(args.pop("name"), args.pop("compute"), **args)
    assert "ok_name" not in MEASURES and "Bad Name" not in MEASURES


def test_a_name_is_registered_once_unless_replaced(registry):
    register_measure("twice", lambda x: 1.0, color="#123456", direction="rising")
    with pytest.raises(ValueError, match=r"Measure\.name='twice'.*already registered"):
        register_measure("twice", lambda x: 2.0, color="#123456", direction="rising")
    register_measure("twice", lambda x: 2.0, color="#654321", direction="falling", replace=True)
    assert MEASURES["twice"].color == "#654321" and list(MEASURES)[-1] == "twice"
    reg.unregister_measure("twice")
    with pytest.raises(ValueError, match="registered measures are"):
        get_measure("twice")


def test_each_registered_measure_reads_only_the_rows_it_declares():
    """Each measure alone, on the fast path with only its declared rows of layer 2, equals the
    measure on the hooked model's full patterns (float64). A measure reading an undeclared row of
    layer 2 would see zeros there and fail this."""
    model, ic = _model_and_batch()
    _, cache = model.run_with_cache(ic.tokens, ic.positions)
    full = [cache[pattern_hook(0)], cache[pattern_hook(1)]]
    logits = cache["hook_logits"]
    reference = progress_measures(full, logits, ic)
    assert set(reference) >= set(reg.BUILTIN_MEASURES)
    for name in reference:
        rows = last_layer_rows_read(ic, 2, [name])
        assert rows is None or len(rows) < ic.tokens.shape[1], name  # rows really are skipped
        _, value = compute_measures(model, ic, [name])
        assert value[name] == pytest.approx(reference[name], rel=1e-9, abs=1e-12), name


def test_a_measure_without_rows_gets_the_full_pattern_not_zeros(registry):
    model, ic = _model_and_batch()
    _, full = cache_patterns(model, ic)
    expected = float(full[1][:, 0, 2, :3].sum(-1).mean())  # row 2 (an item): 1 up to rounding
    assert expected == pytest.approx(1.0)

    def item_row_mass(x):
        return float(x.pattern(1)[:, 0, 2, :3].sum(-1).mean())

    register_measure(
        "row2", item_row_mass, reads=(pattern_hook(1),), color="#123456", direction="rising"
    )
    assert last_layer_rows_read(ic, 2) is None  # every row is computed
    _, values = compute_measures(model, ic)
    assert values["row2"] == pytest.approx(expected, rel=1e-12)
    # ... whereas declaring only the query row leaves row 2 uncomputed (zeros): rows must cover
    # what the measure reads, which the test above checks for every registered measure.
    register_measure(
        "row2",
        item_row_mass,
        reads=(pattern_hook(1),),
        color="#123456",
        direction="rising",
        rows=lambda b: [b.tokens.shape[1] - 1],
        replace=True,
    )
    assert compute_measures(model, ic, ["row2"])[1]["row2"] == 0.0


def test_a_measure_of_another_activation_runs_the_hooked_model_on_that_hook(registry, monkeypatch):
    model, ic = _model_and_batch()
    hook = "blocks.1.hook_resid_pre"
    register_measure(
        "resid_mean",
        lambda x: float(x[hook].mean()),
        reads=(hook,),
        color="#123456",
        direction="rising",
    )
    seen = []
    run_with_cache = model.run_with_cache

    def spy(*args, names_filter=None, **kwargs):
        seen.append(sorted(n for n in model.hook_dict if names_filter(n)))
        return run_with_cache(*args, names_filter=names_filter, **kwargs)

    monkeypatch.setattr(model, "run_with_cache", spy)
    logits, values = compute_measures(model, ic, chunk=40)
    # The dead-unit measures read the classifier's hidden layers: the hooked run caches them too.
    hidden = [f"classifier.hook_hidden_{i}" for i in range(3)]
    expected = sorted([pattern_hook(0), pattern_hook(1), hook, *hidden])
    assert seen == [expected] * 2  # 64 sequences in chunks of 40
    _, cache = run_with_cache(ic.tokens, ic.positions)
    assert values["resid_mean"] == pytest.approx(float(cache[hook].mean()), rel=1e-12)
    assert values["ila1"] == pytest.approx(
        progress_measures(
            [cache[pattern_hook(0)], cache[pattern_hook(1)]], cache["hook_logits"], ic
        )["ila1"]
    )
    torch.testing.assert_close(logits, cache["hook_logits"])


def test_a_measure_reading_a_missing_hook_is_refused_by_name(registry):
    model, ic = _model_and_batch()
    register_measure(
        "ghost",
        lambda x: 0.0,
        reads=("blocks.7.hook_resid_post",),
        color="#123456",
        direction="rising",
    )
    with pytest.raises(ValueError, match=r"measure 'ghost'.*blocks\.7\.hook_resid_post"):
        compute_measures(model, ic)


def test_figure_tables_and_fit_measures_follow_the_registry(registry):
    from interp.viz.plots import METRIC_COLORS, METRIC_LABELS
    from phenomenology.fit import AUX_QUANTITIES, DEFAULT_MAPS

    # the built-ins keep the labels and colours the figures had before the registry
    assert METRIC_LABELS["tila2"] == "TILA2" and METRIC_COLORS["tila2"] == "#009E73"
    assert METRIC_LABELS["ic2_acc"] == "IC2"
    assert dict(AUX_QUANTITIES) == {
        "ic_loss": "loss",
        "ic_acc": "acc",
        "ila1": "s1",
        "tila2": "p",
        "cla": "cla",
    }
    assert dict(DEFAULT_MAPS) == {
        "ic_acc": "identity",
        "ila1": "affine",
        "tila2": "affine",
        "cla": "identity",
    }
    register_measure(
        "ila1_late",
        lambda x: 0.0,
        label="late ILA1",
        color="#AA3377",
        direction="rising",
        fit_quantity="s1",
        fit_map="affine",
    )
    assert METRIC_LABELS["ila1_late"] == "late ILA1" and METRIC_COLORS.get("ila1_late") == "#AA3377"
    assert AUX_QUANTITIES["ila1_late"] == "s1" and DEFAULT_MAPS["ila1_late"] == "affine"
    reg.unregister_measure("ila1_late")
    assert "ila1_late" not in AUX_QUANTITIES and METRIC_LABELS.get("ila1_late") is None


def test_list_prints_each_registry(registry, capsys):
    assert main(["list", "measures"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{n} " in f"\n{out}" for n in reg.BUILTIN_MEASURES)
    assert "query_resid_rms" not in out
    assert main(["list", "measures", "--plugin", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "query_resid_rms" in out and "blocks.0.hook_resid_post" in out and str(FIXTURE) in out
    expected = {
        "interventions": ["clamp_prev_token", "uniform_layer1", "uniform_layer2"],
        "presets": ["tiny", "demo", "paper-fig3"],
        "positional": ["onehot", "rope", "cope"],
        "models": ["nested-logit"],
    }
    for registry_name, names in expected.items():
        assert main(["list", registry_name]) == 0
        out = capsys.readouterr().out
        assert all(n in out for n in names), registry_name
    with pytest.raises(SystemExit):
        main(["list", "bogus"])


def test_plugin_errors_are_one_line_and_exit_2(registry, tmp_path, capsys):
    bad_colour = tmp_path / "bad_colour.py"
    bad_colour.write_text(
        "from interp import register_measure\n"
        "register_measure('x1', lambda x: 0.0, color='red', direction='rising')\n"
    )
    boom = tmp_path / "boom.py"
    boom.write_text("raise RuntimeError('boom')\n")
    cases = [
        ([str(tmp_path / "missing.py")], "no such file"),
        (["no_such_module_xyz"], "no such file or importable module"),
        ([str(bad_colour)], "Measure.color='red' is invalid"),
        ([str(boom)], "RuntimeError: boom"),
    ]
    for spec, message in cases:
        assert main(["--plugin", *spec, "list", "measures"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert main(["list", "measures", "--plugin"]) == 2
    assert "--plugin needs a value" in capsys.readouterr().err
    assert "x1" not in MEASURES
    ghost = tmp_path / "ghost.py"
    ghost.write_text(
        "from interp import register_measure\n"
        "register_measure('ghost', lambda x: 0.0, reads=('blocks.7.hook_resid_post',),\n"
        "                 color='#123456', direction='rising')\n"
    )
    out = tmp_path / "never"
    assert main(["--plugin", str(ghost), "train", "--preset", "tiny", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "measure 'ghost'" in err and "blocks.7.hook_resid_post" in err and "Traceback" not in err
    assert not out.exists()  # refused before any work
    # Ray workers would not load plugins: refused rather than runs silently without them
    sweep = ["sweep", "--preset", "tiny", "--seeds", "0", "--out", str(out), "--no-figures"]
    assert main(["--plugin", str(FIXTURE), *sweep, "--backend", "ray"]) == 2
    assert "Ray workers do not load plugins" in capsys.readouterr().err and not out.exists()


def test_plugin_measures_reach_metrics_csv_of_a_cli_run(registry, tmp_path, capsys):
    """The fixture module registers two measures (one reading a residual, one a layer-2 row); a
    tiny run trained through the CLI with --plugin has both columns, with the values an
    independent hooked evaluation of the saved checkpoint gives."""
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10"]
    assert main([*argv, "--out", str(out), "--quiet", "--plugin", str(FIXTURE)]) == 0
    capsys.readouterr()
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["step"]) == [0, 10, 20]
    config = json.loads((out / "config.json").read_text())
    assert config["plugins"] == [str(FIXTURE.resolve())]

    from interp.io.rundir import load_run

    run = load_run(out)
    assert 20 in run.checkpoint_steps
    model, ic = run.load_model(20), run.eval_sets()["ic"]
    _, cache = model.run_with_cache(ic.tokens, ic.positions)
    row = metrics.set_index("step").loc[20]
    rms = cache["blocks.0.hook_resid_post"][:, -1].pow(2).mean(-1).sqrt().mean()
    assert row["query_resid_rms"] == pytest.approx(float(rms), rel=1e-5)
    self_attention = cache[pattern_hook(1)][:, :, -1, -1].mean(0).max()
    assert row["query_self_l2"] == pytest.approx(float(self_attention), rel=1e-5)
    assert row["ila1"] == pytest.approx(
        progress_measures(
            [cache[pattern_hook(0)], cache[pattern_hook(1)]], cache["hook_logits"], ic, ["ila1"]
        )["ila1"],
        rel=1e-5,
    )

    # resuming without the plugin is refused, naming the field; with it, the run continues
    plugins._LOADED.clear()
    reg.unregister_measure("query_resid_rms")
    reg.unregister_measure("query_self_l2")
    resume = [
        "train",
        "--resume",
        "--set",
        "steps=30",
        "--set",
        "eval_every=10",
        "--preset",
        "tiny",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(resume) == 2
    err = capsys.readouterr().err
    assert "config.json field plugins" in err and f"--plugin {FIXTURE.resolve()}" in err
    assert main([*resume, "--plugin", str(FIXTURE)]) == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["step"]) == [0, 10, 20, 30] and metrics["query_resid_rms"].notna().all()

    # drawn by its declaration: the progress-measure figure of `figures` and the explorer
    assert (
        main(
            [
                "--plugin",
                str(FIXTURE),
                "figures",
                str(out),
                "--out",
                str(tmp_path / "f"),
                "--formats",
                "html",
            ]
        )
        == 0
    )
    drawn = pd.read_csv(tmp_path / "f" / "progress_measures.csv")
    # the tidy table beside the figure: a row per step, a column per curve drawn
    steps = drawn.columns[0]
    curve = drawn.set_index(steps)["L2 query self-attention"]
    np.testing.assert_allclose(curve.loc[metrics["step"]], metrics["query_self_l2"], rtol=1e-6)
    assert "query residual RMS" not in set(drawn.columns)  # panel="": not drawn
    from interp.viz.explorer import ExplorerConfig, explorer_data

    data = explorer_data(load_run(out), ExplorerConfig(n_sequences=1))
    assert data["labels"]["query_self_l2"] == "L2 query self-attention"
    assert data["colors"]["query_self_l2"] == "#882255"
    np.testing.assert_allclose(data["measures"]["query_self_l2"], metrics["query_self_l2"])
    assert "query_resid_rms" not in data["labels"]


def test_measures_command_recomputes_plugin_measures(registry, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--set", "steps=10", "--set", "eval_every=10", "--quiet"]
    assert main([*argv, "--out", str(out), "--plugin", str(FIXTURE)]) == 0
    assert main(["measures", str(out), "--n", "64", "--plugin", str(FIXTURE)]) == 0
    capsys.readouterr()
    df = pd.read_csv(out / "checkpoint_measures.csv")
    wide = df.pivot(index="step", columns="measure", values="value")
    assert set(wide.columns) == {"ic_acc", "ic_loss", *MEASURES}
    assert {"query_resid_rms", "query_self_l2"} <= set(wide.columns)
    from interp.io.rundir import load_run

    assert list(wide.index) == load_run(out).checkpoint_steps and 10 in wide.index


def test_metrics_row_columns_equal_an_independent_evaluation(tmp_path):
    """Every ``{ic,ic2,iw}_{acc,loss}`` column of a written row equals the plain hooked model's
    accuracy and F.cross_entropy on that set, at a step that is both an evaluation and a
    checkpoint."""
    from interp.config.train_config import TrainConfig
    from interp.experiments.standard import train
    from interp.io.rundir import load_run

    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)
    cfg = TrainConfig(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=20,
        eval_every=10,
        checkpoint_every=20,
        n_log_checkpoints=0,
    )
    train(task, ModelConfig.from_task(task, d_mlp=32), cfg, tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    row = run.metrics.set_index("step").loc[20]
    model = run.load_model(20)
    independent = {}
    with torch.no_grad():
        for name, batch in run.eval_sets().items():
            logits = model(batch.tokens, batch.positions)
            independent[f"{name}_acc"] = float((logits.argmax(-1) == batch.target).float().mean())
            independent[f"{name}_loss"] = float(F.cross_entropy(logits, batch.target))
    assert set(independent) == {f"{s}_{k}" for s in ("ic", "ic2", "iw") for k in ("acc", "loss")}
    for column, value in independent.items():
        assert row[column] == pytest.approx(value, abs=1e-6), column
    # the sets differ, so a column copied from another set could not pass
    assert len({round(independent[f"{s}_loss"], 6) for s in ("ic", "ic2", "iw")}) == 3
    assert len({independent[f"{s}_acc"] for s in ("ic", "ic2", "iw")}) >= 2
