"""Every numeric range of the training, task and model configs at its edges: the value just inside
is accepted, the excluded boundary (or the value just past an included one) is refused with a
``ValueError`` naming the field."""

from __future__ import annotations

import math

import pytest

from interp.config.train_config import MAX_STEPS, TrainConfig
from interp.data.task import MAX_EPS, TaskConfig
from interp.model.network import MAX_LAYERS, ModelConfig


def _below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def _above(x: float) -> float:
    return math.nextafter(x, math.inf)


# (field, base settings, accepted value, refused value)
TRAIN = [
    ("lr", {}, 5e-324, 0.0),
    ("lr", {}, 1e300, math.inf),
    ("weight_decay", {}, 0.0, _below(0.0)),
    ("weight_decay", {}, _below(1.0), 1.0),  # multiplicative: [0, 1)
    ("weight_decay", {"weight_decay_form": "coupled"}, 0.0, _below(0.0)),
    ("weight_decay", {"weight_decay_form": "coupled"}, 1e300, math.inf),
    ("momentum", {}, 0.0, _below(0.0)),
    ("momentum", {}, _below(1.0), 1.0),
    ("batch_size", {}, 1, 0),
    ("steps", {}, 1, 0),
    ("steps", {}, MAX_STEPS, MAX_STEPS + 1),
    ("eval_every", {}, 1, 0),
    ("eval_every", {}, MAX_STEPS, MAX_STEPS + 1),
    ("checkpoint_every", {}, 1, 0),
    ("checkpoint_every", {}, MAX_STEPS, MAX_STEPS + 1),
    ("n_log_checkpoints", {}, 0, -1),
    ("n_log_checkpoints", {}, MAX_STEPS, MAX_STEPS + 1),
    ("checkpoint_on_jump", {}, 0.0, _below(0.0)),
    ("checkpoint_on_jump", {}, 1e300, math.inf),
    ("seed", {}, 0, -1),
    ("seed", {}, 2**63 - 1, 2**63),
    ("num_threads", {}, 1, 0),
    ("per_class_iw", {}, 0, -1),
]

_TASK = {"D": 8, "K": 32, "L": 8, "N": 8, "N_max": 8, "B": 2, "novel_pool": 8}
TASK = [
    ("D", {}, 1, 0),
    ("K", {"L": 2, "novel_pool": 2, "B": 4}, 2, 0),
    ("L", {"K": 2, "novel_pool": 2, "B": 4}, 2, 1),  # L >= 2
    ("L", {"novel_pool": 64}, 32, 64),  # L <= K = 32
    ("N", {"B": 0, "p_B": 0.0, "N_max": 1}, 1, 0),
    ("N", {"N_max": 8}, 8, 10),  # N <= N_max (B = 2 divides both)
    ("N_max", {"N": 1, "B": 0, "p_B": 0.0}, 1, 0),
    ("n_eval", {}, 1, 0),
    ("eps", {}, 0.0, _below(0.0)),
    ("eps", {}, MAX_EPS, _above(MAX_EPS)),
    ("eps", {}, MAX_EPS, math.inf),
    ("alpha", {}, 0.0, _below(0.0)),
    ("alpha", {}, 1e300, math.inf),
    ("p_B", {}, 0.0, _below(0.0)),
    ("p_B", {}, 1.0, _above(1.0)),
    ("p_C", {}, 0.0, _below(0.0)),
    ("p_C", {}, 1.0, _above(1.0)),
    ("B", {}, 4, 8),  # a divisor of N = 8 below N; N itself is refused
    ("B", {"L": 2, "K": 32, "novel_pool": 2}, 4, 2),  # N / B distinct labels <= L = 2
    ("B_eval", {}, 4, 8),
    ("novel_pool", {}, 8, 0),
]

_MODEL = {"D": 8, "L": 4, "n_positions": 9, "n_ctx_train": 9}
MODEL = [
    *((f, {}, 1, 0) for f in ("D", "L", "n_positions", "n_ctx_train", "n_heads", "d_mlp")),
    ("n_mlp_layers", {}, 1, 0),
    ("n_layers", {}, 1, 0),
    ("n_layers", {}, MAX_LAYERS, MAX_LAYERS + 1),
    ("d_head", {}, 1, 0),
    ("attn_init_std", {}, 5e-324, 0.0),
    ("n_ctx_train", {"attn_scale": "log_n"}, 2, 1),
]
# The positional encodings' own parameters, named as RopeConfig.FIELD / CopeConfig.FIELD.
_ROPE = {"positional": "rope", "d_head": 2}
POSITIONAL = [
    ("base", _ROPE, _above(1.0), 1.0),
    ("scale", _ROPE, 5e-324, 0.0),
    ("mix_b", _ROPE, 0.0, _below(0.0)),
    ("p_max", {"positional": "cope"}, 1, 0),
]


def _ids(table):
    return [f"{f}={bad!r}" for f, _, _, bad in table]


@pytest.mark.parametrize(("field", "base", "good", "bad"), TRAIN, ids=_ids(TRAIN))
def test_train_config_ranges(field, base, good, bad):
    assert getattr(TrainConfig(**base, **{field: good}), field) == good
    with pytest.raises(ValueError, match=rf"^TrainConfig\.{field}="):
        TrainConfig(**base, **{field: bad})


@pytest.mark.parametrize(("field", "base", "good", "bad"), TASK, ids=_ids(TASK))
def test_task_config_ranges(field, base, good, bad):
    settings = _TASK | base
    assert getattr(TaskConfig(**settings | {field: good}), field) == good
    with pytest.raises(ValueError, match=rf"^TaskConfig\.{field}="):
        TaskConfig(**settings | {field: bad})


def test_the_distinct_labels_of_the_evaluation_set_are_judged_on_n():
    # N / B_eval distinct labels must fit in L: B_eval = 4 gives 2 of L = 2, B_eval = 2 gives 4
    base = {"D": 8, "K": 32, "L": 2, "N": 8, "N_max": 8, "B": 4, "novel_pool": 2}
    assert TaskConfig(**base, B_eval=4).n_distinct == 2
    with pytest.raises(ValueError, match=r"^TaskConfig\.N="):
        TaskConfig(**base, B_eval=2)


@pytest.mark.parametrize(("field", "base", "good", "bad"), MODEL, ids=_ids(MODEL))
def test_model_config_ranges(field, base, good, bad):
    settings = _MODEL | base
    assert getattr(ModelConfig(**settings | {field: good}), field) == good
    with pytest.raises(ValueError, match=rf"^ModelConfig\.{field}"):
        ModelConfig(**settings | {field: bad})


@pytest.mark.parametrize(("field", "base", "good", "bad"), POSITIONAL, ids=_ids(POSITIONAL))
def test_positional_config_ranges(field, base, good, bad):
    settings = _MODEL | base
    model = ModelConfig(**settings, positional_config={field: good})
    assert getattr(model.positional_config, field) == good
    with pytest.raises(ValueError, match=rf"Config\.{field}={bad!r}"):
        ModelConfig(**settings, positional_config={field: bad})
