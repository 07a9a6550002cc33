"""The device sampler (interp.data.device_sampler): the host sampler's distribution, one stream per
run (stacked run i draws what a single run of that seed draws), exact resume, and training with
``sample_on="device"`` (stacked equals unstacked in float64, config.json, resume)."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from interp.data.device_sampler import CHUNK, DeviceSampler
from interp.data.task import Batch, TaskConfig, TaskGenerator
from interp.io.rundir import load_run
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.model.stacked import ModelStack, stacked_logits
from interp.train.training import TrainConfig, train, train_many

FIG3 = TaskConfig(K=256, L=32, N=8, B=1, p_C=0.8, n_eval=128)  # paper-fig3's task
BURSTY = TaskConfig(K=128, L=16, N=8, B=2, p_B=0.7, p_C=0.3, alpha=1.0, n_eval=128)  # Zipf
FRESH = TaskConfig(K=64, L=8, N=4, N_max=8, B=2, p_C=0.5, novel_pool=None, n_eval=128)


def _host(task: TaskConfig, n_batches: int, seed: int = 0) -> Batch:
    gen, g = TaskGenerator(task, 7), torch.Generator().manual_seed(seed)
    return Batch.cat([gen.sample(128, g) for _ in range(n_batches)])


def _device(task: TaskConfig, n_batches: int, seed: int = 0) -> Batch:
    sampler = DeviceSampler([TaskGenerator(task, 7)], [seed], 128)
    return Batch.cat([sampler.next_batch() for _ in range(n_batches)])


def _same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """Two samples of one discrete variable: a chi-square test of homogeneity at the 1e-3 level."""
    values = np.union1d(a, b)
    table = np.array([[np.sum(x == v) for v in values] for x in (a, b)])
    table = table[:, table.sum(0) >= 10]  # cells too small for the chi-square approximation
    if table.shape[1] < 2:
        assert np.array_equal(np.unique(a), np.unique(b)), what
        return
    p = stats.chi2_contingency(table)[1]
    assert p > 1e-3, f"{what}: p = {p:.2g}"


@pytest.mark.parametrize("task", [FIG3, BURSTY, FRESH], ids=["fig3", "zipf-bursty", "fresh"])
def test_device_batches_have_the_host_samplers_distribution(task):
    host, dev = _host(task, 40), _device(task, 40)  # 5120 sequences each, fixed seeds
    K, L = task.K, task.L
    assert dev.tokens.shape == host.tokens.shape and dev.positions.dtype == torch.long
    for b, name in ((host, "host"), (dev, "device")):
        novel = b.query_class >= K
        # The target is the label shown with the query's class (every sequence holds it when
        # bursty); known classes carry label k mod L, and every label token is its vector.
        assert torch.equal(b.target[~novel], b.query_class[~novel] % L), name
        known = b.item_classes < K
        assert torch.equal(b.item_labels[known], b.item_classes[known] % L), name
        gen = TaskGenerator(task, 7)
        assert torch.equal(b.tokens[:, 1:-1:2], gen.label_vectors[b.item_labels]), name
        # Known items are noisy copies of their class's mean: the noise is eps / sqrt(1+eps^2).
        scale = 1 / np.sqrt(1 + task.eps**2)
        diff = b.tokens[:, 0:-1:2][known] - gen.class_means[b.item_classes[known]] * scale
        assert abs(float(diff.std()) - task.eps * scale / np.sqrt(task.D)) < 2e-4, name
        # Positions: one random offset per sequence, then consecutive.
        steps = b.positions.diff(dim=1)
        assert bool((steps == 1).all()) and int(b.positions.max()) < task.P, name

    def per_seq(b: Batch) -> dict[str, np.ndarray]:
        novel = (b.query_class >= K).numpy()
        mask = b.query_class_mask()
        distinct = [len(set(row.tolist())) for row in b.item_labels]
        return {
            "novel share": novel.astype(int),
            "burst count (copies of the query's class)": mask.sum(1).numpy(),
            "distinct labels": np.array(distinct),
            "target": b.target.numpy(),
            "offset": b.positions[:, 0].numpy(),
            "query position among the items": mask.float().argmax(1).numpy(),
        }

    a, d = per_seq(host), per_seq(dev)
    for key in a:
        _same(a[key], d[key], key)
    assert abs(d["novel share"].mean() - task.p_C) < 4 * np.sqrt(task.p_C * (1 - task.p_C) / 5120)

    # Class and label frequencies over each sequence's distinct classes (labels): the B copies
    # of a class in a bursty sequence are one draw, not B independent ones.
    def distinct(x: torch.Tensor, keep: torch.Tensor | None = None) -> np.ndarray:
        rows = [set(r.tolist()) for r in x]
        return np.array([v for r in rows for v in r if keep is None or v < keep])

    _same(distinct(host.item_classes, K), distinct(dev.item_classes, K), "class freq")
    _same(distinct(host.item_labels), distinct(dev.item_labels), "label freq")
    # Item norms (items and the query), a continuous variable: Kolmogorov-Smirnov.
    for what, sl in (("item norms", slice(0, -1, 2)), ("query norms", slice(-1, None))):
        nh, nd = host.tokens[:, sl].norm(dim=-1).flatten(), dev.tokens[:, sl].norm(dim=-1).flatten()
        p = stats.ks_2samp(nh.numpy(), nd.numpy()).pvalue
        assert p > 1e-3, f"{what}: p = {p:.2g}"
    # Novel sequences of one batch share a pool of novel_pool means (or fresh ones per class).
    novel_ids = dev.item_classes[dev.item_classes >= K]
    per_batch = torch.unique(novel_ids).numel() / 40
    if task.novel_pool is not None:
        assert per_batch <= task.novel_pool
    else:
        assert per_batch == pytest.approx(128 * task.p_C * task.N // task.B, rel=0.1)


def test_a_stack_draws_for_each_run_the_batches_a_single_run_of_its_seed_draws():
    gens = [TaskGenerator(FIG3, s) for s in (3, 4, 5)]
    stacked = DeviceSampler(gens, [30, 40, 50], 16)
    singles = [DeviceSampler([g], [seed], 16) for g, seed in zip(gens, [30, 40, 50])]
    for _ in range(2 * CHUNK + 3):  # across refills
        tokens, positions, target = stacked.next_stacked()
        for s, single in enumerate(singles):
            batch = single.next_batch()
            assert torch.equal(tokens[s], batch.tokens)
            assert torch.equal(positions[s], batch.positions)
            assert torch.equal(target[s], batch.target)
    assert not torch.equal(tokens[0], tokens[1])  # the runs' streams differ


@pytest.mark.parametrize("stop", [CHUNK, CHUNK + 3])
def test_the_stream_continues_bit_for_bit_from_its_state(stop):
    gens = [TaskGenerator(FIG3, s) for s in (0, 1)]
    full = DeviceSampler(gens, [1, 2], 8)
    ref = [full.next_stacked()[0].clone() for _ in range(stop + CHUNK)]
    part = DeviceSampler(gens, [1, 2], 8)
    for _ in range(stop):
        part.next_stacked()
    states = [part.get_state(i) for i in range(2)]
    again = DeviceSampler(gens, [1, 2], 8)
    again.set_state(states)
    for i in range(stop, stop + CHUNK):
        assert torch.equal(again.next_stacked()[0], ref[i])
    with pytest.raises(ValueError, match="drawn"):
        again.set_state([states[0], {**states[1], "drawn": 1}])


def test_stacked_training_equals_unstacked_in_float64_over_200_steps():
    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
    cfg = ModelConfig.from_task(task, d_mlp=32)
    gens = [TaskGenerator(task, s) for s in range(3)]
    seeds = [11, 12, 13]
    stack = ModelStack([InductionNet(cfg, seed=s).double() for s in range(3)])
    separate = [InductionNet(cfg, seed=s).double() for s in range(3)]
    joint = DeviceSampler(gens, seeds, 8)
    alone = [DeviceSampler([g], [s], 8) for g, s in zip(gens, seeds)]
    opt = torch.optim.SGD(stack.parameters(), lr=0.1)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in separate]
    for _ in range(200):
        tokens, positions, target = joint.next_stacked()
        logits = stacked_logits(stack, tokens.double(), positions)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
        opt.zero_grad()
        loss.view(3, -1).mean(1).sum().backward()
        opt.step()
        for model, o, sampler in zip(separate, opts, alone):
            b = sampler.next_batch()
            o.zero_grad()
            logits = fast_logits(model, b.tokens.double(), b.positions)
            F.cross_entropy(logits, b.target).backward()
            o.step()
    moved = 0.0
    for i, model in enumerate(separate):
        start = InductionNet(cfg, seed=i).double().state_dict()
        for name, p in model.named_parameters():
            torch.testing.assert_close(stack.params[name][i], p, rtol=1e-9, atol=1e-11, msg=name)
            moved = max(moved, float((p.detach() - start[name]).abs().max()))
    assert moved > 1e-2  # the models did train


SMALL = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)
SMALL_MODEL = ModelConfig.from_task(SMALL, d_mlp=32)


def _cfg(**kw):
    base = dict(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=60,
        eval_every=20,
        checkpoint_every=40,
        n_log_checkpoints=3,
        sample_on="device",
    )
    return TrainConfig(**{**base, **kw})


def test_sample_on_device_trains_stacked_as_alone_resumes_exactly_and_is_recorded(tmp_path):
    many = train_many(
        SMALL, SMALL_MODEL, _cfg(), [0, 1], [tmp_path / "m0", tmp_path / "m1"], progress=False
    )
    for seed in (0, 1):
        single = train(SMALL, SMALL_MODEL, _cfg(seed=seed), tmp_path / f"s{seed}", progress=False)
        np.testing.assert_allclose(many[seed]["train_loss"], single["train_loss"], rtol=1e-4)
    host = train(SMALL, SMALL_MODEL, _cfg(sample_on="host"), tmp_path / "host", progress=False)
    assert not np.allclose(host["train_loss"][1:], many[0]["train_loss"][1:])  # another stream
    config = json.loads((tmp_path / "m0" / "config.json").read_text())
    assert config["train"]["sample_on"] == "device"
    assert load_run(tmp_path / "m0").train_config.sample_on == "device"
    # Interrupted inside a chunk of batches, resumed alone: the uninterrupted run, bit for bit.
    train(SMALL, SMALL_MODEL, _cfg(), tmp_path / "part", progress=False, stop_after=CHUNK * 2 + 3)
    resumed = train(SMALL, SMALL_MODEL, _cfg(), tmp_path / "part", resume=True, progress=False)
    full = train(SMALL, SMALL_MODEL, _cfg(), tmp_path / "full", progress=False)
    pd.testing.assert_frame_equal(resumed, full)


def test_a_format_4_config_without_sample_on_reads_as_host_and_a_bad_value_names_the_field(
    tmp_path,
):
    train(SMALL, SMALL_MODEL, _cfg(sample_on="host", steps=20), tmp_path / "old", progress=False)
    path = tmp_path / "old" / "config.json"
    config = json.loads(path.read_text())
    assert config["format_version"] == 5 and TrainConfig().sample_on == "device"
    config["format_version"] = 4
    del config["train"]["sample_on"]  # as written before the field existed
    path.write_text(json.dumps(config))
    old = load_run(tmp_path / "old")
    assert old.train_config.sample_on == "host"
    assert len(old.notes) == 1 and "format version 4, migrated to 5" in old.notes[0]
    longer = train(
        SMALL,
        SMALL_MODEL,
        _cfg(sample_on="host", steps=40),
        tmp_path / "old",
        resume=True,
        progress=False,
    )
    assert list(longer["step"]) == [0, 20, 40]  # it resumes under today's config
    # A format-5 config without the field (hand-written) reads as today's default.
    config["format_version"] = 5
    path.write_text(json.dumps(config))
    assert load_run(tmp_path / "old").train_config.sample_on == "device"
    with pytest.raises(ValueError, match=r"^TrainConfig.sample_on='gpu' is invalid"):
        TrainConfig(sample_on="gpu")


class _OwnSampler(TaskGenerator):
    """A task whose generator draws its training batches its own way (IW sequences only)."""

    def sample(self, batch_size, generator):
        return self.iw(batch_size, generator)


def test_a_task_with_its_own_sampler_draws_with_it_whatever_sample_on_says(monkeypatch):
    import interp.train.training as training
    from interp.data import device_sampler

    assert device_sampler.draws(TaskGenerator(SMALL, 0))
    assert not device_sampler.draws(_OwnSampler(SMALL, 0)) and not device_sampler.draws(object())
    with pytest.raises(ValueError, match="in-context classification task's own batches"):
        DeviceSampler([_OwnSampler(SMALL, 0)], [0], 32)
    # Trained under either value, the run draws the task's own stream on the host: the same run.
    monkeypatch.setattr(training, "make_generator", lambda task, seed: _OwnSampler(task, seed))
    runs = [
        train(SMALL, SMALL_MODEL, _cfg(sample_on=on, steps=20), None, progress=False)
        for on in ("device", "host")
    ]
    pd.testing.assert_frame_equal(*runs)
    monkeypatch.undo()  # the in-context task's own sampler: another stream, another run
    standard = train(SMALL, SMALL_MODEL, _cfg(sample_on="host", steps=20), None, progress=False)
    assert not np.allclose(standard["train_loss"][1:], runs[0]["train_loss"][1:])
