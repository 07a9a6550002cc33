"""CoPE's own tasks: a positive control where content-based positions should beat absolute ones.

Golovneva et al. (2024) test CoPE on token tasks where the position that matters is counted in
*units of content* (writes, data tokens, statements), not tokens. Three small generators:

- :class:`FlipFlop`: instructions ``w`` (write), ``i`` (ignore), ``r`` (read), each followed by a
  bit; after ``r`` the network must output the bit of the last ``w`` (Liu et al. 2023).
- :class:`SelectiveCopy`: data tokens scattered among blanks, then a separator; the network must
  copy the data tokens in order.
- :class:`Counting`: variables set, incremented and printed among filler statements; after
  ``print v`` the network outputs ``v``'s value (modulo ``n_values``).

Each has an in-distribution test set (the training distribution) and out-of-distribution sets:
sparser content (more fillers, ignores or blanks at the same length) and longer sequences.

These are token tasks: :class:`interp.model.token_net.TokenNet` puts an embedding in front of the
same hooked blocks as the network, and :mod:`interp.train.token_training` trains it through the
one training loop and compares encodings. Loss and accuracy count only the answer positions
(``targets != IGNORE``).

[reconstruction] Vocabularies, lengths and probabilities are small versions chosen for a CPU; the
paper's sizes are larger (e.g. flip-flop of length 256). The shapes of the tasks follow the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from interp.data.tasks import TASKS, register_task

__all__ = [
    "IGNORE",
    "TokenBatch",
    "FlipFlop",
    "SelectiveCopy",
    "Counting",
    "COPE_TASKS",
]

IGNORE = -100  # target of positions that are not scored (F.cross_entropy's ignore_index)


@dataclass
class TokenBatch:
    """Token sequences and their targets.

    Attributes:
        tokens: token ids ``[batch, pos]``.
        targets: the token the network must output at each position, ``IGNORE`` where nothing is
            scored ``[batch, pos]``.
    """

    tokens: Int[Tensor, "batch pos"]
    targets: Int[Tensor, "batch pos"]

    def __len__(self) -> int:
        return self.tokens.shape[0]


@dataclass(frozen=True, kw_only=True)
class FlipFlop:
    """Flip-flop language: remember the last written bit across ignore instructions.

    A sequence is ``n_instr`` pairs ``(instruction, bit)``; the first instruction is ``w``; then
    ``w`` with probability ``(1 - p_ignore) / 2``, ``r`` likewise, ``i`` otherwise. The bit after
    ``r`` is the bit of the last ``w`` and is the target at the ``r`` token; other bits are random.

    Attributes:
        n_instr: instruction-bit pairs per training sequence (tokens: ``2 n_instr``).
        p_ignore: probability of ``i`` in training (in distribution).
        p_ignore_ood: probability of ``i`` of the sparse out-of-distribution set.
        ood_factor: length multiplier of the long out-of-distribution set.
    """

    n_instr: int = 16
    p_ignore: float = 0.8
    p_ignore_ood: float = 0.98
    ood_factor: int = 2

    W, I, R, ZERO, ONE = range(5)  # noqa: E741 - the flip-flop language's own letters
    d_vocab = 5

    @property
    def seq_len(self) -> int:
        return 2 * self.n_instr

    def sample(
        self,
        n: int,
        generator: torch.Generator,
        *,
        p_ignore: float | None = None,
        n_instr: int | None = None,
    ) -> TokenBatch:
        """``n`` sequences (training distribution unless ``p_ignore`` / ``n_instr`` are given)."""
        p_i = self.p_ignore if p_ignore is None else p_ignore
        T = n_instr or self.n_instr
        u = torch.rand(n, T, generator=generator)
        p_w = (1 - p_i) / 2
        instr = torch.where(u < p_w, self.W, torch.where(u < 2 * p_w, self.R, self.I))
        instr[:, 0] = self.W
        bits = torch.randint(0, 2, (n, T), generator=generator)
        # Last written bit up to each instruction: carry forward the bit of the latest write.
        is_w = instr == self.W
        idx = torch.where(is_w, torch.arange(T), 0).cummax(dim=1).values
        memory = bits.gather(1, idx)
        bits = torch.where(instr == self.R, memory, bits)
        tokens = torch.stack([instr, bits + self.ZERO], dim=2).reshape(n, 2 * T)
        targets = torch.full_like(tokens, IGNORE)
        targets[:, 0::2] = torch.where(instr == self.R, bits + self.ZERO, IGNORE)
        return TokenBatch(tokens, targets)

    def test_sets(self, n: int, seed: int) -> dict[str, TokenBatch]:
        """``id`` (training distribution), ``ood_sparse`` (``p_ignore_ood``), ``ood_long``."""
        g = torch.Generator().manual_seed(seed)
        return {
            "id": self.sample(n, g),
            "ood_sparse": self.sample(n, g, p_ignore=self.p_ignore_ood),
            "ood_long": self.sample(n, g, n_instr=self.ood_factor * self.n_instr),
        }


@dataclass(frozen=True, kw_only=True)
class SelectiveCopy:
    """Selective copy: copy the data tokens scattered among blanks, in order, after a separator.

    A sequence is a region of ``n_region`` tokens holding ``n_data`` data tokens (ids
    ``2 .. 2 + n_symbols - 1``) at random places among blanks (id 0), then the separator (id 1),
    then the data tokens again. The target at the separator is the first data token, at the
    ``k``-th copied token the ``k+1``-th.

    Attributes:
        n_data: data tokens per sequence.
        n_region: length of the region in training.
        n_symbols: distinct data tokens.
        ood_factor: region length multiplier of the out-of-distribution sets (``ood_sparse``: same
            data, more blanks).
    """

    n_data: int = 4
    n_region: int = 16
    n_symbols: int = 8
    ood_factor: int = 2

    BLANK, SEP = 0, 1

    @property
    def d_vocab(self) -> int:
        return 2 + self.n_symbols

    @property
    def seq_len(self) -> int:
        return self.n_region + 1 + self.n_data

    def sample(
        self, n: int, generator: torch.Generator, *, n_region: int | None = None
    ) -> TokenBatch:
        """``n`` sequences (training distribution unless ``n_region`` is given)."""
        R, k = n_region or self.n_region, self.n_data
        data = torch.randint(2, 2 + self.n_symbols, (n, k), generator=generator)
        # k distinct slots of the region, in increasing order.
        slots = torch.rand(n, R, generator=generator).argsort(dim=1)[:, :k].sort(dim=1).values
        region = torch.full((n, R), self.BLANK)
        region.scatter_(1, slots, data)
        tokens = torch.cat([region, torch.full((n, 1), self.SEP), data], dim=1)
        targets = torch.full_like(tokens, IGNORE)
        targets[:, R : R + k] = data  # at SEP -> d1, at d1 -> d2, ...
        return TokenBatch(tokens, targets)

    def test_sets(self, n: int, seed: int) -> dict[str, TokenBatch]:
        """``id`` (training distribution) and ``ood_sparse`` (a longer region, as many data)."""
        g = torch.Generator().manual_seed(seed)
        return {
            "id": self.sample(n, g),
            "ood_sparse": self.sample(n, g, n_region=self.ood_factor * self.n_region),
        }


@dataclass(frozen=True, kw_only=True)
class Counting:
    """Counting: variables set, incremented and printed among many filler statements.

    Every statement is three tokens: ``v = c`` (``VAR_v SET NUM_c``), ``v ++`` (``VAR_v INC
    FILL``), ``print v`` (``PRINT VAR_v NUM_value``) or a filler (``FILL FILL FILL``). Each
    variable is set first; the value is the last set value plus the increments since, modulo
    ``n_values``. The target at the ``VAR_v`` of a print is the value.

    Attributes:
        n_vars: variables.
        n_statements: statements per training sequence (after the initial sets).
        n_values: values (numbers are taken modulo it).
        p_filler: probability that a statement is a filler in training.
        p_filler_ood: filler probability of the sparse out-of-distribution set.
        ood_factor: length multiplier of the long out-of-distribution set.
    """

    n_vars: int = 2
    n_statements: int = 12
    n_values: int = 6
    p_filler: float = 0.5
    p_filler_ood: float = 0.85
    ood_factor: int = 2

    FILL, SET, INC, PRINT = range(4)

    @property
    def d_vocab(self) -> int:
        return 4 + self.n_vars + self.n_values

    @property
    def seq_len(self) -> int:
        return 3 * (self.n_vars + self.n_statements)

    def _var(self, v: Tensor) -> Tensor:
        return 4 + v

    def _num(self, c: Tensor) -> Tensor:
        return 4 + self.n_vars + c

    def sample(
        self,
        n: int,
        generator: torch.Generator,
        *,
        p_filler: float | None = None,
        n_statements: int | None = None,
    ) -> TokenBatch:
        """``n`` sequences (training distribution unless ``p_filler`` / ``n_statements`` given)."""
        p_f = self.p_filler if p_filler is None else p_filler
        S, V = n_statements or self.n_statements, self.n_vars
        values = torch.randint(0, self.n_values, (n, V), generator=generator)
        stmts = [
            torch.stack(
                [
                    self._var(torch.full((n,), v)),
                    torch.full((n,), self.SET),
                    self._num(values[:, v]),
                ],
                dim=1,
            )
            for v in range(V)
        ]
        targets = [torch.full((n, 3), IGNORE) for _ in range(V)]
        for _ in range(S):
            u = torch.rand(n, generator=generator)
            kind = torch.randint(0, 3, (n,), generator=generator)  # 0 set, 1 inc, 2 print
            var = torch.randint(0, V, (n,), generator=generator)
            new = torch.randint(0, self.n_values, (n,), generator=generator)
            filler = u < p_f
            rows = torch.arange(n)
            cur = values[rows, var]
            is_set, is_inc = (kind == 0) & ~filler, (kind == 1) & ~filler
            is_print = (kind == 2) & ~filler
            updated = torch.where(is_set, new, torch.where(is_inc, (cur + 1) % self.n_values, cur))
            values[rows, var] = updated
            s = torch.stack([self._var(var), torch.full((n,), self.SET), self._num(new)], dim=1)
            s = torch.where(
                is_inc[:, None],
                torch.stack(
                    [self._var(var), torch.full((n,), self.INC), torch.full((n,), self.FILL)], dim=1
                ),
                s,
            )
            s = torch.where(
                is_print[:, None],
                torch.stack([torch.full((n,), self.PRINT), self._var(var), self._num(cur)], dim=1),
                s,
            )
            s = torch.where(filler[:, None], torch.full_like(s, self.FILL), s)
            t = torch.full((n, 3), IGNORE)
            t[:, 1] = torch.where(is_print, self._num(cur), IGNORE)
            stmts.append(s)
            targets.append(t)
        return TokenBatch(torch.cat(stmts, dim=1), torch.cat(targets, dim=1))

    def test_sets(self, n: int, seed: int) -> dict[str, TokenBatch]:
        """``id``, ``ood_sparse`` (``p_filler_ood``) and ``ood_long`` (``ood_factor`` x length)."""
        g = torch.Generator().manual_seed(seed)
        return {
            "id": self.sample(n, g),
            "ood_sparse": self.sample(n, g, p_filler=self.p_filler_ood),
            "ood_long": self.sample(n, g, n_statements=self.ood_factor * self.n_statements),
        }


def token_task_generator(config, seed: int):
    """A CoPE token task generates its own sequences: the config is the generator
    (``sample(n, g)``, ``test_sets(n, seed)``)."""
    return config


# The registry's entries (interp.data.tasks): their own configs, the "tokens" layout (answer
# positions marked by targets != IGNORE), no progress measure of the in-context task applies.
for _name, _cls in (
    ("flipflop", FlipFlop),
    ("selective_copy", SelectiveCopy),
    ("counting", Counting),
):
    register_task(
        _name,
        token_task_generator,
        config=_cls,
        eval_sets=("id", "ood_sparse", "ood_long"),
        layout="tokens",
        measures=(),
        description=(_cls.__doc__ or "").strip().split("\n")[0]
        + " (train: interp.train.token_training.train_token_task)",
    )

COPE_TASKS = {name: TASKS[name].config for name in ("flipflop", "selective_copy", "counting")}
"""CoPE's token tasks by registered name (their configs, which generate their sequences)."""
