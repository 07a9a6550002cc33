"""Which classifier hidden-bias form an experiment's runs use, and the line its page says it in.

Under plain SGD the form decides whether a run can die (``docs/results/collapse-rate.md``), so
every declared SGD run pins ``hidden_bias``: in a sweep's overrides or grid, or, for an
experiment that trains its own runs, in its tier's ``hidden_bias``. Every page of an SGD
experiment names the form in its data section.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["hidden_bias_line", "sweep_optimizer", "tier_forms", "tier_is_sgd"]


def sweep_optimizer(sweep) -> tuple[str, ...]:
    """The optimisers a sweep's runs train with (its grid, its overrides, else its preset's)."""
    from interp.train.presets import get_preset

    if "optimizer" in sweep.grid:
        return tuple(str(o) for o in sweep.grid["optimizer"])
    return (str(sweep.overrides.get("optimizer", get_preset(sweep.preset).train.optimizer)),)


def tier_is_sgd(tier) -> bool:
    """Whether any run of the tier trains with plain SGD (a tier without sweeps declares its form
    in ``hidden_bias`` when it does)."""
    if tier.hidden_bias is not None:
        return True
    return any("sgd" in sweep_optimizer(s) for s in tier.sweeps)


def tier_forms(tier) -> list[str] | None:
    """The hidden-bias forms the tier's plain-SGD runs pin, in order; ``None`` when one of them
    does not pin one (it would train the preset's default of the day)."""
    if tier.hidden_bias is not None:
        return [tier.hidden_bias]
    forms: list[str] = []
    for s in tier.sweeps:
        if "sgd" not in sweep_optimizer(s):
            continue  # an Adam sweep: the form does not decide whether it can die
        if "hidden_bias" in s.grid:
            forms += [str(f) for f in s.grid["hidden_bias"]]
        elif "hidden_bias" in s.overrides:
            forms.append(str(s.overrides["hidden_bias"]))
        else:
            return None
    return list(dict.fromkeys(forms))


def hidden_bias_line(experiment, rows: pd.DataFrame) -> list[str]:
    """The data section's line naming the hidden-bias form of the rows' tiers (SGD experiments;
    nothing for the others)."""
    if experiment is None:
        return []
    tiers = [t for t in dict.fromkeys(rows["tier"].astype(str)) if t in experiment.tiers]
    tiers = [experiment.tiers[t] for t in tiers if tier_is_sgd(experiment.tiers[t])]
    if not tiers:
        return []
    forms: list[str] = []
    for t in tiers:
        pinned = tier_forms(t)
        if pinned is None:
            return ["- **Hidden biases:** not pinned by the experiment (the preset's default)."]
        forms += pinned
    named = ", ".join(f"`hidden_bias={f}`" for f in dict.fromkeys(forms))
    return [
        f"- **Hidden biases:** {named}, pinned by the experiment (plain SGD: the form decides "
        "whether a run can die, [collapse-rate.md](collapse-rate.md))."
    ]
