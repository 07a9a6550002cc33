"""The early-warning signal measures (``interp.analysis.signals``): known answers on hand-built
attention patterns and residual vectors, and their columns in a real run that loads them."""

import importlib
import json
import math
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from interp.analysis.measures import MEASURES, MeasureInputs
from interp.analysis.probes import pattern_hook
from interp.cli import main
from interp.data.task import Batch
from interp.io import plugins

PACKAGE = "interp.analysis.signals"
SIGNALS = ("attention_participation", "heat_capacity", "repetition_bias", "representation_collapse")
RESID = "blocks.1.hook_resid_post"


def _forget_signals() -> None:
    """Withdraw the signal measures and the package's modules, so that the next import (or
    ``--plugin``) registers them afresh."""
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    for name in SIGNALS:
        MEASURES.withdraw(name)


@pytest.fixture
def clean():
    """No signal registered and no plugin loaded during the test; both restored after it (other
    tests' runs must not get the signal columns)."""
    loaded = dict(plugins._LOADED)
    plugins._LOADED.clear()
    _forget_signals()
    yield
    _forget_signals()
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


@pytest.fixture
def sig(clean):
    """The signals package, imported (its measures registered) for this test only."""
    return importlib.import_module(PACKAGE)


def _batch(item_classes, query_class, d=3) -> Batch:
    """Sequences with these item classes and query classes (content and labels are not read)."""
    classes = torch.tensor(item_classes)
    b, n = classes.shape
    return Batch(
        tokens=torch.zeros(b, 2 * n + 1, d),
        positions=torch.arange(2 * n + 1).expand(b, -1),
        item_classes=classes,
        item_labels=classes % 2,
        query_class=torch.tensor(query_class),
        target=torch.tensor(query_class) % 2,
    )


# Three sequences of N = 3 pairs (7 keys on the query row): the query's class sits at items 0 and
# 2 (positions 0, 4) of the first, item 1 (position 2) of the second, and nowhere in the third.
COPIES = [[0, 4], [2], []]
BATCH = _batch([[5, 1, 5], [2, 3, 4], [6, 7, 8]], [5, 3, 9])
N_KEYS = 7


def _pattern(rows_per_head) -> torch.Tensor:
    """A pattern ``[3, heads, 7, 7]`` whose query row of sequence ``b`` in head ``h`` is
    ``rows_per_head[h][b]``; every other row is one-hot on key 0 (never read by these measures)."""
    heads = len(rows_per_head)
    p = torch.zeros(3, heads, N_KEYS, N_KEYS)
    p[..., 0] = 1.0
    for h, rows in enumerate(rows_per_head):
        for b, row in enumerate(rows):
            p[b, h, -1] = torch.as_tensor(row, dtype=p.dtype)
    return p


def _on(keys) -> torch.Tensor:
    row = torch.zeros(N_KEYS)
    if keys:
        row[keys] = 1.0 / len(keys)
    else:
        row[:] = 1.0 / N_KEYS
    return row


UNIFORM = [torch.full((N_KEYS,), 1.0 / N_KEYS)] * 3
ON_COPIES = [_on(c) for c in COPIES]  # the third sequence has no copy: uniform
ON_LABELS = [_on([k + 1 for k in c]) for c in COPIES]  # the labels after the copies


def _inputs(patterns, batch=BATCH, resid=None) -> MeasureInputs:
    acts = {pattern_hook(layer): p for layer, p in enumerate(patterns)}
    if resid is not None:
        acts[RESID] = resid
    return MeasureInputs(batch, torch.zeros(len(batch), 2), acts, 2)


# ---- repetition_bias


def test_repetition_bias_is_zero_for_uniform_attention_and_one_minus_share_on_the_copies(sig):
    rb = sig.repetition_bias
    uniform = _pattern([UNIFORM])
    assert rb.repetition_bias_per_head([uniform, uniform], BATCH).abs().max() < 1e-7
    # all on the copies: 1 - 2/7 and 1 - 1/7, mean over the two sequences that have copies
    on = _pattern([ON_COPIES])
    per_head = rb.repetition_bias_per_head([on, on], BATCH)
    assert per_head.flatten().tolist() == pytest.approx([11 / 14, 11 / 14])  # [layer, head]
    # all on the labels after the copies (an induction head's target): minus the uniform share
    labels = _pattern([ON_LABELS])
    assert rb.repetition_bias_per_head([labels], BATCH).item() == pytest.approx(
        -(2 / 7 + 1 / 7) / 2
    )


def test_repetition_bias_takes_the_largest_head_and_the_mean_over_layers(sig):
    # layer 1: head 0 uniform (0), head 1 on the copies (11/14); layer 2: both heads uniform (0)
    layer1 = _pattern([UNIFORM, ON_COPIES])
    layer2 = _pattern([UNIFORM, UNIFORM])
    value = sig.repetition_bias.repetition_bias([layer1, layer2], BATCH)
    assert value == pytest.approx(11 / 28)  # mean over heads: 11/56; max over layers: 11/14
    registered = MEASURES["repetition_bias"]
    assert registered.optional and registered.compute(_inputs([layer1, layer2])) == value
    # it reads only the query row of layer 2 (the evaluation's fast path computes only that row)
    assert registered.rows(BATCH).tolist() == [N_KEYS - 1]


def test_repetition_bias_is_nan_without_copies_in_the_context(sig):
    batch = _batch([[1, 2, 3]], [9])
    p = _pattern([UNIFORM])[:1]
    assert math.isnan(sig.repetition_bias.repetition_bias([p, p], batch))


# ---- attention_participation


def test_participation_is_one_for_uniform_and_one_over_keys_for_one_key(sig):
    ap = sig.attention_participation
    assert ap.participation_per_head(_pattern([UNIFORM])).item() == pytest.approx(1.0)
    one_key = _pattern([[_on([3])] * 3])
    assert ap.participation_per_head(one_key).item() == pytest.approx(1 / N_KEYS)


def test_participation_is_the_smallest_head_of_the_mean_over_sequences(sig):
    # head 0 uniform (1); head 1: one key, two keys, one key -> mean (1 + 2 + 1) / 3 over 7 keys
    p = _pattern([UNIFORM, [_on([3]), _on([0, 6]), _on([5])]])
    per_head = sig.attention_participation.participation_per_head(p)
    assert per_head.tolist() == pytest.approx([1.0, 4 / 3 / N_KEYS])
    registered = MEASURES["attention_participation"]
    value = registered.compute(_inputs([p, p]))
    assert value == pytest.approx(4 / 21)  # max over heads would give 1
    assert value == pytest.approx(MEASURES["l2_neff_query"].compute(_inputs([p, p])))


# ---- representation_collapse


def _resid(vectors) -> torch.Tensor:
    """A residual stream ``[n, 7, d]`` whose final position holds ``vectors`` (the other
    positions hold noise, never read)."""
    v = torch.as_tensor(vectors, dtype=torch.float32)
    r = torch.randn(v.shape[0], N_KEYS, v.shape[1], generator=torch.Generator().manual_seed(0))
    r[:, -1] = v
    return r


def test_collapse_is_one_for_identical_rows_and_zero_for_orthogonal_rows(sig):
    cos = sig.representation_collapse.mean_pairwise_cosine
    assert cos(torch.tensor([[1.0, 2.0, -1.0]] * 4)) == pytest.approx(1.0)
    assert cos(torch.eye(4)) == pytest.approx(0.0, abs=1e-12)
    assert cos(torch.tensor([[1.0, 0.0], [-3.0, 0.0]])) == pytest.approx(-1.0)
    assert math.isnan(cos(torch.ones(1, 3)))


def test_collapse_averages_over_distinct_pairs_only(sig):
    # cosines: (e1, 2 e1) = 1, (e1, e2) = 0, (2 e1, e2) = 0 -> 1/3 (with the diagonal: 5/9)
    vectors = [[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]]
    batch = _batch([[1, 2, 3]] * 3, [1, 2, 3])
    x = _inputs([_pattern([UNIFORM])] * 2, batch, resid=_resid(vectors))
    assert MEASURES["representation_collapse"].compute(x) == pytest.approx(1 / 3)


# ---- heat_capacity


def _closed_form(p: float) -> float:
    """Heat capacity of eigenvalues (p, 1 - p): p (1 - p) log^2(p / (1 - p))."""
    return p * (1 - p) * math.log(p / (1 - p)) ** 2


def test_heat_capacity_of_a_pair_matches_the_closed_form(sig):
    hc = sig.heat_capacity.pair_heat_capacity
    e1, e2 = torch.tensor([[1.0, 0.0, 0.0]]), torch.tensor([[0.0, 1.0, 0.0]])
    assert hc(e1, e2).item() == pytest.approx(0.0, abs=1e-12)  # (1/2, 1/2)
    assert hc(e1, 2 * e1).item() == pytest.approx(0.0, abs=1e-12)  # (1, 0): a pure state
    # orthogonal vectors of lengths 1 and 3: eigenvalues (1/10, 9/10)
    assert hc(e1, 3 * e2).item() == pytest.approx(_closed_form(0.1), rel=1e-9)
    # unit vectors at angle t: eigenvalues ((1 + cos t) / 2, (1 - cos t) / 2)
    t = 0.7
    x2 = torch.tensor([[math.cos(t), math.sin(t), 0.0]], dtype=torch.float64)
    assert hc(e1, x2).item() == pytest.approx(_closed_form((1 + math.cos(t)) / 2), rel=1e-9)
    assert math.isnan(hc(torch.zeros(1, 3), torch.zeros(1, 3)).item())


def test_heat_capacity_is_the_mean_over_disjoint_consecutive_pairs(sig):
    # pairs (0, 1): lengths 1 and 3, orthogonal -> C(0.1); (2, 3): parallel -> 0; row 4 left out.
    # Pairing (0, 2), (1, 3) instead would give 0 and C(9/13).
    vectors = [[1.0, 0.0], [0.0, 3.0], [1.0, 0.0], [2.0, 0.0], [0.0, 5.0]]
    batch = _batch([[1, 2, 3]] * 5, [1, 2, 3, 4, 5])
    x = _inputs([_pattern([UNIFORM])] * 2, batch, resid=_resid(vectors))
    value = MEASURES["heat_capacity"].compute(x)
    assert value == pytest.approx(_closed_form(0.1) / 2, rel=1e-6)
    assert sig.heat_capacity.mean_pair_heat_capacity(torch.tensor(vectors[:4])) == value


# ---- switched on for a run


def test_signals_are_listed_only_with_the_plugin(clean, capsys):
    assert main(["list", "measures"]) == 0
    assert not set(SIGNALS) & set(capsys.readouterr().out.split())
    assert main(["--plugin", PACKAGE, "list", "measures"]) == 0
    assert set(SIGNALS) <= set(capsys.readouterr().out.split())


def test_signal_columns_of_a_tiny_run_equal_an_independent_evaluation(clean, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10"]
    assert main(["--plugin", PACKAGE, *argv, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["step"]) == [0, 10, 20]
    assert np.isfinite(metrics[list(SIGNALS)].to_numpy()).all()
    assert json.loads((out / "config.json").read_text())["plugins"] == [PACKAGE]

    from interp.io.rundir import load_run

    sig = sys.modules[PACKAGE]
    run = load_run(out)
    model, ic = run.load_model(20), run.eval_sets()["ic"]
    _, cache = model.run_with_cache(ic.tokens, ic.positions)
    patterns = [cache[pattern_hook(0)], cache[pattern_hook(1)]]
    final = cache[RESID][:, -1]
    expected = {
        "repetition_bias": sig.repetition_bias.repetition_bias(patterns, ic),
        "attention_participation": float(
            sig.attention_participation.participation_per_head(patterns[1]).min()
        ),
        "representation_collapse": sig.representation_collapse.mean_pairwise_cosine(final),
        "heat_capacity": sig.heat_capacity.mean_pair_heat_capacity(final),
    }
    row = metrics.set_index("step").loc[20]
    for name, value in expected.items():
        assert row[name] == pytest.approx(value, rel=1e-5, abs=1e-7), name
