"""The small token network of CoPE's token tasks (:mod:`interp.data.cope_tasks`): a token embedding
in front of the same hooked attention-only blocks as :class:`~interp.model.network.InductionNet`
(any encoding of :mod:`interp.model.positional`) and the same ReLU classifier, applied at every
position."""

from __future__ import annotations

import math

import torch
from jaxtyping import Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp.model.network import Classifier, ModelConfig, TransformerBlock, positional_from_config

__all__ = ["TokenNet", "token_model_config"]


def token_model_config(task, positional: str, **overrides) -> ModelConfig:
    """A small :class:`~interp.model.network.ModelConfig` for ``task`` (``D`` is the embedding
    width).

    The positional table covers the training length only (``n_positions = task.seq_len``): longer
    test sequences meet untrained absolute positions, reported by an
    :class:`~interp.model.positional.UntrainedPositionWarning`. Defaults: ``D = 32``, 2 layers, 1
    head, ``d_head = 32``, classifier of width 64 with 1 hidden layer, ``attn_scale = "sqrt"``.
    """
    base = dict(
        D=32,
        L=task.d_vocab,
        n_positions=task.seq_len,
        n_ctx_train=task.seq_len,
        positional=positional,
        d_head=32,
        d_mlp=64,
        n_mlp_layers=1,
        attn_scale="sqrt",
        cope_p_max=task.seq_len,
    )
    base.update(overrides)
    return ModelConfig.from_dict(base)


class TokenNet(HookedRootModule):
    """Token embedding + the hooked attention-only blocks + a per-position ReLU classifier.

    Hooks as :class:`~interp.model.network.InductionNet` (``hook_embed [batch, pos, D]``,
    ``hook_pos_embed``, ``blocks.{l}...``), except that the classifier runs at every position:
    ``classifier.hook_hidden_{i} [batch, pos, d_mlp]`` and ``hook_logits [batch, pos, d_vocab]``
    (``cfg.L`` is the vocabulary size).

    Args:
        cfg: network shape and parts (see :func:`token_model_config`).
        seed: seed of the weight initialisation (no global RNG is touched).
    """

    def __init__(self, cfg: ModelConfig, seed: int | None = 0) -> None:
        super().__init__()
        self.cfg = cfg
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            self.W_E = nn.Parameter(torch.randn(cfg.L, cfg.D) / math.sqrt(cfg.D))
            self.positional = positional_from_config(cfg)
            self.blocks = nn.ModuleList(
                TransformerBlock(cfg, self.positional) for _ in range(cfg.n_layers)
            )
            self.classifier = Classifier(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, D]
        self.hook_pos_embed = HookPoint()  # [batch, pos, *] as the encoding says
        self.hook_logits = HookPoint()  # [batch, pos, d_vocab]
        self.setup()

    def forward(self, tokens: Int[Tensor, "batch pos"]) -> Tensor:
        """Logits ``[batch, pos, d_vocab]``; positions are ``0 .. pos-1``."""
        positions = torch.arange(tokens.shape[1], device=tokens.device).expand(tokens.shape)
        embed = self.hook_embed(self.W_E[tokens])
        resid = self.positional.combine(embed, self.hook_pos_embed(self.positional(positions)))
        for block in self.blocks:
            resid = block(resid, positions)
        return self.hook_logits(self.classifier(resid))
