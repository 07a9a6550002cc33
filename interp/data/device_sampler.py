"""Training batches drawn on any torch device, many at a time, for one run or a stack of runs.

:class:`DeviceSampler` draws the training sequences of :meth:`TaskGenerator.sample
<interp.data.task.TaskGenerator.sample>` (the same distribution: novel-class sequences with
probability ``p_C``, else bursty with ``p_B``, else non-bursty) with tensor operations only, on
the device the model trains on (``TrainConfig.sample_on = "device"``, the default since run format
5):

- every run has **its own generator on that device** (seeded like the host stream, from
  ``derive_seed(seed, "stream")``); each refill takes one block of uniforms and one block of
  normals from it for the next :data:`CHUNK` batches, so the batches of run ``i`` depend on its
  generator alone: a stack of runs draws, for run ``i``, exactly the batches a single run of that
  seed draws on that device;
- the rest (labels, classes, permutations, noise, positions) is elementwise and per-row
  arithmetic on those blocks for all runs at once: no per-sequence Python work, a few dozen
  tensor operations per :data:`CHUNK` batches whatever the number of runs.

The stream differs from the host sampler's (another algorithm and, on a GPU, another generator),
so a run sampled on the device is not bit-identical to the host-sampled run of its seed; it is
reproducible on the same device, and a resumed run continues it bit for bit
(:meth:`get_state`, :meth:`set_state`). Sequences of the three kinds come interleaved (each
sequence's kind is drawn on its own), which the loss does not see.

Per sequence the uniforms are: two for its kind, ``L`` keys for its distinct labels (the
Efraimidis-Spirakis keys ``log(u) / w``, the largest ``N / B`` win: sampling without replacement
with weights ``w``), ``N`` for the class within each label, ``N`` for the order of the ``B``
copies, one for the query, ``N + 1`` for the classes of a non-bursty sequence and one for the
position offset. The normals: the items' noise, and the novel classes' means (a pool of
``novel_pool`` means per batch, or fresh means per class).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.data.task import Batch, TaskGenerator
from interp.data.tasks import get_task, task_name

__all__ = ["CHUNK", "DeviceSampler", "TrainingInputs", "draws", "draws_task", "sample_on_used"]

log = logging.getLogger(__name__)

CHUNK = 8  # batches drawn per refill; part of the stream's definition


class TrainingInputs(NamedTuple):
    """What a training step reads of one run's batch (:meth:`DeviceSampler.next_inputs`): the
    probes' metadata of a :class:`~interp.data.task.Batch` is not computed for it."""

    tokens: Tensor
    positions: Tensor
    target: Tensor


def draws(generator: object) -> bool:
    """Whether :class:`DeviceSampler` draws ``generator``'s training batches: a
    :class:`TaskGenerator` whose ``sample`` is the in-context task's own (a registered task that
    subclasses it with another ``sample``, like ``tests/fixtures/extra_task.py``, is not)."""
    return isinstance(generator, TaskGenerator) and type(generator).sample is TaskGenerator.sample


def draws_task(config: object) -> bool:
    """Whether :class:`DeviceSampler` draws the training batches of the task ``config``
    describes: decided from its registered generator (a class, else one generator built)."""
    factory = get_task(task_name(config)).generator
    if isinstance(factory, type):
        return issubclass(factory, TaskGenerator) and factory.sample is TaskGenerator.sample
    return draws(factory(config, 0))


def sample_on_used(config: object, sample_on: str) -> str:
    """The sampler a run of the task ``config`` uses when asked for ``sample_on``, which its
    ``config.json`` records: a task whose generator has a sampler of its own draws its batches
    on the host."""
    if sample_on != "device" or draws_task(config):
        return sample_on
    log.info("task %r draws its own batches: sample_on=host", task_name(config))
    return "host"


class DeviceSampler:
    """The training batches of ``S`` runs of one task configuration, drawn on ``device``.

    Args:
        generators: each run's :class:`TaskGenerator` (class means and label vectors; the same
            :class:`~interp.data.task.TaskConfig` for all).
        seeds: each run's stream seed (``derive_seed(seed, "stream")`` in training).
        batch_size: sequences per batch.
        device: where the batches are drawn and live.
    """

    def __init__(
        self,
        generators: Sequence[TaskGenerator],
        seeds: Sequence[int],
        batch_size: int,
        device: torch.device | str = "cpu",
    ) -> None:
        if not all(draws(g) for g in generators):
            raise ValueError(
                "DeviceSampler: the device sampler draws the in-context classification task's "
                "own batches only (interp.data.task.TaskGenerator.sample)"
            )
        if not generators or len(generators) != len(seeds):
            raise ValueError("DeviceSampler needs one seed for each of at least one generator")
        cfg = generators[0].config
        if any(g.config != cfg for g in generators):
            raise ValueError("DeviceSampler: the generators have different task configs")
        if isinstance(batch_size, bool) or not (isinstance(batch_size, int) and batch_size > 0):
            raise ValueError(f"batch_size={batch_size!r} is invalid: must be a positive integer")
        self.config, self.batch_size = cfg, batch_size
        self.device = device = torch.device(device)
        self.S = S = len(generators)
        self.generators = [torch.Generator(device=device) for _ in seeds]
        for g, seed in zip(self.generators, seeds):
            g.manual_seed(int(seed))
        self.class_means = torch.stack([g.class_means for g in generators]).to(device)
        self.label_vectors = torch.stack([g.label_vectors for g in generators]).to(device)
        self.class_means_flat = self.class_means.view(S * cfg.K, cfg.D)
        self.label_vectors_flat = self.label_vectors.view(S * cfg.L, cfg.D)
        gen = generators[0]
        self.uniform_labels = bool((gen.label_probs == gen.label_probs[0]).all())
        self.uniform_classes = bool((gen.class_probs == gen.class_probs[0]).all())
        self.label_probs = gen.label_probs.to(device)
        self.class_cdf = gen.class_probs.double().cumsum(0).float().to(device)
        self.within_cdf = gen.within_label_probs.double().cumsum(1).float().to(device)
        N, L = cfg.N, cfg.L
        self.n_cls = N // cfg.B if cfg.B > 0 else 0
        self.nu = 2 + L + N + N + 1 + (N + 1) + 1  # uniforms per sequence (module docstring)
        self.novel = cfg.p_C > 0
        self.pool = cfg.novel_pool if self.novel and cfg.novel_pool is not None else 0
        self.fresh = self.n_cls if self.novel and cfg.novel_pool is None else 0
        self.nz_seq = (N + 1 + self.fresh) * cfg.D  # normals per sequence
        self._table = self._token_table()
        # the fresh means' ids within a batch: sequence j's classes from j * fresh
        self._fresh_ids = (torch.arange(batch_size, device=device) * max(self.fresh, 1)).view(
            1, batch_size, 1
        )
        self.drawn = 0  # batches handed out (the same for every run)
        self._chunk: dict[str, Tensor] | None = None
        self._chunk_states: list[Tensor] = []

    def _token_table(self) -> Tensor:
        """The rows every token is looked up in, laid out once: each run's known class means
        (scaled by ``1 / sqrt(1 + eps^2)``), the novel means of a chunk (rewritten at every
        refill) and the label vectors."""
        cfg, S, D = self.config, self.S, self.config.D
        a = 1.0 / math.sqrt(1.0 + cfg.eps * cfg.eps)
        n_novel = CHUNK * self.pool if self.pool else CHUNK * self.batch_size * self.fresh
        n_novel *= S if self.novel else 0
        novel = self.class_means_flat.new_empty(n_novel, D)
        return torch.cat([self.class_means_flat * a, novel, self.label_vectors_flat])

    # ----------------------------------------------------------------------------------------

    def get_state(self, i: int = 0) -> dict:
        """Run ``i``'s position in its stream (for a resume state)."""
        # Inside a chunk: the state it was drawn from (set_state draws it again); between chunks:
        # the generator's own state, where the next chunk starts.
        inside = self.drawn % CHUNK != 0
        state = self._chunk_states[i] if inside else self.generators[i].get_state()
        return {"generator": state.clone(), "drawn": self.drawn}

    def set_state(self, states: Sequence[dict]) -> None:
        """Continue every run's stream where :meth:`get_state` left it (one state per run; the
        runs of a stack have drawn the same number of batches)."""
        if len(states) != self.S:
            raise ValueError(f"DeviceSampler.set_state: {len(states)} states for {self.S} runs")
        drawn = {int(s["drawn"]) for s in states}
        if len(drawn) != 1:
            raise ValueError(
                f"DeviceSampler.set_state: the runs have drawn {sorted(drawn)} batches"
            )
        for g, s in zip(self.generators, states):
            g.set_state(s["generator"])
        self.drawn = drawn.pop()
        self._chunk, self._chunk_states = None, []
        if self.drawn % CHUNK:
            self._refill()  # the chunk the stream is inside, drawn again from its start

    def next_stacked(self) -> tuple[Tensor, Tensor, Tensor]:
        """The next batch of every run: ``tokens [S, b, pos, D]``, ``positions [S, b, pos]``,
        ``target [S, b]`` (what training reads; the probes' metadata is not computed)."""
        i = self._advance()
        c = self._chunk
        return self._tokens(i), c["positions"][:, i], c["target"][:, i]

    def next_inputs(self) -> TrainingInputs:
        """The next batch of a single run (``S = 1``) as training reads it: tokens, positions,
        targets."""
        if self.S != 1:
            raise ValueError(f"DeviceSampler.next_inputs is for one run; this one has {self.S}")
        tokens, positions, target = self.next_stacked()
        return TrainingInputs(tokens[0], positions[0], target[0])

    def next(self) -> list[Batch]:
        """The next batch of every run, with the metadata the probes read."""
        i = self._advance()
        tokens = self._tokens(i)
        c = {**{k: v[:, i] for k, v in self._chunk.items()}, **self._metadata(i)}
        return [Batch(tokens=tokens[s], **{k: v[s] for k, v in c.items()}) for s in range(self.S)]

    def next_batch(self) -> Batch:
        """The next batch of a single run (``S = 1``), with the metadata the probes read."""
        if self.S != 1:
            raise ValueError(f"DeviceSampler.next_batch is for one run; this one has {self.S}")
        return self.next()[0]

    def _advance(self) -> int:
        """Batch ``drawn``'s index within its chunk (drawing the chunk at its first batch)."""
        i = self.drawn % CHUNK
        if i == 0 or self._chunk is None:
            self._refill()
        self.drawn += 1
        return i

    def _metadata(self, i: int) -> dict[str, Tensor]:
        """Batch ``i`` of the chunk's class ids (``item_classes [S, b, N]``, ``query_class [S,
        b]``): novel ids ``>= K``, unique within the run's stream (the pool, or fresh means, of
        batch ``t`` gets ids ``K + t * (its size) + index``, as the host sampler's counter does)."""
        seq_cls, seq_novel = self._classes
        cls, novel = seq_cls[:, i], seq_novel[:, i]
        t = self.drawn - 1  # the batch's number in the stream (drawn already counts it)
        if self.pool:
            novel_ids = cls + (self.config.K + t * self.pool)
        else:
            novel_ids = self._fresh_ids + (cls + (self.config.K + t * self.batch_size * self.fresh))
        ids = torch.where(novel, novel_ids, cls)
        N = self.config.N
        return {"item_classes": ids[..., :N], "query_class": ids[..., N]}

    def _tokens(self, i: int) -> Tensor:
        """Batch ``i`` of the chunk's tokens ``[S, b, pos, D]``, laid out when it is handed out
        (while the model that reads it next still has it in cache): every token from one flat
        table (:meth:`_token_table`), one lookup, then the noise added to the items and query."""
        tokens = F.embedding(self._index[:, i], self._table)  # faster than indexing on the CPU
        tokens[..., 0::2, :].add_(self._noise[:, i], alpha=self._noise_scale)
        return tokens

    # ----------------------------------------------------------------------------------------

    def _bursty(self, u_lab, u_within, u_perm, u_query, novel, plain, seq_cls, seq_lab):
        """The bursty sequences' classes and labels laid over the plain ones (``[S, C, b, N + 1]``
        each, items then the query), and which tokens are of novel classes."""
        cfg, S, b, dev = self.config, self.S, self.batch_size, self.device
        N, L, K, n_cls = cfg.N, cfg.L, cfg.K, self.n_cls
        # Bursty sequences: n_cls distinct labels (novel: uniform; known: weighted by the
        # labels' total class probability), a class within each, B copies in random order.
        labels_novel = u_lab.topk(n_cls, dim=-1).indices  # [S, C, b, n_cls]
        if self.uniform_labels:
            labels_known = labels_novel
        else:
            keys = u_lab.log() / self.label_probs  # Efraimidis-Spirakis: log(u) / w
            labels_known = keys.topk(n_cls, dim=-1).indices
        u_j = u_within[..., :n_cls]
        if self.uniform_labels and self.uniform_classes:
            j_known = (u_j * (K // L)).long().clamp_(max=K // L - 1)
        else:
            cdf = self.within_cdf[labels_known]  # [S, C, b, n_cls, K/L]
            j_known = (u_j[..., None] >= cdf).sum(-1).clamp_(max=K // L - 1)
        known_cls = labels_known + L * j_known
        if self.pool:
            j_novel = (u_j * (self.pool // L)).long().clamp_(max=self.pool // L - 1)
            novel_cls = labels_novel + L * j_novel  # index into the batch's pool
        else:
            novel_cls = torch.arange(n_cls, device=dev).expand_as(labels_novel)
        if cfg.B == 1 and self.uniform_labels:
            # One copy per class, and the top-k of i.i.d. keys comes in uniformly random
            # order already (weighted keys would put heavy labels first: those are shuffled).
            which = torch.arange(N, device=dev).expand(S, CHUNK, b, N)
        else:
            which = _burst_order(u_perm, n_cls, cfg.B)  # [S, C, b, N]: each item's class slot
        q = (u_query * n_cls).long().clamp_(max=n_cls - 1)[..., None]  # [S, C, b, 1]
        slots = torch.cat([which, q], dim=-1)  # items, then the query
        nb = novel[..., None]
        b_lab = (
            labels_novel
            if labels_known is labels_novel
            else torch.where(nb, labels_novel, labels_known)
        )
        b_lab = b_lab.gather(-1, slots)
        b_cls = torch.where(nb, novel_cls, known_cls).gather(-1, slots)
        seq_novel = nb.expand_as(b_cls)
        if plain is None:  # no non-bursty sequences (p_B = 1)
            return b_cls, b_lab, seq_novel
        is_b = (~plain)[..., None]
        seq_cls = torch.where(is_b, b_cls, seq_cls)
        seq_lab = torch.where(is_b, b_lab, seq_lab)
        return seq_cls, seq_lab, seq_novel

    def _refill(self) -> None:
        """Draw the chunk that batch ``drawn`` belongs to (its batches ``[S, CHUNK, b, ...]``)."""
        cfg, S, b, dev = self.config, self.S, self.batch_size, self.device
        N, L, K, D, n_cls = cfg.N, cfg.L, cfg.K, cfg.D, self.n_cls
        self._chunk_states = [g.get_state() for g in self.generators]
        R = CHUNK * b  # sequences per run in the chunk
        U = _per_run(torch.rand, R * self.nu, self.generators, dev).view(S, CHUNK, b, self.nu)
        nz = R * self.nz_seq + CHUNK * self.pool * D
        Z = _per_run(torch.randn, nz, self.generators, dev)
        noise = Z[:, : R * (N + 1) * D].view(S, CHUNK, b, N + 1, D)
        rest = Z[:, R * (N + 1) * D :]
        fresh = rest[:, : R * self.fresh * D].view(S, CHUNK, b, self.fresh, D)
        pool = rest[:, R * self.fresh * D :].view(S, CHUNK, self.pool, D)
        u_kind, u = U[..., :2], U[..., 2:]
        u_lab, u = u[..., :L], u[..., L:]
        u_within, u = u[..., :N], u[..., N:]
        u_perm, u = u[..., :N], u[..., N:]
        u_query, u = u[..., 0], u[..., 1:]
        u_plain, u_pos = u[..., : N + 1], u[..., N + 1]

        novel = u_kind[..., 0] < cfg.p_C  # [S, C, b]
        # With p_B = 1 (a uniform is < 1) and classes to burst, every sequence is bursty: the
        # non-bursty draws below would all be overwritten, so they are skipped (the stream, which
        # reserves their uniforms, is the same).
        plain = None if n_cls and cfg.p_B >= 1 else ~novel & ~(u_kind[..., 1] < cfg.p_B)

        # Non-bursty sequences: N items and the query, classes i.i.d. from p(k).
        seq_cls = seq_lab = seq_novel = None
        if plain is not None:
            if self.uniform_classes:
                plain_cls = (u_plain * K).long().clamp_(max=K - 1)
            else:
                plain_cls = torch.searchsorted(self.class_cdf, u_plain.contiguous())
                plain_cls = plain_cls.clamp_(max=K - 1)
            seq_cls, seq_lab = plain_cls, plain_cls % L  # [S, C, b, N + 1]
            seq_novel = torch.zeros_like(seq_cls, dtype=torch.bool)
        if n_cls:
            seq_cls, seq_lab, seq_novel = self._bursty(
                u_lab, u_within, u_perm, u_query, novel, plain, seq_cls, seq_lab
            )
        # Every token's row in one flat table: known classes' means from each run's table, novel
        # ones from the batch's pool or the sequence's fresh means (all scaled by
        # 1 / sqrt(1 + eps^2)), then label vectors; the lookup and the noise are per batch
        # (:meth:`_tokens`).
        eps = cfg.eps
        a = 1.0 / math.sqrt(1.0 + eps * eps)
        s_idx = torch.arange(S, device=dev).view(S, 1, 1, 1)
        index = s_idx * K + seq_cls
        table, base = self._table, S * K
        if self.novel:
            if self.pool:
                c_idx = torch.arange(CHUNK, device=dev).view(1, CHUNK, 1, 1)
                novel_index = base + (s_idx * CHUNK + c_idx) * self.pool + seq_cls
                means = pool
            else:
                r_idx = torch.arange(R, device=dev).view(1, CHUNK, b, 1)
                novel_index = base + ((s_idx * R + r_idx) * self.fresh) + seq_cls
                means = fresh
            index = torch.where(seq_novel, novel_index, index)
            novel_rows = table[base : base + means.numel() // D]
            torch.mul(means.reshape(-1, D), a / math.sqrt(D), out=novel_rows)  # in the table
            base += novel_rows.shape[0]
        n = 2 * N + 1
        full = torch.empty(S, CHUNK, b, n, dtype=torch.long, device=dev)
        full[..., 0::2] = index  # items and the query
        full[..., 1::2] = base + s_idx * L + seq_lab[..., :N]
        self._index, self._noise, self._noise_scale = full, noise, eps * a / math.sqrt(D)
        max_offset = cfg.P - n
        if max_offset < 0:
            offsets = torch.zeros_like(u_pos, dtype=torch.long)
        else:
            offsets = (u_pos * (max_offset + 1)).long().clamp_(max=max_offset)
        positions = offsets[..., None] + torch.arange(n, device=dev)
        self._classes = (seq_cls, seq_novel)  # the class ids: _metadata, asked for per batch
        self._chunk = {  # the tokens: _tokens, from _index and _noise
            "positions": positions,
            "item_labels": seq_lab[..., :N],
            "target": seq_lab[..., N],
        }


def _per_run(draw, n: int, generators: list[torch.Generator], device) -> Tensor:
    """``[S, n]``: ``n`` numbers from each run's own generator."""
    if len(generators) == 1:
        return draw(n, generator=generators[0], device=device)[None]
    return torch.stack([draw(n, generator=g, device=device) for g in generators])


def _burst_order(u_perm: Tensor, n_cls: int, B: int) -> Tensor:
    """The class slot of each of the ``N = n_cls * B`` items: ``B`` copies of each slot in the
    order of a random permutation (the argsort of ``N`` uniforms)."""
    slot = torch.arange(n_cls, device=u_perm.device).repeat_interleave(B)  # [N]
    return slot[u_perm.argsort(dim=-1)]
