"""The scalar measures of a layer with two heads (docs/transformerlens.md, "Several heads per
layer"): one head does the circuit's job, the other attends uniformly, and each measure reports
the head doing the job (the largest value, or for ``N_eff`` the smallest), not the mean of the two,
nor whichever head comes first. Patterns are built by hand so that every value has a closed form.
"""

from __future__ import annotations

import pytest
import torch

from interp.analysis import probes
from interp.analysis.measures import compute_measures, progress_measures
from interp.data.task import Batch, TaskConfig, TaskGenerator
from interp.model.network import InductionNet, ModelConfig

N = 4  # item-label pairs: items at 0, 2, 4, 6, labels at 1, 3, 5, 7, the query at 8
N_POS = 2 * N + 1
W = 0.7  # the previous-token head's weight on the previous token (the rest on the token itself)
CLASSES = [[0, 1, 0, 1], [2, 3, 3, 2]]  # two copies of each class: items with induction targets
QUERY = [0, 3]  # the query's class: two labels of that class in each context


def _batch() -> Batch:
    classes = torch.tensor(CLASSES)
    return Batch(
        tokens=torch.zeros(2, N_POS, 3),
        positions=torch.arange(N_POS).expand(2, N_POS),
        item_classes=classes,
        item_labels=classes % 4,
        query_class=torch.tensor(QUERY),
        target=torch.tensor(QUERY) % 4,
    )


def _uniform() -> torch.Tensor:
    """Causal uniform attention ``[N_POS, N_POS]``: row ``t`` puts ``1 / (t + 1)`` on each key."""
    return torch.tril(torch.ones(N_POS, N_POS, dtype=torch.float64)) / torch.arange(
        1, N_POS + 1, dtype=torch.float64
    ).unsqueeze(1)


def _previous_token() -> torch.Tensor:
    """Row ``t >= 1``: ``W`` on ``t - 1`` and ``1 - W`` on ``t``; row 0 on itself."""
    p = torch.zeros(N_POS, N_POS, dtype=torch.float64)
    p[0, 0] = 1.0
    for t in range(1, N_POS):
        p[t, t - 1], p[t, t] = W, 1.0 - W
    return p


def _induction(batch: Batch) -> torch.Tensor:
    """``[batch, N_POS, N_POS]``: each row with induction targets spreads its attention evenly over
    them; the other rows attend to themselves."""
    mask = probes.induction_mask(batch).to(torch.float64)
    count = mask.sum(-1, keepdim=True)
    own = torch.eye(N_POS, dtype=torch.float64).expand_as(mask)
    return torch.where(count > 0, mask / count.clamp(min=1), own)


def _two_heads(job: torch.Tensor, job_head: int) -> torch.Tensor:
    """``[batch, 2, N_POS, N_POS]``: ``job`` in head ``job_head``, uniform attention in the
    other."""
    job = job.expand(2, N_POS, N_POS)
    uniform = _uniform().expand(2, N_POS, N_POS)
    heads = [uniform, uniform]
    heads[job_head] = job
    return torch.stack(heads, dim=1)


# Closed forms of the uniform head (label i at 2i + 1 sees 2i + 2 keys; the query sees 2N + 1).
UNIFORM_ILA1 = sum(1 / (2 * i + 2) for i in range(N)) / N
UNIFORM_PREV = sum(1 / (t + 1) for t in range(1, N_POS)) / (N_POS - 1)
UNIFORM_TILA2 = 2 / N_POS  # two labels of the query's class
UNIFORM_TLA2 = N / N_POS
# The previous-token head on label rows 1, 3, 5, 7: 1 / (W^2 + (1 - W)^2) keys of t + 1 visible.
PREV_NEFF = sum(1 / (W**2 + (1 - W) ** 2) / (t + 1) for t in range(1, N_POS - 1, 2)) / N


@pytest.fixture(params=[0, 1], ids=["job-head-first", "job-head-second"])
def job_head(request) -> int:
    return request.param


def test_ila1_and_the_previous_token_score_are_the_previous_token_heads(job_head):
    batch, l1 = _batch(), _two_heads(_previous_token(), job_head)
    assert probes.ila1(l1, batch) == pytest.approx(W, abs=1e-12)
    assert probes.prev_token_score(l1, batch) == pytest.approx(W, abs=1e-12)
    # the mean over heads would be between the two heads' values
    assert UNIFORM_ILA1 < W and UNIFORM_PREV < W
    assert probes.ila1(l1, batch) > (W + UNIFORM_ILA1) / 2 + 0.1


def test_tila2_tla2_and_the_induction_score_are_the_induction_heads(job_head):
    batch = _batch()
    l2 = _two_heads(_induction(batch), job_head)
    assert probes.tila2(l2, batch) == pytest.approx(1.0, abs=1e-12)
    assert probes.tla2(l2, batch) == pytest.approx(1.0, abs=1e-12)
    assert probes.induction_score(l2, batch) == pytest.approx(1.0, abs=1e-12)
    assert UNIFORM_TILA2 < 1 and UNIFORM_TLA2 < 1


def test_the_uniform_head_alone_scores_its_closed_form():
    # the reference values the tests above are told apart from
    batch = _batch()
    u = _uniform().expand(2, 1, N_POS, N_POS)
    assert probes.ila1(u, batch) == pytest.approx(UNIFORM_ILA1, abs=1e-12)
    assert probes.prev_token_score(u, batch) == pytest.approx(UNIFORM_PREV, abs=1e-12)
    assert probes.tila2(u, batch) == pytest.approx(UNIFORM_TILA2, abs=1e-12)
    assert probes.tla2(u, batch) == pytest.approx(UNIFORM_TLA2, abs=1e-12)


def test_the_registered_measures_report_the_job_heads(job_head):
    batch = _batch()
    l1 = _two_heads(_previous_token(), job_head)
    l2 = _two_heads(_induction(batch), job_head)
    logits = torch.zeros(2, 4)
    m = progress_measures([l1, l2], logits, batch)
    assert m["ila1"] == pytest.approx(W, abs=1e-12)
    assert m["prev_token_score"] == pytest.approx(W, abs=1e-12)
    assert m["tila2"] == pytest.approx(1.0, abs=1e-12)
    assert m["tla2"] == pytest.approx(1.0, abs=1e-12)
    assert m["induction_score"] == pytest.approx(1.0, abs=1e-12)
    # N_eff: the smallest over heads (the uniform head's is 1 on every row)
    assert m["l1_neff_labels"] == pytest.approx(PREV_NEFF, abs=1e-12)
    assert PREV_NEFF < 1
    assert m["l2_neff_query"] == pytest.approx(2 / N_POS, abs=1e-12)  # 2 keys of the 2N + 1


TASK = TaskConfig(D=15, K=16, L=8, N=4, N_max=4, B=2, p_C=0.5, n_eval=64)


def test_a_two_head_network_scores_as_its_previous_token_head(job_head):
    """InductionNet with ``n_heads=2``: all query-key weights zero (uniform attention) except one
    layer-1 head made a previous-token head on the one-hot positions; ILA1 and the previous-token
    score are that head's (1 to within ``exp(-c)``), not the mean with the uniform head."""
    model = InductionNet(ModelConfig.from_task(TASK, n_heads=2), seed=0).double()
    D, P, c = TASK.D, TASK.P, 40.0
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.zero_()
            block.attn.W_K.zero_()
        a0 = model.blocks[0].attn
        for p in range(P):
            a0.W_Q[job_head, D + p, p] = c
            if p + 1 < P:
                a0.W_K[job_head, D + p, p + 1] = 1.0
    ic = TaskGenerator(TASK, 0).eval_sets(seed=1)["ic"]
    ic = Batch(**{**ic.__dict__, "tokens": ic.tokens.double()})
    _, m = compute_measures(model, ic, ["ila1", "prev_token_score", "l1_neff_labels"])
    assert m["ila1"] == pytest.approx(1.0, abs=1e-6)
    assert m["prev_token_score"] == pytest.approx(1.0, abs=1e-6)
    # one key of t + 1 on each label row t: the mean of 1 / (t + 1) over t = 1, 3, 5, 7
    assert m["l1_neff_labels"] == pytest.approx(sum(1 / (t + 1) for t in (1, 3, 5, 7)) / 4, 1e-5)
