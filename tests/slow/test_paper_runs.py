"""Long science checks (``pytest -m slow``): real training runs that must show the phenomenon.

- ``test_demo_preset_shows_plateau_then_jump``: the README's demo (a few minutes on 2 cores).
- ``test_paper_fig3_sgd_transition``: the paper's Fig 3 setting with its SGD for 60k steps (about
  30-40 minutes on 2 idle cores): a long plateau, then the abrupt rise of IC accuracy above 0.9,
  with CLA climbing during the plateau and ILA1/TILA2 rising together with IC accuracy.
"""

import dataclasses

import pytest

from interp.analysis.transition import detect_transition, event_order
from interp.experiments.standard import train
from interp.model.network import ModelConfig
from interp.train.presets import get_preset

pytestmark = pytest.mark.slow


def _check_phenomenon(metrics, *, min_plateau_over_width: float = 1.0):
    r = detect_transition(metrics["step"], metrics["ic_acc"])
    assert r.transitioned, r.reason
    # a plateau with IC accuracy well below the final level, lasting at least as long as the jump
    assert r.plateau_level < 0.2
    assert r.plateau_length >= min_plateau_over_width * r.width
    assert metrics["ic_acc"].iloc[-3:].max() > 0.9
    plateau = metrics[metrics["step"] < r.plateau_end]
    # the intrinsic curriculum: CLA climbs during the plateau
    assert plateau["cla"].iloc[-1] > plateau["cla"].iloc[0] + 0.3
    order = event_order(metrics, ["ila1", "tila2", "ic_acc"]).set_index("measure")
    # ILA1 and TILA2 jump together with IC accuracy (within two transition widths)
    for m in ("ila1", "tila2"):
        assert order.loc[m, "transitioned"], m
        assert abs(order.loc[m, "lag"]) < 2 * r.width, (m, order)
    return r


def test_demo_preset_shows_plateau_then_jump(tmp_path):
    p = get_preset("demo")
    metrics = train(
        p.task, ModelConfig.from_task(p.task), p.train, tmp_path / "demo", progress=False
    )
    _check_phenomenon(metrics)


def test_paper_fig3_sgd_transition(tmp_path):
    p = get_preset("paper-fig3")
    cfg = dataclasses.replace(p.train, steps=60_000)
    metrics = train(p.task, ModelConfig.from_task(p.task), cfg, tmp_path / "fig3", progress=False)
    r = _check_phenomenon(metrics)
    assert r.plateau_length > 5_000
