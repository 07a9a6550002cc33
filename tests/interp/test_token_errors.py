"""Error counts of the token tasks (known answers on hand-made predictions), the per-10^4 tail and
its exact bound, and the resumable token run (cut in chunks, it equals one run). About 3 s."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from interp.analysis.token_errors import (
    ErrorCounts,
    error_counts,
    model_errors,
    per_10k,
    upper_per_10k,
)
from interp.data.cope_tasks import IGNORE, FlipFlop, TokenBatch
from interp.model.token_net import token_model_config
from interp.train.token_runs import MODEL, RESUME, train_token_run

X = IGNORE


def test_error_counts_count_answers_and_sequences_only_where_scored():
    targets = torch.tensor([[X, 3, X, 4], [X, X, X, X], [1, X, 2, X], [X, 6, X, X]])
    predicted = torch.tensor([[0, 3, 9, 5], [7, 7, 7, 7], [1, 0, 0, 0], [8, 6, 8, 8]])
    # answers: 3, 4 | none | 1, 2 | 6 -> 5; wrong: 4 (5), 2 (0) -> 2; the second row has no
    # answer (in no sequence count); rows 1 and 3 have a wrong answer, row 4 none
    assert error_counts(predicted, targets) == ErrorCounts(
        answers=5, errors=2, sequences=3, seq_errors=2
    )
    c = error_counts(predicted, targets)
    assert c.error_rate == pytest.approx(0.4) and c.seq_error_rate == pytest.approx(2 / 3)
    assert math.isnan(error_counts(predicted[1:2], targets[1:2]).error_rate)
    with pytest.raises(ValueError, match="predicted"):
        error_counts(predicted[:, :3], targets)


def test_per_10k_and_its_exact_upper_bound():
    assert per_10k(3, 20_000) == pytest.approx(1.5)
    assert math.isnan(per_10k(0, 0))
    # no error in n reads: 1 - 0.05^(1/n), about the rule of three (3 / n)
    assert upper_per_10k(0, 30_000) == pytest.approx(1e4 * (1 - 0.05 ** (1 / 30_000)))
    assert 0.99 < upper_per_10k(0, 30_000) < 1.0
    # 2 errors in 1000: the one-sided 95% Clopper-Pearson bound is 6.28e-3
    assert upper_per_10k(2, 1000) == pytest.approx(62.82, abs=0.01)
    assert upper_per_10k(5, 5) == 1e4


class _Fixed(torch.nn.Module):
    """A 'model' that predicts token 0 everywhere (logits favour id 0)."""

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, 3)
        logits[..., 0] = 1.0
        return logits


def test_model_errors_sum_over_chunks():
    tokens = torch.zeros(5, 2, dtype=torch.long)
    targets = torch.tensor([[0, X], [1, X], [X, X], [0, 0], [2, 1]])
    whole = model_errors(_Fixed(), TokenBatch(tokens, targets))
    assert whole == ErrorCounts(answers=6, errors=3, sequences=4, seq_errors=2)
    assert model_errors(_Fixed(), TokenBatch(tokens, targets), chunk=2) == whole


def _run(tmp_path, name, **kw):
    task = FlipFlop(n_instr=4)
    cfg = token_model_config(task, "cope")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_token_run(
            task, cfg, tmp_path / name, steps=30, eval_every=10, n_test=16, batch_size=16, **kw
        )


def test_a_token_run_cut_in_chunks_equals_one_run(tmp_path):
    whole = _run(tmp_path, "whole")
    part = _run(tmp_path, "cut", stop_after=10)
    assert (tmp_path / "cut" / RESUME).exists() and not (tmp_path / "cut" / MODEL).exists()
    assert list(part["step"]) == [0, 10]
    _run(tmp_path, "cut", stop_after=20)
    resumed = _run(tmp_path, "cut")
    assert not (tmp_path / "cut" / RESUME).exists()
    assert resumed.equals(whole)
    a = torch.load(tmp_path / "whole" / MODEL)
    b = torch.load(tmp_path / "cut" / MODEL)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # a finished run is read back, not trained again
    assert _run(tmp_path, "cut").equals(whole)


def test_a_token_run_of_another_spec_is_refused_naming_the_field(tmp_path):
    _run(tmp_path, "r", stop_after=10)
    spec = json.loads((tmp_path / "r" / "spec.json").read_text())
    assert spec["train"]["lr"] == 3e-3 and spec["task"]["class"] == "FlipFlop"
    with pytest.raises(ValueError, match=r"field train\.lr: 0\.003 != 0\.001"):
        _run(tmp_path, "r", lr=1e-3)
