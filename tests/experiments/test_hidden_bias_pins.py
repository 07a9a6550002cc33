"""Every declared plain-SGD experiment pins the classifier's hidden-bias form (the form decides
whether a run can die), pins the form its committed data used, and its page names it."""

from __future__ import annotations

import pandas as pd
import pytest

from interp.experiments import EXPERIMENTS, get_experiment, load_catalogue
from interp.experiments.core import RESULTS_DIR, Experiment, Sweep, Tier
from interp.experiments.pins import hidden_bias_line, tier_forms, tier_is_sgd
from interp.model.network import HIDDEN_BIASES

# Runs written before run format 4 had per-unit hidden biases (docs/run-format.md).
FIRST_SCALAR_FORMAT = 4
assert load_catalogue()  # the checkout's experiments/ (the declared experiments)
SGD = sorted(n for n, e in EXPERIMENTS.items() if any(tier_is_sgd(t) for t in e.tiers.values()))


def test_the_sgd_experiments_are_found():
    assert {"fig3-seeds", "fig1d", "transition-law", "collapse-rate", "rope-qk-bias"} <= set(SGD)
    assert "demo" not in SGD and "quanta-alpha" not in SGD  # Adam only


@pytest.mark.parametrize("name", SGD)
def test_every_sgd_tier_pins_a_known_hidden_bias_form(name):
    for tier_name, tier in get_experiment(name).tiers.items():
        if not tier_is_sgd(tier):
            continue
        forms = tier_forms(tier)
        assert forms, f"{name} tier {tier_name}: a sweep does not pin hidden_bias"
        assert set(forms) <= set(HIDDEN_BIASES), (name, tier_name, forms)


@pytest.mark.parametrize("name", SGD)
def test_the_pinned_form_is_the_one_the_committed_data_used(name):
    csv = RESULTS_DIR / f"{name}.csv"
    if not csv.exists():
        pytest.skip(f"{csv.name} not committed")
    rows = pd.read_csv(csv)
    e = get_experiment(name)
    if "hidden_bias" in rows:  # the rows say their form themselves
        for tier in e.tiers.values():
            assert set(rows["hidden_bias"]) <= set(tier_forms(tier) or ()), name
        return
    for tier_name in set(rows["tier"]):
        tier = e.tiers[tier_name]
        if not tier_is_sgd(tier):
            continue
        versions = pd.to_numeric(rows.loc[rows["tier"] == tier_name, "format_version"])
        if (versions < FIRST_SCALAR_FORMAT).all():
            assert tier_forms(tier) == ["per_unit"], f"{name}: its data had per-unit biases"


@pytest.mark.parametrize("name", SGD)
def test_every_sgd_page_names_the_form_in_its_data_section(name):
    page = RESULTS_DIR / f"{name}.md"
    if not page.exists():
        pytest.skip(f"{page.name} not committed")
    data = page.read_text().split("## Data", 1)[1].split("\n## ", 1)[0]
    assert "hidden_bias" in data, f"{page}: its data section does not name hidden_bias"


def test_an_unpinned_sgd_sweep_is_found_and_the_line_says_so():
    unpinned = Tier(sweeps=(Sweep(preset="paper-fig3", overrides={"lr": 0.03}),))
    pinned = Tier(sweeps=(Sweep(preset="paper-fig3", grid={"hidden_bias": ("tied", "scalar")}),))
    adam = Tier(sweeps=(Sweep(preset="tiny"),))
    assert tier_is_sgd(unpinned) and tier_forms(unpinned) is None
    assert tier_forms(pinned) == ["tied", "scalar"] and not tier_is_sgd(adam)
    e = Experiment(
        name="x", title="x", question="x?", tiers={"quick": adam, "full": unpinned}, columns=()
    )
    rows = pd.DataFrame({"tier": ["full"]})
    assert hidden_bias_line(e, rows) == [
        "- **Hidden biases:** not pinned by the experiment (the preset's default)."
    ]
    assert hidden_bias_line(e, pd.DataFrame({"tier": ["quick"]})) == []
    tiers = {"quick": adam, "full": pinned}
    e = Experiment(name="x", title="x", question="x?", tiers=tiers, columns=())
    assert hidden_bias_line(e, rows)[0].startswith(
        "- **Hidden biases:** `hidden_bias=tied`, `hidden_bias=scalar`, pinned"
    )
